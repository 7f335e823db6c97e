//! Command-line interface: every command and flag, with clap. Parsing only; the commands
//! live in their own modules.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// A mistake in how a command was called, found after parsing (an unknown column, a pid
/// that does not exist): exit 2 like clap's own errors, where a failure while running
/// exits 1. The message names the flag.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// Returns a [`UsageError`] from the enclosing function (which returns anyhow's Result).
macro_rules! usage {
    ($($t:tt)*) => {
        return Err($crate::cli::UsageError(format!($($t)*)).into())
    };
}
pub(crate) use usage;

/// Whether a process (or thread) of this id exists now (in this pid namespace).
pub fn process_exists(pid: u32) -> bool {
    pid != 0 && std::path::Path::new(&format!("/proc/{pid}")).exists()
}
use kernstat_model::{Threshold, Thresholds};
use kernstat_sources::TempSource;

/// kernstat: a Linux observer that costs almost nothing.
#[derive(Debug, Parser)]
#[command(name = "kernstat", bin_name = "kernstat", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Status-bar module: one line per tick for Waybar (default), i3bar or plain text.
    Bar(BarArgs),
    /// One full sample of every metric (two readings INTERVAL apart, for rates).
    Snapshot(SnapshotArgs),
    /// The process table, from one read of a BPF task iterator (procfs without BPF).
    Ps(PsArgs),
    /// The live view: per-core bars, memory, load and pressure above a process table that
    /// sorts, filters, shows a tree and signals; run-queue latency on a key.
    Top(TopArgs),
    /// Control groups: CPU and throttling, memory, I/O, pressure, tasks and network per
    /// group, over an interval, as a tree (or NDJSON).
    Cgroups(CgroupsArgs),
    /// The flight recorder's samples between two times, as JSON, CSV or OpenMetrics
    /// (`kernstat daemon --record` writes them).
    Dump(DumpArgs),
    /// Run-queue latency histograms (libbpf-tools runqlat's flags, plus -C, --csv,
    /// --json, --plot).
    Runqlat(RunqlatArgs),
    /// Block I/O latency histograms per disk and operation (libbpf-tools biolatency's
    /// flags, plus --json).
    Biolat(BiolatArgs),
    /// TCP retransmits per process, group and peer, and connect latency (tracepoints).
    Tcp(TcpArgs),
    /// What hurt this machine most over a window, ranked, with culprits, victims,
    /// evidence and the next command; now, or at a recorded moment (--at).
    Why(WhyArgs),
    /// The recorded history as a page: timelines, latency heatmaps, the process table
    /// and groups at any moment, why, and two windows compared (a URL with a token).
    View(ViewArgs),
    /// Notable kernel events (OOM kills: the victim, its group, the limit that fired,
    /// the biggest growers): the daemon's recent list, then each new one.
    Events(EventsArgs),
    /// Write-size (or read-size) histograms per process, and a small-write verdict.
    Writes(WritesArgs),
    /// One sampler and cache serving bars, prompts and scripts over a Unix socket.
    Daemon(DaemonArgs),
    /// Values from the daemon (or computed here when no daemon runs).
    Get(GetArgs),
    /// Fills `{key}` fields of a template with values, in one round trip.
    Eval(EvalArgs),
    /// Sets a var.NAME value that other clients get and watch.
    Put(PutArgs),
    /// Every update of a value from the daemon, one per line.
    Watch(WatchArgs),
    /// Requests on stdin, values on stdout over one connection (what `init bash` runs).
    Session(SessionArgs),
    /// Prints the prompt hook to eval in a shell's rc file: eval "$(kernstat init zsh)".
    Init(InitArgs),
    /// The daemon's state.
    Status(StatusArgs),
    /// What this kernel and these privileges allow, and which path each command takes.
    Doctor(DoctorArgs),
    /// Shell completions (bash, zsh, fish) on standard output.
    Completions(CompletionsArgs),
    /// Writes the man pages (kernstat.1, kernstat-COMMAND.1) into a directory.
    #[command(hide = true)]
    Manpages(ManpagesArgs),
}

/// A past moment from the flight recorder's archive (`kernstat daemon --record`).
#[derive(Clone, Debug, Default, Args)]
pub struct ReplayArgs {
    /// Show the recorded sample at this time instead of now: 03:12 (today, local time),
    /// -10m (ago: s, m, h, d), 2026-11-25T03:12:00Z, "2026-11-25 03:12" (RFC 3339 /
    /// local) or @EPOCH_SECONDS. The sample nearest to it is shown, with its time and
    /// the interval its rates cover; a time outside the archive, or farther than three
    /// of its intervals (at least 30 s) from any sample, is refused with the span the
    /// archive holds.
    #[arg(long, value_name = "TIME", allow_hyphen_values = true)]
    pub at: Option<String>,
    /// With --at: take the sample closest to the time, however far it is.
    #[arg(long, requires = "at")]
    pub nearest: bool,
    /// The archive to read (default: $KERNSTAT_ARCHIVE, else the system daemon's
    /// /var/lib/kernstat/record when it can be read, else your own,
    /// ~/.local/state/kernstat/record).
    #[arg(long, value_name = "DIR")]
    pub archive: Option<PathBuf>,
}

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

/// `kernstat doctor`.
#[derive(Clone, Debug, Args)]
pub struct DoctorArgs {
    /// One JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `kernstat completions`.
#[derive(Clone, Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    pub shell: clap_complete::Shell,
}

/// `kernstat manpages`.
#[derive(Clone, Debug, Args)]
pub struct ManpagesArgs {
    /// Where to write them.
    pub dir: PathBuf,
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

/// Where samples come from, shared by every sampling command.
#[derive(Clone, Debug, Args)]
pub struct SourceArgs {
    /// Never load BPF: read /proc and /sys only (the output says "source": "procfs").
    #[arg(long)]
    pub no_bpf: bool,
    /// CPU temperature sensor: auto, off, zone:TYPE, hwmon:NAME[:LABEL], or a file path.
    #[arg(long, default_value = "auto", value_parser = parse_temp)]
    pub temp: TempSource,
    /// Read procfs and sysfs under this directory instead of / (for tests).
    #[arg(long, hide = true)]
    pub root: Option<PathBuf>,
}

fn parse_temp(s: &str) -> Result<TempSource, String> {
    s.parse()
}

/// Parses seconds like "2", "0.5", "1.5s", "500ms".
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, scale) = if let Some(v) = s.strip_suffix("ms") {
        (v, 1e-3)
    } else if let Some(v) = s.strip_suffix('s') {
        (v, 1.0)
    } else {
        (s, 1.0)
    };
    let secs: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (seconds, e.g. 2, 0.5 or 500ms)"))?;
    let secs = secs * scale;
    if !(0.01..=86_400.0).contains(&secs) {
        return Err(format!("{s:?}: the interval must be between 10ms and 24h"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A list of intervals, e.g. "1,2,5".
#[derive(Clone, Debug, PartialEq)]
pub struct Intervals(pub Vec<Duration>);

fn parse_durations(s: &str) -> Result<Intervals, String> {
    s.split(',')
        .map(|p| parse_duration(p.trim()))
        .collect::<Result<Vec<_>, _>>()
        .map(Intervals)
}

/// `cpu=70,mem=80,temp=85`: any subset.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LevelSpec {
    /// CPU percent.
    pub cpu: Option<f64>,
    /// Memory used percent.
    pub mem: Option<f64>,
    /// Temperature, degrees Celsius.
    pub temp: Option<f64>,
}

fn parse_levels(s: &str) -> Result<LevelSpec, String> {
    let mut spec = LevelSpec::default();
    for part in s.split(',').filter(|p| !p.trim().is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| format!("{part:?}: expected METRIC=VALUE, e.g. cpu=90"))?;
        let v: f64 = v
            .trim()
            .parse()
            .map_err(|_| format!("{part:?}: {v:?} is not a number"))?;
        match k.trim() {
            "cpu" => spec.cpu = Some(v),
            "mem" => spec.mem = Some(v),
            "temp" => spec.temp = Some(v),
            other => return Err(format!("unknown metric {other:?}: use cpu, mem or temp")),
        }
    }
    Ok(spec)
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
    #[arg(long, default_value = "1,2,5", value_parser = parse_durations)]
    pub intervals: Intervals,
    /// Include kernel threads in the top lists (SIGRTMIN+1 toggles).
    #[arg(long)]
    pub kthreads: bool,
    /// Warning thresholds, e.g. cpu=70,mem=80,temp=80 (these are the defaults).
    #[arg(long, value_parser = parse_levels, default_value = "")]
    pub warn: LevelSpec,
    /// Critical thresholds, e.g. cpu=90,mem=95,temp=95 (these are the defaults).
    #[arg(long, value_parser = parse_levels, default_value = "")]
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
        let d = Thresholds::default();
        let pick = |base: Threshold, w: Option<f64>, c: Option<f64>| Threshold {
            warning: w.unwrap_or(base.warning),
            critical: c.unwrap_or(base.critical),
        };
        Thresholds {
            cpu: pick(d.cpu, self.warn.cpu, self.crit.cpu),
            mem: pick(d.mem, self.warn.mem, self.crit.mem),
            temp: pick(d.temp, self.warn.temp, self.crit.temp),
        }
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
    /// {"n","tasks","bpf_p50_us","procfs_p50_us","ratio"} (with --json).
    #[arg(long, value_name = "N")]
    pub bench: Option<u32>,
}

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

/// `1G`, `500M`, `64K`, `1048576`: a size in bytes (powers of 1024).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let (num, scale) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1 << 30),
        Some('T' | 't') => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?}: a size is a number with K, M, G or T (e.g. 1G)"))?;
    match n.checked_mul(scale) {
        Some(b) if b >= 1 << 20 => Ok(b),
        Some(_) => Err(format!("{s:?}: at least 1M (an hour's file must fit)")),
        None => Err(format!("{s:?}: too large")),
    }
}

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

/// Where to find the daemon.
#[derive(Clone, Debug, Args)]
pub struct SocketArg {
    /// The daemon's socket (default: $KERNSTAT_SOCKET, else the user daemon's if present,
    /// else the system daemon's).
    #[arg(long)]
    pub socket: Option<PathBuf>,
}

/// How `get` prints values.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Each value on its own line (strings bare; a provider's fields as field=value lines).
    #[default]
    Text,
    /// One JSON object, key to value (null without one).
    Json,
    /// KS_KEY='value' lines sh, bash and zsh can eval (KS_GIT_BRANCH, KS_LOAD_ONE).
    Shell,
    /// `set -g KS_KEY 'value'` lines fish can eval.
    Fish,
    /// key<TAB>value lines.
    Tsv,
    /// key,value lines (RFC 4180 quoting).
    Csv,
}

/// `kernstat get`.
#[derive(Clone, Debug, Args)]
pub struct GetArgs {
    /// Keys, e.g. load.one mem.used git.branch kubecontext.context, or a provider's name
    /// for all its fields (git, python); `kernstat get --list` names them.
    #[arg(required_unless_present = "list")]
    pub keys: Vec<String>,
    /// For per-directory keys (git, python, asdf ...): the directory (default: the
    /// current one).
    #[arg(long)]
    pub path: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text, conflicts_with = "json")]
    pub format: Format,
    /// Print the daemon's whole reply (value, age, staleness) as a JSON line per key.
    #[arg(long)]
    pub json: bool,
    /// List every key and what it means.
    #[arg(long)]
    pub list: bool,
    /// Where to find the daemon.
    #[command(flatten)]
    pub socket: SocketArg,
}

/// `kernstat session`: reads `get DIR KEY...` and `env NAME [VALUE]` lines (TAB
/// between fields) and prints one line per key.
#[derive(Clone, Debug, Args)]
pub struct SessionArgs {
    /// Where to find the daemon.
    #[command(flatten)]
    pub socket: SocketArg,
}

/// The shells `kernstat init` writes hooks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Shell {
    /// A socket kept open with zsh/net/socket: a prompt forks nothing.
    Zsh,
    /// A `kernstat session` coprocess: a prompt forks nothing.
    Bash,
    /// One `kernstat get` for all keys per prompt (fish has no sockets or coprocesses).
    Fish,
}

/// `kernstat init`.
#[derive(Clone, Debug, Args)]
pub struct InitArgs {
    /// The shell.
    pub shell: Shell,
    /// The keys the hook refreshes before each prompt, as KS_* variables (change them
    /// later with the `kernstat_keys` array).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "git.branch,git.dirty,load.one"
    )]
    pub keys: Vec<String>,
    /// Where to find the daemon.
    #[command(flatten)]
    pub socket: SocketArg,
}

/// `kernstat put`.
#[derive(Clone, Debug, Args)]
pub struct PutArgs {
    /// The key: var.NAME (letters, digits, . _ -).
    pub key: String,
    /// The value: a string, or JSON with --json; omitted with --delete.
    #[arg(required_unless_present = "delete")]
    pub value: Option<String>,
    /// The value is JSON (a number, object ...), not a string.
    #[arg(long)]
    pub json: bool,
    /// Seconds until the value expires (default: until the daemon stops).
    #[arg(long)]
    pub ttl: Option<f64>,
    /// Removes the key.
    #[arg(long, conflicts_with_all = ["value", "json", "ttl"])]
    pub delete: bool,
    /// Where to find the daemon.
    #[command(flatten)]
    pub socket: SocketArg,
}

/// `kernstat eval`.
#[derive(Clone, Debug, Args)]
pub struct EvalArgs {
    /// The template: text with {key} fields, {{ and }} for braces, e.g.
    /// '{git.branch} {load.one}'. A field without a value is left empty.
    pub template: String,
    /// For per-directory keys: the directory (default: the current one).
    #[arg(long)]
    pub path: Option<PathBuf>,
    /// Where to find the daemon.
    #[command(flatten)]
    pub socket: SocketArg,
}

/// `kernstat watch`.
#[derive(Clone, Debug, Args)]
pub struct WatchArgs {
    /// The key.
    pub key: String,
    /// For git.* keys: the directory (default: the current one).
    #[arg(long)]
    pub path: Option<PathBuf>,
    /// Print each update as the daemon's JSON line.
    #[arg(long)]
    pub json: bool,
    /// Where to find the daemon.
    #[command(flatten)]
    pub socket: SocketArg,
}

/// `kernstat status`.
#[derive(Clone, Debug, Args)]
pub struct StatusArgs {
    /// Print the daemon's status object as JSON.
    #[arg(long)]
    pub json: bool,
    /// Where to find the daemon.
    #[command(flatten)]
    pub socket: SocketArg,
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("fast").is_err());
    }

    #[test]
    fn levels() {
        let l = parse_levels("cpu=50, temp=70").unwrap();
        assert_eq!(l.cpu, Some(50.0));
        assert_eq!(l.temp, Some(70.0));
        assert_eq!(l.mem, None);
        assert!(parse_levels("disk=3").is_err());
        assert!(parse_levels("cpu").is_err());
        assert!(parse_levels("cpu=x").is_err());
    }
}
