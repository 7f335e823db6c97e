//! The flags of `kernstat daemon`.

use super::*;
use kernstat_record::writer::parse_size;

/// `kernstat daemon`.
#[derive(Clone, Debug, Args)]
pub struct DaemonArgs {
    /// Listen here (default: $KERNSTAT_SOCKET, else $XDG_RUNTIME_DIR/kernstat/sock;
    /// /run/kernstat/sock with --system).
    #[arg(long)]
    pub socket: Option<PathBuf>,
    /// Run as the machine's daemon: load BPF as root, then switch to --user with no
    /// capabilities; the socket admits every local user (or those in --allow).
    #[arg(long)]
    pub system: bool,
    /// The config file (default: $XDG_CONFIG_HOME/kernstat/config.toml): context
    /// providers switched off or polled at other intervals, script providers. Reloaded
    /// when it changes; an edit that does not parse is reported and ignored.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// The user a system daemon switches to.
    #[arg(long, default_value = "nobody", requires = "system")]
    pub user: String,
    /// Serve only these users (names or uids, comma separated; root always), checked
    /// with the peer's credentials.
    #[arg(long, value_delimiter = ',')]
    pub allow: Vec<String>,
    /// Seconds between samples.
    #[arg(long, default_value = "2", value_parser = parse_duration)]
    pub interval: Duration,
    /// Most clients served at once; more are refused with a reason.
    #[arg(long, default_value_t = 4096)]
    pub max_connections: usize,
    /// Most clients one user (other than root) may hold at once; more are refused with
    /// a reason. Default: 256 with --system (so that no user can take every
    /// connection), --max-connections otherwise.
    #[arg(long)]
    pub max_connections_per_user: Option<usize>,
    /// Include kernel threads in the top lists.
    #[arg(long)]
    pub kthreads: bool,
    /// Serve Prometheus metrics over HTTP at this address (e.g. 127.0.0.1:9560); off
    /// by default.
    #[arg(long, value_name = "ADDR")]
    pub metrics: Option<std::net::SocketAddr>,
    /// Control groups read at every sample, this many levels below the root: the
    /// `cgroups` and `cgroup.<path>.<field>` keys and the per-cgroup Prometheus series
    /// (16 series per group: the depth bounds them).
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub cgroup_depth: u32,
    /// Control groups read at every sample at most (shallow ones first; a parent whose
    /// children were not read says how many, as `truncated`): anyone with a delegated
    /// subtree can make thousands, and each costs descriptors, memory and 16 series.
    #[arg(long, value_name = "N", default_value_t = 500)]
    pub cgroup_max: usize,
    /// Treat every process as private, as /proc's hidepid does: per-process keys are
    /// answered to root only and /metrics serves no per-process series (automatic for
    /// --system where /proc is mounted with hidepid).
    #[arg(long)]
    pub private_processes: bool,
    /// Per-process series for the top N processes by each measure (CPU, memory, I/O).
    #[arg(long, value_name = "N", default_value_t = 10, requires = "metrics")]
    pub metrics_top: usize,
    /// Kernel histograms to serve on /metrics (comma separated). Their hooks run on
    /// every scheduler event or write call, so they are off unless asked for.
    #[arg(long, value_enum, value_delimiter = ',', requires = "metrics")]
    pub collect: Vec<Collect>,
    /// Leave the kernel's BPF run-time statistics off: kernstat_bpf_program_* series
    /// then read 0 (the statistics add two clock reads to every BPF program run on the
    /// machine, kernstat's or not).
    #[arg(long, requires = "metrics")]
    pub no_bpf_stats: bool,
    /// Record a sample every --record-interval into this directory (the flight
    /// recorder: machine figures, every process with its command line, and every
    /// process that ended in between); `--at` views and `kernstat dump` replay it.
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,
    /// Seconds between recorded samples.
    #[arg(long, default_value = "5", value_parser = parse_duration, requires = "record")]
    pub record_interval: Duration,
    /// Delete recorded hours older than this (e.g. 7d, 36h).
    #[arg(long, default_value = "7d", value_parser = parse_age, requires = "record", value_name = "AGE")]
    pub retain: Duration,
    /// Delete the oldest recorded hours while the archive is larger than this (e.g.
    /// 1G, 500M).
    #[arg(long, default_value = "1G", value_parser = parse_size, requires = "record", value_name = "SIZE")]
    pub max_size: u64,
    /// Let this group read the archive (directory 2750, files 0640). It holds every
    /// process's command line and exact I/O and network counters, which /proc shows
    /// only to each process's own user and root: by default the archive is for root and
    /// the daemon's user alone (0700, files 0600).
    #[arg(long, value_name = "GROUP", requires = "record")]
    pub record_group: Option<String>,
    /// Sources.
    #[command(flatten)]
    pub source: SourceArgs,
}

pub use kernstat_record::time::parse_age;

/// A kernel histogram the daemon can serve on /metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Collect {
    /// Run-queue latency, machine-wide and per CPU.
    Runqlat,
    /// Write sizes per system call and kind of file.
    Writes,
    /// Block I/O latency per device and operation.
    Biolat,
}
