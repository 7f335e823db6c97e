//! What every collector needs before and around loading: a preflight that turns the usual
//! reasons BPF cannot work (no BTF, no privileges) into one clear message, capture of
//! libbpf's log so that a failed load can say why without libbpf printing pages of
//! verifier output on every run, and [`load_skel`], the one open-configure-load-attach
//! sequence every collector goes through.

use std::fmt;
use std::mem::MaybeUninit;
use std::path::Path;
use std::sync::Mutex;

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{OpenObject, PrintLevel};

/// Why a BPF collector could not be loaded. Callers fall back to procfs on any of these.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The kernel has no BTF, so CO-RE programs cannot be relocated.
    #[error("the kernel has no BTF ({0} is missing); it needs CONFIG_DEBUG_INFO_BTF=y")]
    NoBtf(&'static str),
    /// Not root and without CAP_BPF + CAP_PERFMON.
    #[error("loading BPF programs needs root or CAP_BPF and CAP_PERFMON")]
    NotPermitted,
    /// What was asked needs something this kernel lacks (said in words).
    #[error("{0}")]
    Unsupported(String),
    /// libbpf or the kernel refused; `detail` holds the last lines of libbpf's log.
    #[error("{what}: {source}{}", Detail(detail))]
    Failed {
        /// What was being done.
        what: String,
        /// The error libbpf returned.
        source: libbpf_rs::Error,
        /// The tail of libbpf's log (verifier messages), possibly empty.
        detail: String,
    },
}

impl LoadError {
    /// The error in one line: what failed and why, without libbpf's log (for a table
    /// row such as doctor's; the full error, with the log, is the Display form).
    pub fn summary(&self) -> String {
        match self {
            LoadError::Failed { what, source, .. } => format!("{what}: {source}"),
            other => other.to_string(),
        }
    }
}

struct Detail<'a>(&'a str);

impl fmt::Display for Detail<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            Ok(())
        } else {
            write!(f, "\n{}", self.0)
        }
    }
}

/// Where the kernel exposes its own BTF.
pub const VMLINUX_BTF: &str = "/sys/kernel/btf/vmlinux";

/// Checks the two things that most often make BPF impossible, before trying.
pub fn preflight() -> Result<(), LoadError> {
    if !Path::new(VMLINUX_BTF).exists() {
        return Err(LoadError::NoBtf(VMLINUX_BTF));
    }
    if !has_bpf_privileges() {
        return Err(LoadError::NotPermitted);
    }
    Ok(())
}

/// Root, or CAP_BPF and CAP_PERFMON in the effective set (CAP_SYS_ADMIN implies both).
pub fn has_bpf_privileges() -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_PERFMON: u32 = 38;
    const CAP_BPF: u32 = 39;
    let Some(eff) = effective_caps() else {
        // SAFETY: geteuid has no preconditions.
        return unsafe { libc::geteuid() } == 0;
    };
    let has = |c: u32| eff & (1u64 << c) != 0;
    has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON))
}

/// The effective capability set (CapEff of /proc/self/status), as a bit mask.
pub fn effective_caps() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("CapEff:"))?;
    u64::from_str_radix(line["CapEff:".len()..].trim(), 16).ok()
}

static LOG: Mutex<String> = Mutex::new(String::new());
const LOG_KEEP: usize = 64 * 1024;

fn keep_log(level: PrintLevel, msg: String) {
    if std::env::var_os("KERNSTAT_DEBUG").is_some() {
        eprint!("libbpf: {msg}");
    }
    if level == PrintLevel::Debug {
        return;
    }
    if let Ok(mut log) = LOG.lock() {
        if log.len() > LOG_KEEP {
            let cut = log.len() - LOG_KEEP / 2;
            let cut = (cut..log.len())
                .find(|&i| log.is_char_boundary(i))
                .unwrap_or(0);
            log.drain(..cut);
        }
        log.push_str(&msg);
    }
}

/// Routes libbpf's messages into a buffer (and to stderr when KERNSTAT_DEBUG is set).
pub fn capture_libbpf_log() {
    let level = if std::env::var_os("KERNSTAT_DEBUG").is_some() {
        PrintLevel::Debug
    } else {
        PrintLevel::Info
    };
    libbpf_rs::set_print(Some((level, keep_log)));
}

/// Empties the captured log.
pub fn clear_log() {
    if let Ok(mut log) = LOG.lock() {
        log.clear();
    }
}

/// The last `lines` lines libbpf logged, for an error message.
pub fn log_tail(lines: usize) -> String {
    let log = LOG.lock().map(|l| l.clone()).unwrap_or_default();
    let all: Vec<&str> = log.lines().filter(|l| !l.trim().is_empty()).collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Wraps a libbpf error with what was being done and the log tail.
pub fn failed(what: impl Into<String>, source: libbpf_rs::Error) -> LoadError {
    LoadError::Failed {
        what: what.into(),
        source,
        detail: log_tail(8),
    }
}

/// Every collector's way in: the preflight, libbpf's log captured, the skeleton opened,
/// `configure` run on the open skeleton (autoload choices, rodata filters), loaded
/// (verified) and attached. Errors name `collector` and the stage that failed.
///
/// A libbpf-rs skeleton borrows the storage of its `OpenObject` for its whole life.
/// That storage is one small allocation (the object itself is closed when the skeleton
/// drops): it is leaked rather than made self-referential, one per load, and a process
/// loads each collector once (or once per switch-on in an interactive view).
pub fn load_skel<B, O, S>(
    builder: B,
    collector: &'static str,
    configure: impl FnOnce(&mut O) -> Result<(), LoadError>,
) -> Result<S, LoadError>
where
    B: SkelBuilder<'static, Output = O>,
    O: OpenSkel<'static, Output = S>,
    S: Skel<'static>,
{
    preflight()?;
    capture_libbpf_log();
    clear_log();
    let object: &'static mut MaybeUninit<OpenObject> = Box::leak(Box::new(MaybeUninit::uninit()));
    let mut open = builder
        .open(object)
        .map_err(|e| failed(format!("opening {collector}"), e))?;
    configure(&mut open)?;
    let mut skel = open
        .load()
        .map_err(|e| failed(format!("loading {collector}"), e))?;
    skel.attach()
        .map_err(|e| failed(format!("attaching {collector}"), e))?;
    Ok(skel)
}

/// The loaded programs of `object`: names and fds (valid while the object lives), for
/// BPF run-time statistics.
pub fn program_fds(object: &libbpf_rs::Object) -> Vec<(String, std::os::fd::RawFd)> {
    use std::os::fd::{AsFd, AsRawFd};
    object
        .progs()
        .filter(|p| p.as_fd().as_raw_fd() >= 0)
        .map(|p| {
            (
                p.name().to_string_lossy().into_owned(),
                p.as_fd().as_raw_fd(),
            )
        })
        .collect()
}

/// The inode of this process's pid namespace when it is not the initial one (whose
/// inode is fixed, PROC_PID_INIT_INO): there every task is the reader's and the exit
/// hook need not look.
pub fn reader_pid_namespace() -> Option<u32> {
    use std::os::unix::fs::MetadataExt;
    const PROC_PID_INIT_INO: u64 = 0xEFFF_FFFC;
    let inum = std::fs::metadata("/proc/self/ns/pid").ok()?.ino();
    (inum != PROC_PID_INIT_INO).then_some(inum as u32)
}

/// Runs one walk of the iterator `link` into `buf` (grown, by doubling, when the walk
/// is longer than ever before: the only allocation); returns the bytes written.
pub fn read_iterator(link: &libbpf_rs::Link, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    use std::io::Read;
    let mut iter = libbpf_rs::Iter::new(link).map_err(std::io::Error::other)?;
    let mut len = 0;
    loop {
        if len == buf.len() {
            buf.resize((buf.len() * 2).max(4096), 0);
        }
        match iter.read(&mut buf[len..]) {
            Ok(0) => return Ok(len),
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
}
