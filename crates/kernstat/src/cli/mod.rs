//! Command-line interface: every command and flag, with clap. Parsing only; the commands
//! live in their own modules.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};
use kernstat_model::{LevelSpec, Thresholds};
pub use kernstat_os::interval::{parse_duration, Intervals};
use kernstat_sources::TempSource;

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

mod clients;
mod daemon;
mod traces;
mod views;

pub use clients::*;
pub use daemon::*;
pub use traces::*;
pub use views::*;

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }
}
