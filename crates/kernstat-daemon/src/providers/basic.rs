//! Facts prompts ask for: host name, user, kernel, uptime. From uname(2), getpwuid_r
//! and sysinfo(2): no process is spawned and no text file parsed.

use std::ffi::CStr;

use crate::cache::Cache;

fn field(b: &[libc::c_char]) -> String {
    // SAFETY: uname fills NUL-terminated strings within the arrays.
    unsafe { CStr::from_ptr(b.as_ptr()) }
        .to_string_lossy()
        .into_owned()
}

pub use kernstat_client::keys::host::BASIC_KEYS;

fn put_str(cache: &Cache, key: &str, v: &str) {
    if let Ok(j) = serde_json::to_vec(v) {
        cache.put(key, None, j);
    }
}

/// Publishes every fact (at start).
pub fn publish(cache: &Cache) {
    // SAFETY: uname writes into the struct we pass.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } == 0 {
        put_str(cache, "uname.sysname", &field(&u.sysname));
        put_str(cache, "uname.release", &field(&u.release));
        put_str(cache, "uname.version", &field(&u.version));
        put_str(cache, "uname.machine", &field(&u.machine));
    }
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    put_str(
        cache,
        "user.name",
        &kernstat_sources::users::by_uid(uid).map_or_else(|| uid.to_string(), |u| u.name),
    );
    cache.put("user.uid", None, uid.to_string().into_bytes());
    refresh(cache);
}

/// Re-publishes the facts that change while the daemon runs (each sample): the host
/// name (uname) and the uptime (sysinfo). Two system calls; the rest is fixed.
pub fn refresh(cache: &Cache) {
    // SAFETY: uname writes into the struct we pass.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } == 0 {
        let host = field(&u.nodename);
        put_str(
            cache,
            "hostname.short",
            host.split('.').next().unwrap_or(&host),
        );
        put_str(cache, "hostname.name", &host);
    }
    // SAFETY: sysinfo writes into the struct we pass.
    let mut si: libc::sysinfo = unsafe { std::mem::zeroed() };
    if unsafe { libc::sysinfo(&mut si) } == 0 {
        let up = si.uptime.max(0) as u64;
        cache.put("uptime.seconds", None, up.to_string().into_bytes());
        cache.put("uptime.days", None, (up / 86_400).to_string().into_bytes());
        cache.put(
            "uptime.hours",
            None,
            (up / 3600 % 24).to_string().into_bytes(),
        );
        cache.put(
            "uptime.minutes",
            None,
            (up / 60 % 60).to_string().into_bytes(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_match_the_system() {
        let c = Cache::new();
        publish(&c);
        let host: String =
            serde_json::from_slice(&c.get("hostname.name", None).unwrap().json).unwrap();
        let want = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        assert_eq!(host, want.trim());
        let rel: String =
            serde_json::from_slice(&c.get("uname.release", None).unwrap().json).unwrap();
        assert_eq!(
            rel,
            std::fs::read_to_string("/proc/sys/kernel/osrelease")
                .unwrap()
                .trim()
        );
        let up: u64 = serde_json::from_slice(&c.get("uptime.seconds", None).unwrap().json).unwrap();
        let proc_up: f64 = std::fs::read_to_string("/proc/uptime")
            .unwrap()
            .split_whitespace()
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert!((up as f64 - proc_up).abs() <= 2.0);
        let n = |k: &str| -> u64 { serde_json::from_slice(&c.get(k, None).unwrap().json).unwrap() };
        assert_eq!(
            n("uptime.days") * 86_400 + n("uptime.hours") * 3600 + n("uptime.minutes") * 60,
            up / 60 * 60
        );
        let short: String =
            serde_json::from_slice(&c.get("hostname.short", None).unwrap().json).unwrap();
        assert_eq!(short, want.trim().split('.').next().unwrap());
    }
}
