//! The kernel's BPF run-time statistics: how long our programs ran, and how often.
//!
//! Statistics cost every BPF program on the machine two clock reads per run, so the
//! kernel keeps them off; `RunTimeStats::enable` turns them on for as long as the
//! returned guard lives (BPF_ENABLE_STATS; the kernel counts enablers and turns them off
//! when the last fd closes). `kernstat bar --self-cost` and the benchmarks use it.

use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// Holds BPF run-time statistics on; dropping it turns them off (if no one else holds them).
#[derive(Debug)]
pub struct RunTimeStats {
    _fd: OwnedFd,
}

impl RunTimeStats {
    /// Turns statistics on. Needs CAP_SYS_ADMIN.
    pub fn enable() -> io::Result<Self> {
        // SAFETY: plain syscall wrapper; returns a new fd or a negative errno.
        let fd = unsafe { libbpf_sys::bpf_enable_stats(libbpf_sys::BPF_STATS_RUN_TIME) };
        if fd < 0 {
            return Err(io::Error::from_raw_os_error(-fd));
        }
        // SAFETY: the fd was just returned to us and is owned by nobody else.
        Ok(Self {
            _fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }
}

/// Cumulative run time and run count of one program.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProgRunTime {
    /// Nanoseconds spent in the program while statistics were on.
    pub run_time_ns: u64,
    /// Times the program ran while statistics were on.
    pub run_cnt: u64,
    /// Times the kernel skipped the program because it was already running on that CPU
    /// (an interrupt's event nested in the program's own run): events it never saw.
    /// Counted whether statistics are on or not.
    pub recursion_misses: u64,
}

/// Reads a program's statistics (no allocation: the info struct is on the stack).
pub fn prog_run_time(prog: BorrowedFd<'_>) -> io::Result<ProgRunTime> {
    // SAFETY: bpf_prog_info is plain old data; zero is a valid value.
    let mut info: libbpf_sys::bpf_prog_info = unsafe { zeroed() };
    let mut len = size_of::<libbpf_sys::bpf_prog_info>() as u32;
    // SAFETY: info and len are valid for writes of the sizes given.
    let rc = unsafe { libbpf_sys::bpf_prog_get_info_by_fd(prog.as_raw_fd(), &mut info, &mut len) };
    if rc < 0 {
        return Err(io::Error::from_raw_os_error(-rc));
    }
    Ok(ProgRunTime {
        run_time_ns: info.run_time_ns,
        run_cnt: info.run_cnt,
        recursion_misses: info.recursion_misses,
    })
}
