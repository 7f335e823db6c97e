//! `sudo.active`: whether the asking shell's sudo credentials are still cached, so a
//! prompt can warn that the next `sudo` will not ask. Read from sudo's own timestamp
//! file, `/run/sudo/ts/USER`, the way sudo matches it (plugins/sudoers/timestamp.c):
//! records of `struct timestamp_entry` (version 2, 56 bytes on 64-bit Linux), a
//! tty record matching the shell's terminal and its session leader's start time, a
//! ppid record matching the shell (the asking process, its parent, or its grandparent for
//! a `$(kernstat get ...)` run from a subshell) and its start time,
//! or a global record; not disabled (`sudo -k`); and younger than `timestamp_timeout`
//! (sudoers `Defaults`, else sudo's default 15 minutes) on CLOCK_MONOTONIC, sudo's clock.
//!
//! The directory is root's (0700): only a daemon running as root can read it. Anyone
//! else gets no value, never a guess.

use std::path::Path;
use std::time::Duration;

use super::{Client, Ctx, Provider, Reading};

/// The provider.
pub static PROVIDER: Provider = Provider {
    info: &kernstat_client::keys::context::SUDO,
    read,
};

/// Where sudo keeps timestamps (Debian, Fedora, Arch: /run/sudo/ts).
pub const TS_DIRS: &[&str] = &["/run/sudo/ts", "/var/run/sudo/ts", "/var/lib/sudo/ts"];
const TS_VERSION: u16 = 2;
const TS_GLOBAL: u16 = 1;
const TS_TTY: u16 = 2;
const TS_PPID: u16 = 3;
const TS_DISABLED: u16 = 1;
const TS_ANYUID: u16 = 2;
const RECORD: usize = 56;
/// sudo's compiled-in `timestamp_timeout`.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// One timestamp record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record {
    /// TS_GLOBAL, TS_TTY, TS_PPID (TS_LOCKEXCL and others are skipped by the matcher).
    pub kind: u16,
    /// TS_DISABLED, TS_ANYUID.
    pub flags: u16,
    /// Whom it authenticated.
    pub auth_uid: u32,
    /// Start time of the session leader (tty) or parent (ppid), as sudo records it.
    pub start: (i64, i64),
    /// When, on CLOCK_MONOTONIC.
    pub ts: (i64, i64),
    /// The terminal's device (tty) or the parent's pid (ppid).
    pub u: u64,
}

fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_ne_bytes([b[i], b[i + 1]])
}
fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_ne_bytes(b[i..i + 4].try_into().unwrap_or_default())
}
fn i64_at(b: &[u8], i: usize) -> i64 {
    i64::from_ne_bytes(b[i..i + 8].try_into().unwrap_or_default())
}

/// The version-2 records of a timestamp file (others, and a torn tail, are skipped).
pub fn parse(data: &[u8]) -> Vec<Record> {
    let mut out = Vec::new();
    let mut off = 0;
    while off + 4 <= data.len() {
        let (version, size) = (u16_at(data, off), usize::from(u16_at(data, off + 2)));
        if size < 4 || off + size > data.len() {
            break;
        }
        if version == TS_VERSION && size == RECORD {
            let b = &data[off..off + size];
            out.push(Record {
                kind: u16_at(b, 4),
                flags: u16_at(b, 6),
                auth_uid: u32_at(b, 8),
                start: (i64_at(b, 16), i64_at(b, 24)),
                ts: (i64_at(b, 32), i64_at(b, 40)),
                u: i64_at(b, 48) as u64,
            });
        }
        off += size;
    }
    out
}

/// A process's start time as sudo records it: /proc/PID/stat's starttime in clock
/// ticks, as (seconds, nanoseconds).
fn start_time(pid: i32) -> Option<(i64, i64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 2..];
    let ticks: i64 = rest.split(' ').nth(19)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let hz = i64::from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as i32).max(1);
    Some((ticks / hz, (ticks % hz) * (1_000_000_000 / hz)))
}

/// `timestamp_timeout` from the global `Defaults` lines of the sudoers files we can read.
fn timeout() -> Duration {
    let mut t = DEFAULT_TIMEOUT;
    let mut files = vec![std::path::PathBuf::from("/etc/sudoers")];
    if let Ok(rd) = std::fs::read_dir("/etc/sudoers.d") {
        let mut v: Vec<_> = rd.flatten().map(|e| e.path()).collect();
        v.sort();
        files.extend(v);
    }
    for f in files {
        let Some(text) = crate::client_files::read_path(
            &f,
            &crate::client_files::Rights::Own,
            super::files::MAX_FILE,
        )
        .ok()
        .map(super::files::text) else {
            continue;
        };
        for line in text.lines() {
            let Some(rest) = line.trim().strip_prefix("Defaults") else {
                continue;
            };
            if !rest.starts_with([' ', '\t']) {
                continue; // Defaults:user, Defaults@host ... apply to others
            }
            for item in rest.split(',') {
                if let Some((k, v)) = item.split_once('=') {
                    if k.trim() == "timestamp_timeout" {
                        if let Ok(min) = v.trim().parse::<f64>() {
                            t = if min < 0.0 {
                                Duration::MAX
                            } else {
                                Duration::from_secs_f64(min * 60.0)
                            };
                        }
                    }
                }
            }
        }
    }
    t
}

fn now_monotonic() -> (i64, i64) {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    (t.tv_sec, t.tv_nsec)
}

fn nanos((s, ns): (i64, i64)) -> i128 {
    i128::from(s) * 1_000_000_000 + i128::from(ns)
}

/// How long the asking client's credentials stay valid (None: none valid).
pub fn remaining(
    records: &[Record],
    client: &Client,
    timeout: Duration,
    now: (i64, i64),
) -> Option<Duration> {
    let now = nanos(now);
    let sid_start = client.sid.and_then(start_time);
    records
        .iter()
        .filter(|r| r.flags & TS_DISABLED == 0)
        .filter(|r| r.flags & TS_ANYUID != 0 || r.auth_uid == client.uid)
        .filter(|r| match r.kind {
            TS_GLOBAL => true,
            TS_TTY => client.tty.is_some_and(|t| t == r.u) && sid_start == Some(r.start),
            TS_PPID => [Some(client.pid), client.ppid, client.gppid]
                .into_iter()
                .flatten()
                .any(|p| p as u64 == r.u && start_time(p) == Some(r.start)),
            _ => false,
        })
        .filter_map(|r| {
            let age = now - nanos(r.ts);
            let left = i128::try_from(timeout.as_nanos()).unwrap_or(i128::MAX) - age;
            (age >= 0 && left > 0)
                .then(|| Duration::from_nanos(left.min(i128::from(u64::MAX)) as u64))
        })
        .max()
}

fn read(ctx: &Ctx) -> Reading {
    read_in(TS_DIRS, ctx)
}

/// [`read`] over the given timestamp directories (tests use their own).
fn read_in<P: AsRef<Path>>(dirs: &[P], ctx: &Ctx) -> Reading {
    let mut r = Reading::default();
    let Some(client) = ctx.client else { return r };
    let Some(user) = kernstat_sources::users::by_uid(client.uid) else {
        return r;
    };
    let mut all_absent = true;
    for dir in dirs {
        let dir = dir.as_ref();
        let file = dir.join(&user.name);
        r.watched.push(file.clone());
        match std::fs::read(&file) {
            Ok(data) => {
                let left = remaining(&parse(&data), client, timeout(), now_monotonic());
                r.set("active", left.is_some());
                r.set("expires_in_s", left.map(|d| d.as_secs()));
                // Expiry is not a file event: read again when it comes.
                r.expires =
                    Some(left.unwrap_or(Duration::from_secs(60)) + Duration::from_millis(100));
                return r;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match std::fs::read_dir(dir) {
                // A readable directory without the user's file: no credentials cached.
                Ok(_) => return inactive(r),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(_) => all_absent = false,
            },
            Err(_) => all_absent = false,
        }
    }
    // sudo makes its directory on first use (and /run is empty after a boot): with
    // none of them there, nobody has credentials cached. A directory we may not read
    // leaves no value.
    if all_absent {
        return inactive(r);
    }
    r
}

fn inactive(mut r: Reading) -> Reading {
    r.set("active", false);
    r.set("expires_in_s", None::<u64>);
    r.expires = Some(Duration::from_secs(60));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(
        kind: u16,
        flags: u16,
        uid: u32,
        start: (i64, i64),
        ts: (i64, i64),
        u: u64,
    ) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&TS_VERSION.to_ne_bytes());
        b.extend_from_slice(&(RECORD as u16).to_ne_bytes());
        b.extend_from_slice(&kind.to_ne_bytes());
        b.extend_from_slice(&flags.to_ne_bytes());
        b.extend_from_slice(&uid.to_ne_bytes());
        b.extend_from_slice(&0i32.to_ne_bytes());
        for v in [start.0, start.1, ts.0, ts.1, u as i64] {
            b.extend_from_slice(&v.to_ne_bytes());
        }
        b
    }

    #[test]
    fn matching_and_expiry() {
        let me = std::process::id() as i32;
        let my_start = start_time(me).unwrap();
        let client = Client {
            uid: 1001,
            pid: me,
            ppid: None,
            gppid: None,
            sid: None,
            tty: None,
        };
        let now = (1000, 0);
        let t = Duration::from_secs(900);
        let fresh = record(TS_PPID, 0, 1001, my_start, (900, 0), me as u64);
        let recs = parse(&[record(4, 0, 0, (0, 0), (0, 0), 0), fresh.clone()].concat());
        assert_eq!(recs.len(), 2);
        assert_eq!(
            remaining(&recs, &client, t, now),
            Some(Duration::from_secs(800))
        );
        // Expired, disabled, another user, another process, a reused pid.
        assert_eq!(remaining(&recs, &client, t, (1900, 0)), None);
        let off = parse(&record(
            TS_PPID,
            TS_DISABLED,
            1001,
            my_start,
            (900, 0),
            me as u64,
        ));
        assert_eq!(remaining(&off, &client, t, now), None);
        let other = parse(&record(TS_PPID, 0, 1002, my_start, (900, 0), me as u64));
        assert_eq!(remaining(&other, &client, t, now), None);
        let reused = parse(&record(
            TS_PPID,
            0,
            1001,
            (my_start.0 + 1, 0),
            (900, 0),
            me as u64,
        ));
        assert_eq!(remaining(&reused, &client, t, now), None);
        let global = parse(&record(TS_GLOBAL, 0, 1001, (0, 0), (999, 0), 0));
        assert_eq!(
            remaining(&global, &client, t, now),
            Some(Duration::from_secs(899))
        );
        // A torn tail is ignored.
        assert_eq!(parse(&fresh[..30]).len(), 0);
    }

    fn active_in(dirs: &[std::path::PathBuf], uid: u32) -> Option<serde_json::Value> {
        let client = Client {
            uid,
            pid: std::process::id() as i32,
            ppid: None,
            gppid: None,
            sid: None,
            tty: None,
        };
        let ctx = Ctx {
            path: None,
            env: &super::super::Env::Process,
            client: Some(&client),
            rights: &crate::client_files::Rights::Own,
        };
        let r = read_in(dirs, &ctx);
        r.fields
            .iter()
            .find(|(k, _)| k == "active")
            .map(|(_, v)| v.clone())
    }

    #[test]
    fn no_directory_after_a_boot_means_inactive() {
        let tmp = std::env::temp_dir().join(format!("ks-sudo-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        std::fs::create_dir_all(&tmp).unwrap();
        let uid = unsafe { libc::getuid() };
        // None of sudo's directories exist yet (a fresh /run): nothing is cached.
        let absent = vec![tmp.join("run-sudo-ts"), tmp.join("var-lib-sudo-ts")];
        assert_eq!(active_in(&absent, uid), Some(false.into()));
        // A directory without the user's file: nothing cached.
        std::fs::create_dir(&absent[1]).unwrap();
        assert_eq!(active_in(&absent, uid), Some(false.into()));
        // A file with a global record of now: cached.
        let now = now_monotonic();
        let user = kernstat_sources::users::by_uid(uid).unwrap();
        std::fs::write(
            absent[1].join(&user.name),
            record(TS_GLOBAL, 0, uid, (0, 0), now, 0),
        )
        .unwrap();
        assert_eq!(active_in(&absent, uid), Some(true.into()));
        // A directory that exists but is not a directory we can list gives no value.
        let file_not_dir = vec![tmp.join("plain")];
        std::fs::write(&file_not_dir[0], b"").unwrap();
        assert_eq!(active_in(&file_not_dir, uid), None);
        let _ = std::fs::remove_dir_all(&tmp);
    }
}
