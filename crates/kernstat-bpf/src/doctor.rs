//! What `kernstat doctor` reports, gathered for any front end: what this kernel and
//! these privileges allow, and which path each collector will take. Every answer is read
//! from the system (sysfs, procfs, BTF) or tried (a trampoline attach, when privileged),
//! never assumed from the kernel version; the decisions are [`crate::kernel`]'s, the
//! ones every collector makes.

use std::path::Path;

use crate::kernel::{self, Attach};
use crate::loader::{has_bpf_privileges, VMLINUX_BTF};

/// bpffs' statfs magic (linux/magic.h).
const BPF_FS_MAGIC: i64 = 0xcafe_4a11;

/// Which source each command takes here.
#[derive(Clone, Debug)]
pub struct Paths {
    /// `bar`, `snapshot` and the daemon's sampler.
    pub sampler: &'static str,
    /// `ps`.
    pub ps: &'static str,
    /// `runqlat`.
    pub runqlat: &'static str,
    /// `writes`.
    pub writes: &'static str,
    /// Per-process network.
    pub network: String,
}

/// Everything `doctor` says, read from this machine.
#[derive(Clone, Debug)]
pub struct Report {
    /// The kernel's release (uname -r).
    pub release: String,
    /// Whether the kernel exposes its BTF at [`VMLINUX_BTF`].
    pub btf: bool,
    /// Whether we run as root.
    pub root: bool,
    /// The BPF-related capabilities in the effective set, by name.
    pub capabilities: Vec<&'static str>,
    /// Whether these privileges may load BPF.
    pub bpf_privileges: bool,
    /// Whether bpffs is mounted at /sys/fs/bpf.
    pub bpffs: bool,
    /// Whether tracefs' events are reachable.
    pub tracefs: bool,
    /// BTF-typed tracepoints and task-local storage.
    pub tp_btf: bool,
    /// The trampoline attach, tried when BPF can load: `Err` says why it failed.
    pub fexit: Option<Result<(), String>>,
    /// Whether the kprobe PMU exists.
    pub kprobes: bool,
    /// The active lockdown mode ("none", "integrity", "confidentiality"), if reported.
    pub lockdown: Option<String>,
    /// /proc/sys/kernel/unprivileged_bpf_disabled, if readable.
    pub unprivileged_bpf_disabled: Option<String>,
    /// Which path each command takes.
    pub paths: Paths,
    /// What the user could change, one sentence each.
    pub advice: Vec<String>,
}

impl Report {
    /// Whether the BPF collectors can run here.
    pub fn can_load_bpf(&self) -> bool {
        self.btf && self.bpf_privileges
    }
}

fn read(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

fn effective_capability_names() -> Vec<&'static str> {
    let eff = crate::loader::effective_caps().unwrap_or(0);
    [(21, "CAP_SYS_ADMIN"), (38, "CAP_PERFMON"), (39, "CAP_BPF")]
        .into_iter()
        .filter(|(bit, _)| eff & (1u64 << bit) != 0)
        .map(|(_, name)| name)
        .collect()
}

fn bpffs_mounted(p: &str) -> bool {
    let Ok(path) = std::ffi::CString::new(p) else {
        return false;
    };
    // SAFETY: statfs writes into the struct we pass; the path is NUL-terminated.
    let mut s: libc::statfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::statfs(path.as_ptr(), &mut s) } != 0 {
        return false;
    }
    // f_type's width differs between architectures: the cast is not always a no-op.
    #[allow(clippy::unnecessary_cast)]
    let magic = s.f_type as i64;
    magic == BPF_FS_MAGIC
}

fn lockdown_mode() -> Option<String> {
    let s = read("/sys/kernel/security/lockdown")?;
    let start = s.find('[')? + 1;
    let end = s[start..].find(']')? + start;
    Some(s[start..end].to_string())
}

fn kernel_release() -> String {
    // SAFETY: uname writes into the struct we pass.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::uname(&mut u) } == 0 {
        // SAFETY: uname fills NUL-terminated strings.
        unsafe { std::ffi::CStr::from_ptr(u.release.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    } else {
        "unknown".into()
    }
}

/// Examines this machine. When BPF can load, the network collector is loaded and
/// attached for the time of the check, and the trampoline attach is tried (once per
/// process, by [`crate::trampolines`], which mounts nothing: the collectors' fallback
/// would mount tracefs, and doctor then said "tracefs: no" while mounting it).
pub fn examine() -> Report {
    let btf = Path::new(VMLINUX_BTF).exists();
    let bpf_privileges = has_bpf_privileges();
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let tracefs = Path::new("/sys/kernel/tracing/events").exists();
    let tp_btf = btf && kernel::features().tp_btf;
    let bpf = btf && bpf_privileges;
    let fexit = bpf.then(|| {
        crate::trampolines::available().clone().map_err(|e| {
            format!("the kernel refused the fexit attach (BPF trampolines unavailable): {e}")
        })
    });
    let sampler = if bpf {
        "BPF task iterator"
    } else {
        "procfs (/proc/*/stat walk)"
    };
    let ps = if bpf {
        "BPF task iterator"
    } else if Path::new(crate::ps::DEFAULT_PIN_DIR).exists() {
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
    let network = if bpf {
        match crate::net::Net::load(false) {
            Ok(n) => match n.attach() {
                Attach::TpBtf => {
                    "tp_btf on sock:sock_send_length/sock_recv_length, by caller".to_string()
                }
                _ => format!("fexit on {}/sock_recvmsg, by caller", n.send_hook()),
            },
            Err(e) => format!("per-process unavailable ({}); links only", e.summary()),
        }
    } else {
        "links only (/proc/net/dev); per-process needs BPF".to_string()
    };
    let lockdown = lockdown_mode();
    let mut advice = Vec::new();
    if !btf {
        advice.push(
            "this kernel has no BTF (CONFIG_DEBUG_INFO_BTF=y): every command uses procfs"
                .to_string(),
        );
    }
    if btf && !bpf_privileges {
        // The capabilities belong on kernstat-full: `kernstat` execs it, and file
        // capabilities do not survive an exec of a file without them.
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
    Report {
        release: kernel_release(),
        btf,
        root,
        capabilities: effective_capability_names(),
        bpf_privileges,
        bpffs: bpffs_mounted("/sys/fs/bpf"),
        tracefs,
        tp_btf,
        fexit,
        kprobes: Path::new("/sys/bus/event_source/devices/kprobe/type").exists(),
        lockdown,
        unprivileged_bpf_disabled: read("/proc/sys/kernel/unprivileged_bpf_disabled"),
        paths: Paths {
            sampler,
            ps,
            runqlat,
            writes,
            network,
        },
        advice,
    }
}
