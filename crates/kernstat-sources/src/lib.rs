//! kernstat's file readers: procfs and sysfs, with an injectable root so that tests run
//! against fake trees laid out like real machines (the habit of `below`).
//!
//! Everything a sampling loop calls reads files that were opened once, with one pread
//! each into buffers owned by the reader, and parses bytes in place: no allocation per
//! sample, no text turned into `String`s.
#![deny(missing_docs)]

pub mod block;
pub mod cgroup;
pub mod counters;
pub mod file;
pub mod net;
pub mod procs;
pub mod ps_procfs;
pub mod sockets;
pub mod sysfs;
pub mod system;
pub mod users;

use std::path::PathBuf;

pub use net::LinkReader;
pub use procs::ProcfsTasks;
pub use ps_procfs::{ProcfsPs, Want};
pub use sysfs::{Discovered, HardwareReader, TempSource};
pub use system::{StatTotals, SystemReader};

/// Where /proc and /sys are (the real ones unless a test says otherwise).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Roots {
    /// procfs mount point.
    pub proc: PathBuf,
    /// sysfs mount point.
    pub sys: PathBuf,
}

impl Default for Roots {
    fn default() -> Self {
        Roots {
            proc: PathBuf::from("/proc"),
            sys: PathBuf::from("/sys"),
        }
    }
}

/// CLOCK_MONOTONIC in nanoseconds: the clock BPF's bpf_ktime_get_ns() uses, so samples
/// from both sources share one time base.
pub fn monotonic_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_BOOTTIME in nanoseconds: the clock of task start times (start_boottime) and of
/// bpf_ktime_get_boot_ns().
pub fn boottime_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
