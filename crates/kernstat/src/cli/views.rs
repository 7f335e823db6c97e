//! The flags of the commands that show the machine: `bar`, `snapshot`, `top`, `ps`,
//! `cgroups`, `why`, `tcp`, `view`, `events` and `dump`.

use super::*;

/// `kernstat dump`.
#[derive(Clone, Debug, Args)]
pub struct DumpArgs {
    /// The archive to read (default as for --at).
    #[arg(long, value_name = "DIR")]
    pub archive: Option<PathBuf>,
    /// From this time (as --at takes; default: the oldest sample).
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub from: Option<String>,
    /// To this time (default: the newest sample).
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub to: Option<String>,
    /// json: one object per sample (the model, every process, the processes that
    /// ended); csv: one row per process per sample (ended ones with state X);
    /// openmetrics: machine and per-process series with timestamps, for
    /// `promtool tsdb create-blocks-from openmetrics`; parquet: the CSV's rows and
    /// columns, typed (timestamps in UTC), zstd-compressed, for DuckDB, pandas, polars.
    #[arg(long, value_enum, default_value = "json")]
    pub format: DumpFormat,
    /// Write here instead of standard output (parquet to a terminal is refused).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// What `kernstat dump` writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum DumpFormat {
    /// One JSON object per line, per sample.
    Json,
    /// One CSV row per process per sample.
    Csv,
    /// OpenMetrics text with timestamps.
    Openmetrics,
    /// Apache Parquet: a row per process per sample.
    #[cfg(feature = "parquet")]
    Parquet,
}

/// `kernstat cgroups`.
#[derive(Clone, Debug, Args)]
pub struct CgroupsArgs {
    /// Rates over this interval (two readings).
    #[arg(long, value_parser = parse_duration, default_value = "1s")]
    pub interval: Duration,
    /// Only groups at most this deep below the root (0: the root alone).
    #[arg(long)]
    pub depth: Option<u32>,
    /// Sort siblings by this column ("-KEY": largest first): path, cpu, throttled, mem,
    /// limit, ioread, iowrite, psicpu, psimem, psiio, pids, netrx, nettx.
    #[arg(long, default_value = "-cpu", allow_hyphen_values = true)]
    pub sort: String,
    /// Only this group and those below it (e.g. /system.slice).
    #[arg(long, value_name = "PATH")]
    pub root: Option<String>,
    /// Groups read at most (shallow ones first; a parent whose children were not read
    /// says how many).
    #[arg(long, value_name = "N", default_value_t = 2000)]
    pub max_groups: usize,
    /// One JSON object per group (NDJSON), with memory.stat's breakdown and the reasons
    /// for figures a group lacks.
    #[arg(long)]
    pub json: bool,
    /// Do not count per-process network (no BPF hooks attached).
    #[arg(long)]
    pub no_net: bool,
    /// No BPF at all (tasks from /proc; no network figures).
    #[arg(long)]
    pub no_bpf: bool,
    /// Time N readings of the whole hierarchy (CPU and wall per reading, medians) and
    /// print {"n","groups","cpu_us_p50","wall_us_p50"} as JSON, with the BPF cgroup
    /// iterator's read of the same tree beside it (iterator_cpu_us_p50, or
    /// iterator_error where it cannot).
    #[arg(long, value_name = "N")]
    pub bench: Option<u32>,
    /// The groups as recorded (--at TIME): rates over the recorder's interval.
    #[command(flatten)]
    pub replay: ReplayArgs,
}

/// Output formats of `bar`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum FormatArg {
    /// JSON lines for Waybar's custom module (`"return-type": "json"`).
    Waybar,
    /// The i3bar protocol (i3bar, swaybar).
    I3bar,
    /// Plain text lines.
    Text,
}

/// `kernstat bar`.
#[derive(Clone, Debug, Args)]
pub struct BarArgs {
    /// Output format.
    #[arg(long, value_enum, default_value_t = FormatArg::Waybar)]
    pub format: FormatArg,
    /// Print every metric as one JSON object per tick instead (with --bench: print the
    /// benchmark report as JSON).
    #[arg(long)]
    pub json: bool,
    /// The bar text; fields in braces (see `--fields`).
    #[arg(long, default_value = "{cpu}% {mem_used}")]
    pub text: String,
    /// List the template fields and exit.
    #[arg(long)]
    pub fields: bool,
    /// Seconds between ticks.
    #[arg(long, default_value = "2", value_parser = parse_duration)]
    pub interval: Duration,
    /// Intervals that SIGRTMIN cycles through (comma separated).
    #[arg(long, default_value = "1,2,5", value_parser = Intervals::parse)]
    pub intervals: Intervals,
    /// Include kernel threads in the top lists (SIGRTMIN+1 toggles).
    #[arg(long)]
    pub kthreads: bool,
    /// Warning thresholds, e.g. cpu=70,mem=80,temp=80 (these are the defaults).
    #[arg(long, value_parser = LevelSpec::parse, default_value = "")]
    pub warn: LevelSpec,
    /// Critical thresholds, e.g. cpu=90,mem=95,temp=95 (these are the defaults).
    #[arg(long, value_parser = LevelSpec::parse, default_value = "")]
    pub crit: LevelSpec,
    /// Measure and show kernstat's own cost (process CPU + its BPF programs' run time).
    #[arg(long)]
    pub self_cost: bool,
    /// Take N samples as fast as the hot path allows (1 ms apart), print timing and
    /// allocation statistics, and exit.
    #[arg(long, value_name = "N")]
    pub bench: Option<u32>,
    /// Do not share one sampler between identical bars (see docs/bar.md).
    #[arg(long)]
    pub no_lock: bool,
    /// Render the daemon's samples instead of sampling here (ticks follow the daemon's
    /// --interval; falls back to sampling here when no daemon answers).
    #[arg(long)]
    pub daemon: bool,
    /// The daemon's socket (default: $KERNSTAT_SOCKET, else the user daemon's, else the
    /// system daemon's).
    #[arg(long, requires = "daemon")]
    pub socket: Option<PathBuf>,
    /// Sources.
    #[command(flatten)]
    pub source: SourceArgs,
}

impl BarArgs {
    /// The thresholds, defaults overridden by --warn and --crit.
    pub fn thresholds(&self) -> Thresholds {
        Thresholds::with_overrides(&self.warn, &self.crit)
    }
}

/// `kernstat snapshot`.
#[derive(Clone, Debug, Args)]
pub struct SnapshotArgs {
    /// Print JSON (every metric and every process).
    #[arg(long)]
    pub json: bool,
    /// Seconds between the two readings that rates are computed over.
    #[arg(long, default_value = "1", value_parser = parse_duration)]
    pub interval: Duration,
    /// Include kernel threads in the top lists.
    #[arg(long)]
    pub kthreads: bool,
    /// Control groups this many levels below the root in the JSON ("cgroups").
    #[arg(long, value_name = "N", default_value_t = 2)]
    pub cgroup_depth: u32,
    /// Control groups read at most (shallow ones first).
    #[arg(long, value_name = "N", default_value_t = 500)]
    pub cgroup_max: usize,
    /// A recorded moment instead of now.
    #[command(flatten)]
    pub replay: ReplayArgs,
    /// Sources.
    #[command(flatten)]
    pub source: SourceArgs,
}

/// `kernstat top`.
#[derive(Clone, Debug, Args)]
pub struct TopArgs {
    /// A recorded moment instead of now: t and T step one sample forward and back, b
    /// jumps to a time.
    #[command(flatten)]
    pub replay: ReplayArgs,
    /// Refresh interval (keys + and - change it).
    #[arg(short = 'd', long, default_value = "1", value_parser = parse_duration, value_name = "SECONDS")]
    pub delay: Duration,
    /// Sort by this column at start (pid, user, cpu, mem, time, read, write, cmd...);
    /// "-KEY" for largest first, as in every command.
    #[arg(
        long,
        default_value = "-cpu",
        allow_hyphen_values = true,
        value_name = "KEY"
    )]
    pub sort: String,
    /// Start with this filter (the / search).
    #[arg(long, value_name = "TEXT")]
    pub filter: Option<String>,
    /// Start in tree mode.
    #[arg(long)]
    pub tree: bool,
    /// Read /proc only (no BPF).
    #[arg(long)]
    pub no_bpf: bool,
    /// Where to look for a pinned iterator.
    #[arg(long, value_name = "DIR", env = "KERNSTAT_PIN_DIR", default_value = kernstat_bpf::ps::DEFAULT_PIN_DIR)]
    pub pin_dir: PathBuf,
    /// Start with the run-queue latency panel on (key r).
    #[arg(long)]
    pub runqlat: bool,
    /// Start with the write-size panel on (key w).
    #[arg(long)]
    pub writes: bool,
    /// Start with the disk-latency panel on (key D).
    #[arg(long)]
    pub disks: bool,
    /// Start with the RETR/s column on: TCP retransmits per process (key R).
    #[arg(long)]
    pub retrans: bool,
    /// Leave after this many refreshes (for benchmarks and scripts).
    #[arg(short = 'n', long, value_name = "N")]
    pub iterations: Option<u64>,
    /// On exit, print per-refresh counts (allocations, CPU) and peak RSS as JSON on stderr.
    #[arg(long, hide = true)]
    pub report: bool,
    /// With --at: time N steps back then N forward (the cursor, the rate engine and the
    /// view's rows: what a t or T costs before drawing) and print
    /// {"n","processes","step_ms_p50","step_ms_max"} as JSON; no terminal needed.
    #[arg(long, value_name = "N", requires = "at", hide = true)]
    pub bench_steps: Option<u32>,
    /// CPU temperature sensor: auto, off, zone:TYPE, hwmon:NAME[:LABEL], or a file path.
    #[arg(long, default_value = "auto", value_parser = parse_temp)]
    pub temp: TempSource,
}

/// Arguments of `kernstat ps`.
#[derive(Debug, Args)]
pub struct PsArgs {
    /// A recorded moment instead of now (processes that ended before it, since the
    /// sample before, are shown with state X).
    #[command(flatten)]
    pub replay: ReplayArgs,
    /// Columns, comma separated (see --list-fields); the last one is cut to the terminal.
    #[arg(long, value_name = "LIST")]
    pub fields: Option<String>,
    /// List the columns and exit.
    #[arg(long = "list-fields")]
    pub columns_help: bool,
    /// Sort by this column; "-KEY" for descending (e.g. --sort -cpu).
    #[arg(
        long,
        default_value = "pid",
        allow_hyphen_values = true,
        value_name = "KEY"
    )]
    pub sort: String,
    /// Only processes of this user (name or uid).
    #[arg(long)]
    pub user: Option<String>,
    /// Only these processes (comma separated pids).
    #[arg(long, value_delimiter = ',')]
    pub pid: Vec<u32>,
    /// Only processes whose command name matches this regular expression.
    #[arg(long, value_name = "REGEX")]
    pub comm: Option<String>,
    /// Only processes whose cgroup v2 path contains this text.
    #[arg(long)]
    pub cgroup: Option<String>,
    /// Show the parent/child forest.
    #[arg(long)]
    pub tree: bool,
    /// One row per thread instead of per process.
    #[arg(long)]
    pub threads: bool,
    /// One JSON object per process (NDJSON), every column.
    #[arg(long)]
    pub json: bool,
    /// CPU % over this interval (two reads) instead of over each process's life.
    #[arg(long, value_parser = parse_duration)]
    pub interval: Option<Duration>,
    /// Read /proc only.
    #[arg(long)]
    pub no_bpf: bool,
    /// As root: pin the iterator in bpffs (default /sys/fs/bpf/kernstat) so that any user
    /// can read it; mounts bpffs if needed.
    #[arg(long, value_name = "DIR", num_args = 0..=1, default_missing_value = kernstat_bpf::ps::DEFAULT_PIN_DIR)]
    pub pin: Option<PathBuf>,
    /// Remove a pin made with --pin.
    #[arg(long, value_name = "DIR", num_args = 0..=1, default_missing_value = kernstat_bpf::ps::DEFAULT_PIN_DIR)]
    pub unpin: Option<PathBuf>,
    /// Where to look for a pinned iterator.
    #[arg(long, value_name = "DIR", env = "KERNSTAT_PIN_DIR", default_value = kernstat_bpf::ps::DEFAULT_PIN_DIR)]
    pub pin_dir: PathBuf,
    /// Time N reads of the iterator against N procfs walks of the same fields; print
    /// {"n","tasks","bpf_p50_us","procfs_p50_us","ratio","walk"} (with --json; walk: "run",
    /// by BPF_PROG_RUN, or "iterator").
    #[arg(long, value_name = "N")]
    pub bench: Option<u32>,
}

/// `kernstat why`.
#[derive(Clone, Debug, Args)]
pub struct WhyArgs {
    /// The window: 10 s live (the daemon's), 60 s with --at.
    #[arg(long = "window", value_parser = parse_duration, value_name = "DURATION")]
    pub window_arg: Option<Duration>,
    /// Culprits and victims in this control group only (e.g. /system.slice/nginx.service).
    #[arg(long, value_name = "PATH")]
    pub cgroup: Option<String>,
    /// One JSON object: {"window", "findings": [{"resource", "score", "notable",
    /// "verdict", "culprits", "victims", "evidence", "next"}]}, ranked.
    #[arg(long)]
    pub json: bool,
    /// Sample here even when a daemon runs.
    #[arg(long)]
    pub here: bool,
    /// Thresholds from this file's [why] table (default: $XDG_CONFIG_HOME/kernstat/
    /// config.toml when it exists; docs/why.md).
    #[arg(long, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    /// A recorded moment (the window ending then).
    #[command(flatten)]
    pub replay: ReplayArgs,
    /// Where the daemon is.
    #[command(flatten)]
    pub socket: SocketArg,
    #[arg(skip)]
    pub window: Duration,
}

/// `kernstat tcp`.
#[derive(Clone, Debug, Args)]
pub struct TcpArgs {
    /// One JSON object per interval: retransmits per process, group, peer and socket,
    /// connect latency and connects per process.
    #[arg(long)]
    pub json: bool,
    /// Processes and peers listed per interval, at most.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// Seconds per interval (default 1).
    pub interval: Option<u64>,
    /// Number of intervals (default: until Ctrl-C).
    pub count: Option<u64>,
}

/// `kernstat view`.
#[derive(Clone, Debug, Args)]
pub struct ViewArgs {
    /// The archive to show (default as for --at).
    #[arg(long, value_name = "DIR")]
    pub archive: Option<PathBuf>,
    /// Listen here (loopback by default; another address needs --token-file).
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:9099")]
    pub listen: std::net::SocketAddr,
    /// The token every request must carry, from this file (first line; at least 16
    /// characters); default: a random one, printed in the URL.
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Follow the archive as a recorder writes it (`kernstat daemon --record`): the
    /// page's range moves to each new frame (the URL asks it with `follow=1`).
    #[arg(long)]
    pub live: bool,
    /// A second archive to compare with (another machine's, or one kept from before a
    /// change): the page switches between the two and compares a range of each.
    #[arg(long, value_name = "DIR")]
    pub compare: Option<PathBuf>,
}

/// `kernstat events`.
#[derive(Clone, Debug, Args)]
pub struct EventsArgs {
    /// One JSON object per event (NDJSON).
    #[arg(long)]
    pub json: bool,
    /// Only the recent list (from the daemon), then exit.
    #[arg(long)]
    pub recent: bool,
    /// Where the daemon is.
    #[command(flatten)]
    pub socket: SocketArg,
}
