//! `kernstat doctor`: what this kernel and these privileges allow, and which path each
//! command will take. Every line is read from the system (sysfs, procfs, BTF) or tried
//! (a trampoline attach, when privileged), never assumed from the kernel version.

use std::path::Path;

use kernstat_bpf::loader::{has_bpf_privileges, VMLINUX_BTF};
use serde_json::json;

use crate::cli::DoctorArgs;

/// bpffs' statfs magic (linux/magic.h).
const BPF_FS_MAGIC: i64 = 0xcafe_4a11;

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// The BPF-related capabilities in the effective set, by name.
fn effective_caps() -> Vec<&'static str> {
    let eff = kernstat_bpf::loader::effective_caps().unwrap_or(0);
    [(21, "CAP_SYS_ADMIN"), (38, "CAP_PERFMON"), (39, "CAP_BPF")]
        .into_iter()
        .filter(|(bit, _)| eff & (1u64 << bit) != 0)
        .map(|(_, name)| name)
        .collect()
}

fn bpffs_mounted(p: &str) -> bool {
    // f_type's width differs between architectures: the cast is not always a no-op.
    #[allow(clippy::unnecessary_cast)]
    rustix::fs::statfs(p)
        .map(|s| s.f_type as i64 == BPF_FS_MAGIC)
        .unwrap_or(false)
}

/// The active lockdown mode ("none", "integrity", "confidentiality"), if the kernel says.
fn lockdown() -> Option<String> {
    let s = read("/sys/kernel/security/lockdown")?;
    let start = s.find('[')? + 1;
    let end = s[start..].find(']')? + start;
    Some(s[start..end].to_string())
}

/// Whether BPF trampolines attach here (kernstat-bpf's one probe, which mounts nothing:
/// the collector's fallback would mount tracefs, and doctor then reported "tracefs: no"
/// on a freshly booted machine while mounting it).
fn trampolines() -> Option<Result<(), String>> {
    match kernstat_bpf::trampolines::available() {
        Ok(()) => Some(Ok(())),
        Err(e) => Some(Err(format!(
            "the kernel refused the fexit attach (BPF trampolines unavailable): {e}"
        ))),
    }
}

/// Runs `kernstat doctor`; returns the exit status (0: BPF works here; 1: procfs only).
pub fn run(args: &DoctorArgs) -> anyhow::Result<i32> {
    // SAFETY: uname writes into the struct we pass.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let release = if unsafe { libc::uname(&mut u) } == 0 {
        // SAFETY: uname fills NUL-terminated strings.
        unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    } else {
        "unknown".into()
    };
    let btf = Path::new(VMLINUX_BTF).exists();
    let privileged = has_bpf_privileges();
    let caps = effective_caps();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let bpffs = bpffs_mounted("/sys/fs/bpf");
    let tracefs = Path::new("/sys/kernel/tracing/events").exists();
    let kprobes = Path::new("/sys/bus/event_source/devices/kprobe/type").exists();
    let lockdown = lockdown();
    let unpriv = read("/proc/sys/kernel/unprivileged_bpf_disabled");
    let tp_btf = btf && kernstat_bpf::kernel::features().tp_btf;
    let bpf = btf && privileged;
    let fexit = if bpf { trampolines() } else { None };

    let sampler = if bpf {
        "BPF task iterator"
    } else {
        "procfs (/proc/*/stat walk)"
    };
    let ps = if bpf {
        "BPF task iterator"
    } else if Path::new(kernstat_bpf::ps::DEFAULT_PIN_DIR).exists() {
        "the pinned BPF iterator (kernstat ps --pin)"
    } else {
        "procfs"
    };
    let runqlat = match (bpf, tp_btf) {
        (false, _) => "unavailable (needs BPF)",
        (true, true) => "tp_btf tracepoints, task-local storage",
        (true, false) => "raw tracepoints, a tid hash",
    };
    let writes = match (&fexit, tracefs || root) {
        (None, _) => "unavailable (needs BPF)",
        (Some(Ok(())), _) => "fexit on the syscall wrappers",
        (Some(Err(_)), true) => "syscall tracepoints",
        (Some(Err(_)), false) => "unavailable (no tracefs)",
    };
    // Loaded and dropped: the hooks are attached only for the time of the check.
    let network = if bpf {
        match kernstat_bpf::net::Net::load(false) {
            Ok(n) => match n.attach() {
                kernstat_bpf::kernel::Attach::TpBtf => {
                    "tp_btf on sock:sock_send_length/sock_recv_length, by caller".to_string()
                }
                _ => format!("fexit on {}/sock_recvmsg, by caller", n.send_hook()),
            },
            Err(e) => format!("per-process unavailable ({}); links only", e.summary()),
        }
    } else {
        "links only (/proc/net/dev); per-process needs BPF".to_string()
    };
    let mut advice = Vec::new();
    if !btf {
        advice.push(
            "this kernel has no BTF (CONFIG_DEBUG_INFO_BTF=y): every command uses procfs"
                .to_string(),
        );
    }
    if btf && !privileged {
        // The capabilities belong on kernstat-full (this program): `kernstat` execs it,
        // and file capabilities do not survive an exec of a file without them.
        let me = std::env::current_exe()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|_| "$(command -v kernstat)-full".into());
        advice.push(format!(
            "run as root, or give kernstat-full the two capabilities it needs: \
             sudo setcap cap_bpf,cap_perfmon+ep \"{me}\""
        ));
    }
    if lockdown.as_deref() == Some("confidentiality") {
        advice.push("lockdown=confidentiality forbids reading kernel memory from BPF: expect BPF loads to fail".into());
    }

    if args.json {
        let v = json!({
            "kernel": release,
            "btf": btf,
            "root": root,
            "capabilities": caps,
            "bpf_privileges": privileged,
            "bpffs": bpffs,
            "tracefs": tracefs,
            "tp_btf": tp_btf,
            "fexit": fexit.as_ref().map(|r| r.is_ok()),
            "kprobes": kprobes,
            "lockdown": lockdown,
            "unprivileged_bpf_disabled": unpriv,
            "paths": {
                "bar": sampler, "snapshot": sampler, "daemon": sampler,
                "ps": ps, "runqlat": runqlat, "writes": writes,
                "network": network,
            },
            "advice": advice,
        });
        println!("{v}");
    } else {
        let yes = |b: bool| if b { "yes" } else { "no" };
        let mut out = String::new();
        let mut line = |k: &str, v: String| out.push_str(&format!("{k:<26}{v}\n"));
        line("kernel", release.clone());
        line("BTF", format!("{} ({VMLINUX_BTF})", yes(btf)));
        line(
            "privileges",
            format!(
                "{}{}",
                if root { "root" } else { "not root" },
                if caps.is_empty() {
                    ", no BPF capabilities".to_string()
                } else {
                    format!(", effective: {}", caps.join(" "))
                }
            ),
        );
        line("can load BPF", yes(bpf).to_string());
        line("bpffs at /sys/fs/bpf", yes(bpffs).to_string());
        line("tracefs", yes(tracefs).to_string());
        line("tp_btf + task storage", yes(tp_btf).to_string());
        line(
            "fexit (BPF trampolines)",
            match &fexit {
                None => "not tried (needs BPF)".into(),
                Some(Ok(())) => "yes".into(),
                Some(Err(e)) => format!("no: {e}"),
            },
        );
        line("kprobes", yes(kprobes).to_string());
        line(
            "lockdown",
            lockdown.clone().unwrap_or_else(|| "not reported".into()),
        );
        line(
            "unprivileged_bpf_disabled",
            unpriv.clone().unwrap_or_else(|| "not reported".into()),
        );
        out.push_str("\nwhich path each command takes here:\n");
        for (cmd, path) in [
            ("bar, snapshot, daemon", sampler),
            ("ps", ps),
            ("runqlat", runqlat),
            ("writes", writes),
            ("network", &network),
        ] {
            out.push_str(&format!("  {cmd:<24}{path}\n"));
        }
        for a in &advice {
            out.push_str(&format!("\nadvice: {a}\n"));
        }
        print!("{out}");
    }
    Ok(if bpf { 0 } else { 1 })
}
