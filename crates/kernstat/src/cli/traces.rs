//! The flags of the tracing commands, libbpf-tools' where they have one: `runqlat`,
//! `biolat` and `writes`.

use super::*;

/// `kernstat runqlat`.
#[derive(Clone, Debug, Args)]
pub struct RunqlatArgs {
    /// Print a timestamp before each interval.
    #[arg(short = 'T', long)]
    pub timestamp: bool,
    /// Milliseconds instead of microseconds.
    #[arg(short = 'm', long)]
    pub milliseconds: bool,
    /// Trace this process only.
    #[arg(short = 'p', long)]
    pub pid: Option<u32>,
    /// A histogram per process.
    #[arg(short = 'P', long)]
    pub pids: bool,
    /// A histogram per thread.
    #[arg(short = 'L', long)]
    pub tids: bool,
    /// A histogram per PID namespace.
    #[arg(long)]
    pub pidnss: bool,
    /// A histogram per CPU.
    #[arg(short = 'C', long)]
    pub cpus: bool,
    /// Trace tasks in this cgroup v2 (a directory under the cgroup2 mount) or below it;
    /// the task being woken is tested, not the waker.
    #[arg(short = 'c', long, value_name = "CGROUP")]
    pub cgroup: Option<PathBuf>,
    /// Each interval includes everything since the start (default: each stands alone).
    #[arg(long)]
    pub cumulative: bool,
    /// One CSV row per interval: timestamp,count,p50,p90,p99,max.
    #[arg(long)]
    pub csv: bool,
    /// One JSON object per interval, with interpolated percentiles and the buckets.
    #[arg(long)]
    pub json: bool,
    /// At the end, draw the percentiles over time and the distribution (.png or .svg).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// Off-CPU time instead: from a task blocking to it running again (what it waited
    /// for, then its run-queue wait), from the same scheduler hook; -P per process.
    #[arg(long)]
    pub offcpu: bool,
    /// Attach raw tracepoints even where tp_btf works (tests the fallback).
    #[arg(long)]
    pub raw_tp: bool,
    /// Seconds per interval (default: one interval, until Ctrl-C).
    pub interval: Option<u64>,
    /// Number of intervals (default: until Ctrl-C).
    pub count: Option<u64>,
}

/// `kernstat biolat`.
#[derive(Clone, Debug, Args)]
pub struct BiolatArgs {
    /// Print a timestamp before each interval.
    #[arg(short = 'T', long)]
    pub timestamp: bool,
    /// Milliseconds instead of microseconds.
    #[arg(short = 'm', long)]
    pub milliseconds: bool,
    /// A histogram per disk and operation.
    #[arg(short = 'D', long = "disk-split")]
    pub per_disk: bool,
    /// A histogram per request flags (sync, fua, preflush, ...) and operation.
    #[arg(short = 'F', long = "flags")]
    pub flags: bool,
    /// From the request's making (time queued included), not its issue to the device.
    #[arg(short = 'Q', long)]
    pub queued: bool,
    /// Only this disk (sda, nvme0n1, loop3).
    #[arg(short = 'd', long, value_name = "DISK")]
    pub disk: Option<String>,
    /// Stamp requests at issue in a hash (libbpf-tools' form: two hooks) instead of
    /// reading the request's own stamp at completion (one hook).
    #[arg(long)]
    pub pair: bool,
    /// One JSON object per interval: per disk and operation, count, bytes, errors,
    /// percentiles and buckets.
    #[arg(long)]
    pub json: bool,
    /// Attach raw tracepoints even where tp_btf works (tests the fallback).
    #[arg(long)]
    pub raw_tp: bool,
    /// Seconds per interval (default: one interval, until Ctrl-C).
    pub interval: Option<u64>,
    /// Number of intervals (default: until Ctrl-C).
    pub count: Option<u64>,
}

/// `kernstat writes`.
#[derive(Clone, Debug, Args)]
pub struct WritesArgs {
    /// Trace this process (repeatable, up to 8); default: every process.
    #[arg(short = 'p', long)]
    pub pid: Vec<u32>,
    /// Trace processes with this command name.
    #[arg(short = 'c', long)]
    pub comm: Option<String>,
    /// The read family (read, pread64, readv, preadv, recvfrom, recvmsg) instead.
    #[arg(long)]
    pub reads: bool,
    /// Show the N processes with the most calls.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// One JSON object per interval.
    #[arg(long)]
    pub json: bool,
    /// A call moving fewer bytes than this is small.
    #[arg(long, default_value_t = 512)]
    pub small_bytes: u64,
    /// Small-write syndrome needs at least this many calls per second...
    #[arg(long, default_value_t = 100.0)]
    pub min_rate: f64,
    /// ...of which at least this share are small.
    #[arg(long, default_value_t = 0.8)]
    pub small_share: f64,
    /// Use the syscall tracepoints even where fexit works.
    #[arg(long)]
    pub tracepoints: bool,
    /// Seconds per interval (default: one report, at Ctrl-C).
    pub interval: Option<u64>,
    /// Number of intervals.
    pub count: Option<u64>,
}
