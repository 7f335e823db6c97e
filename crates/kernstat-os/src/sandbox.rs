//! What the system daemon may still do once it runs as an unprivileged user: its
//! capability bounding set is empty (no execve can ever hand capabilities back) and a
//! seccomp filter allows only the system calls it makes while serving.
//!
//! The allow-list was measured, not guessed: `strace -f` on `kernstat daemon --system`
//! while clients asked for every kind of key (system keys, `summary`, git keys of a
//! repository, which run gix on blocking threads, `watch`, `status`, `refresh`,
//! malformed requests) and then stopped it with SIGTERM. It made 53 distinct calls after
//! the `setresuid` (2.3 M calls in that run); all but the `setuid(0)` probe, which runs
//! before the filter is installed, are in [`MEASURED`] (52). Calls that can occur on
//! paths that run did not take are in [`RARE`], each with the reason.
//! Anything else fails with EPERM rather than killing the daemon: a refused call is an
//! error the daemon already handles (a key without a value), never a crash.

use std::collections::BTreeMap;

use anyhow::Context;
use seccompiler::{BpfProgram, SeccompAction, SeccompFilter, SeccompRule, TargetArch};

/// System calls the running system daemon made (strace, see the module header).
const MEASURED: &[i64] = &[
    libc::SYS_read,
    libc::SYS_statx,
    libc::SYS_futex,
    libc::SYS_openat,
    libc::SYS_close,
    libc::SYS_getdents64,
    libc::SYS_write,
    libc::SYS_newfstatat,
    libc::SYS_pread64,
    libc::SYS_sysinfo,
    libc::SYS_fcntl,
    libc::SYS_uname,
    libc::SYS_bpf,
    libc::SYS_mmap,
    libc::SYS_munmap,
    libc::SYS_lseek,
    libc::SYS_epoll_ctl,
    libc::SYS_recvfrom,
    libc::SYS_accept4,
    libc::SYS_geteuid,
    libc::SYS_getcwd,
    libc::SYS_sendto,
    libc::SYS_mprotect,
    libc::SYS_shutdown,
    libc::SYS_getsockopt,
    libc::SYS_inotify_rm_watch,
    libc::SYS_inotify_add_watch,
    libc::SYS_rt_sigprocmask,
    libc::SYS_sigaltstack,
    libc::SYS_prctl,
    libc::SYS_sched_getaffinity,
    libc::SYS_set_robust_list,
    libc::SYS_rseq,
    libc::SYS_madvise,
    libc::SYS_gettid,
    libc::SYS_clone3,
    libc::SYS_exit,
    libc::SYS_eventfd2,
    libc::SYS_epoll_create1,
    libc::SYS_inotify_init1,
    libc::SYS_getrandom,
    libc::SYS_brk,
    libc::SYS_capget,
    libc::SYS_capset,
    libc::SYS_rt_sigtimedwait,
    libc::SYS_rt_sigaction,
    libc::SYS_ioctl,
    libc::SYS_getpid,
    libc::SYS_exit_group,
];

/// Calls on paths the measured run did not take.
const RARE: &[i64] = &[
    // The vDSO falls back to the real calls when the clock source cannot be read from
    // user space (some VMs).
    libc::SYS_clock_gettime,
    libc::SYS_clock_getres,
    libc::SYS_gettimeofday,
    libc::SYS_clock_nanosleep,
    libc::SYS_nanosleep,
    // A stopped and continued daemon resumes its blocking call through this.
    libc::SYS_restart_syscall,
    libc::SYS_rt_sigreturn,
    // Thread creation on older libcs, growing buffers, yielding under contention.
    libc::SYS_clone,
    libc::SYS_mremap,
    libc::SYS_sched_yield,
    libc::SYS_epoll_pwait,
    libc::SYS_ppoll,
    // Vectored socket I/O and replies (tokio may use either form).
    libc::SYS_writev,
    libc::SYS_readv,
    libc::SYS_recvmsg,
    libc::SYS_sendmsg,
    libc::SYS_setsockopt,
    libc::SYS_accept,
    // Repository reads on other file systems and layouts (gix).
    libc::SYS_statfs,
    libc::SYS_fstatfs,
    libc::SYS_fstat,
    libc::SYS_readlinkat,
    libc::SYS_faccessat,
    libc::SYS_faccessat2,
    // The shared-memory snapshot is made (and renamed into place) before the switch,
    // then grown in place through its descriptor when a layout outgrows the file
    // (shm/writer.rs); at exit its name is removed where the directory allows.
    libc::SYS_ftruncate,
    // The flight recorder's new files get mode 0640 whatever the umask.
    libc::SYS_fchmod,
    libc::SYS_unlinkat,
    // Identity reads, and a panic's abort (raise = tgkill on ourselves).
    libc::SYS_getuid,
    libc::SYS_getgid,
    libc::SYS_getegid,
    libc::SYS_getppid,
    libc::SYS_tgkill,
    libc::SYS_pipe2,
    libc::SYS_dup,
    libc::SYS_dup3,
];

/// x86_64's older forms of calls above (arm64 has only the *at and p* ones, which the
/// lists above hold): measured on x86_64 too.
#[cfg(target_arch = "x86_64")]
const LEGACY: &[i64] = &[
    libc::SYS_epoll_wait,
    libc::SYS_readlink,
    libc::SYS_unlink,
    libc::SYS_poll,
];
#[cfg(not(target_arch = "x86_64"))]
const LEGACY: &[i64] = &[];

fn filter() -> anyhow::Result<BpfProgram> {
    let rules: BTreeMap<i64, Vec<SeccompRule>> = MEASURED
        .iter()
        .chain(RARE)
        .chain(LEGACY)
        .map(|&nr| (nr, Vec::new()))
        .collect();
    let arch: TargetArch = std::env::consts::ARCH
        .try_into()
        .map_err(|e| anyhow::anyhow!("seccomp on {}: {e:?}", std::env::consts::ARCH))?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Errno(libc::EPERM as u32),
        SeccompAction::Allow,
        arch,
    )
    .map_err(|e| anyhow::anyhow!("building the seccomp filter: {e}"))?;
    filter
        .try_into()
        .map_err(|e| anyhow::anyhow!("compiling the seccomp filter: {e:?}"))
}

/// Empties the capability bounding set. Needs CAP_SETPCAP: call it as root, before the
/// switch to the unprivileged user.
pub fn clear_bounding_set() -> anyhow::Result<()> {
    caps::clear(None, caps::CapSet::Bounding).context("clearing the capability bounding set")
}

/// Installs the allow-list on this thread and every thread it creates afterwards (call
/// it before the runtime starts its threads; needs no_new_privs or CAP_SYS_ADMIN).
pub fn install_seccomp() -> anyhow::Result<()> {
    let prog = filter()?;
    seccompiler::apply_filter(&prog).map_err(|e| anyhow::anyhow!("installing seccomp: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filter_compiles_and_lists_each_call_once() {
        filter().unwrap();
        let mut all: Vec<i64> = MEASURED.iter().chain(RARE).copied().collect();
        let n = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), n, "a call is listed twice");
    }
}
