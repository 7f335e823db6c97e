//! `kernstat why`: what hurt this machine most over a window, ranked, with culprits,
//! victims, evidence and the next command (kernstat-why's rules). Live: the daemon's last
//! 10 s when one answers and the window is its; else two readings of its own `--window`
//! apart. `--at TIME`: the recorded frames of the window ending at TIME, and the events
//! and retransmits recorded between them.

use std::io::Write;
use std::time::Duration;

use kernstat_client::session::Session;
use kernstat_model::events::Event;
use kernstat_why::{Between, Report, Snapshot, Thresholds};

use crate::cli::WhyArgs;

fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The daemon's report, when one answers.
fn from_daemon(socket: Option<&std::path::Path>) -> Option<Report> {
    let path = match socket {
        Some(p) => p.to_path_buf(),
        None => kernstat_client::default_socket().ok()?,
    };
    let mut s = Session::connect(&path).ok()?;
    s.set_timeout(Some(Duration::from_secs(2))).ok()?;
    let reply = s.get("why.findings", None).ok()?;
    serde_json::from_value(reply.data?).ok()
}

/// The control group of process `pid` (cgroup v2 line of /proc/PID/cgroup).
fn cgroup_of(pid: u32) -> Option<String> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("0::"))
        .map(|p| kernstat_model::text::printable(p).into_owned())
}

/// Two readings `window` apart, here.
fn sample_here(window: Duration, thresholds: &Thresholds) -> anyhow::Result<Report> {
    let roots = kernstat_sources::Roots::default();
    let mut collector =
        kernstat_collect::Collector::open(&kernstat_collect::collector::CollectOptions::default())?;
    collector.with_counters(&roots);
    collector.with_cgroups(&roots, Some(3), 500);
    collector.with_tcp();
    let mut oom = kernstat_collect::events::OomWatcher::open().ok();
    let mut a = kernstat_model::RawSample::default();
    let mut b = kernstat_model::RawSample::default();
    collector.sample(&mut a)?;
    let start = Snapshot::of(&a, unix_now_ns(), &cgroup_of);
    eprintln!(
        "kernstat: watching the machine for {} s...",
        window.as_secs_f64()
    );
    std::thread::sleep(window);
    collector.sample(&mut b)?;
    let end = Snapshot::of(&b, unix_now_ns(), &cgroup_of);
    let events: Vec<Event> = oom.as_mut().map(|w| w.poll()).unwrap_or_default();
    let retrans: Vec<(u32, String, Option<String>, u64)> = b
        .tcp
        .retransmits
        .iter()
        .map(|s| {
            (
                s.pid,
                s.comm.clone(),
                (!s.cgroup.is_empty()).then(|| s.cgroup.clone()),
                s.count,
            )
        })
        .collect();
    Ok(kernstat_why::findings(
        &start,
        &end,
        &Between {
            events: &events,
            retransmits: &retrans,
            ended: &[],
        },
        thresholds,
        "live",
    ))
}

/// The recorded window ending at `--at`.
fn recorded(
    args: &WhyArgs,
    at: &str,
    thresholds: &Thresholds,
) -> anyhow::Result<Result<Report, i32>> {
    let (mut cursor, _) = match crate::replay::cursor_at(&args.replay, at)? {
        Ok(c) => c,
        Err(code) => return Ok(Err(code)),
    };
    let report = kernstat_why::recorded(&mut cursor, args.window.as_nanos() as u64, thresholds)
        .expect("cursor_at stands on a frame");
    for w in cursor.warnings.drain(..) {
        eprintln!("kernstat: {w}");
    }
    Ok(Ok(report))
}

/// The thresholds: the [why] table of `--config`, else of the default config file when
/// it exists, over the documented defaults.
fn thresholds(config: Option<&std::path::Path>) -> Result<Thresholds, String> {
    let path = match config {
        Some(p) => p.to_path_buf(),
        None => match kernstat_daemon::settings::default_path() {
            Some(p) if p.exists() => p,
            _ => return Ok(Thresholds::default()),
        },
    };
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let settings = kernstat_daemon::settings::Settings::parse(&text)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(settings.why.thresholds())
}

/// Runs `kernstat why`; returns the exit status.
pub fn run(args: &WhyArgs) -> anyhow::Result<i32> {
    let thresholds = match thresholds(args.config.as_deref()) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("kernstat why: {e}");
            return Ok(2);
        }
    };
    // The daemon ranks with the documented defaults: a user's own thresholds are
    // applied to a window sampled here.
    let defaults = thresholds == Thresholds::default();
    let mut report = match &args.replay.at {
        Some(at) => match recorded(args, at, &thresholds)? {
            Ok(r) => r,
            Err(code) => return Ok(code),
        },
        None if !args.here && defaults && args.window == Duration::from_secs(10) => {
            match from_daemon(args.socket.socket.as_deref()) {
                Some(r) if !r.findings.is_empty() => r,
                _ => sample_here(args.window, &thresholds)?,
            }
        }
        None => sample_here(args.window, &thresholds)?,
    };
    if let Some(path) = &args.cgroup {
        report.keep_group(path);
    }
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer(&mut out, &report)?;
        writeln!(out)?;
    } else {
        let stamp = kernstat_record::time::local_stamp(report.window.end_unix_ns);
        out.write_all(kernstat_why::text::render(&report, &stamp).as_bytes())?;
    }
    Ok(0)
}
