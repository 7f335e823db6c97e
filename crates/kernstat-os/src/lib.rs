//! The process plumbing every long-running kernstat program shares, apart from what it
//! observes: signals turned into a clean stop, the reporting interval of the tracing
//! commands, stdout writes that end quietly on a closed pipe, the counting allocator
//! behind `--bench`'s allocation counts, and least privilege (dropping capabilities after
//! BPF is loaded, becoming the daemon's user, the system daemon's seccomp allow-list).
#![deny(missing_docs)]

pub mod alloc;
pub mod interval;
pub mod privileges;
pub mod sandbox;
pub mod signals;
pub mod stdout;

/// This process's CPU time, ns (all threads, live and exited: the scheduler's
/// sum_exec_runtime, CLOCK_PROCESS_CPUTIME_ID).
pub fn process_cpu_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::ProcessCPUTime);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
