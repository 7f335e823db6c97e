//! `kernstat bar`: the status-bar loop, its `--bench` mode, and following another bar.
//!
//! Each tick: one sample (BPF walk or procfs), one model update, one render into a kept
//! buffer, one write(2) to stdout. Ticks sit on a fixed grid (start + k * interval) so the
//! bar does not drift; the wait between them is sigtimedwait, so SIGRTMIN (cycle the
//! interval), SIGRTMIN+1 (toggle kernel threads) and SIGINT/SIGTERM act at once. A closed
//! stdout (Waybar went away) ends the loop with status 0.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use kernstat_client::lookup;
use kernstat_model::{Model, ModelOptions, RawSample, Source};
use kernstat_render::{BarFormat, BarRenderer, Template, TickInfo, FIELDS};

use crate::alloc::allocations;
use crate::cli::{BarArgs, FormatArg};
use crate::instance::{self, FollowEnd, Leader, Role};
use crate::privileges;
use crate::selfcost::SelfCost;
use crate::signals::{Signals, Wake};
use crate::stdout::{Stdout, WriteOutcome};
use kernstat_collect::Collector;

/// The first tick comes this soon after the baseline sample (rates need two samples),
/// so that a bar shows numbers within ~50 ms of starting.
const FIRST_WINDOW: Duration = Duration::from_millis(20);

fn format_of(args: &BarArgs) -> BarFormat {
    // With --bench, --json is about the report; the bar's own format is benchmarked.
    if args.json && args.bench.is_none() {
        return BarFormat::Json;
    }
    match args.format {
        FormatArg::Waybar => BarFormat::Waybar,
        FormatArg::I3bar => BarFormat::I3bar,
        FormatArg::Text => BarFormat::Text,
    }
}

/// The options that make two bars' output identical (the instance-lock key).
fn config_string(args: &BarArgs) -> String {
    format!(
        "{:?}|{}|{}|{:?}|{:?}|{}|{:?}|{:?}|{:?}|{}|{}|{:?}",
        args.format,
        args.json,
        args.text,
        args.interval,
        args.intervals,
        args.kthreads,
        args.warn,
        args.crit,
        args.source.temp,
        args.source.no_bpf,
        args.self_cost,
        args.source.root,
    )
}

/// Runs `kernstat bar`; returns the exit status.
pub fn run(args: &BarArgs) -> anyhow::Result<i32> {
    if args.fields {
        let mut out = io::stdout().lock();
        for (name, _, what) in FIELDS {
            writeln!(out, "{{{name}}}\t{what}")?;
        }
        return Ok(0);
    }
    let template = Template::parse(&args.text).context("--text")?;
    if args.intervals.0.is_empty() {
        crate::cli::usage!("--intervals needs at least one interval");
    }
    let format = format_of(args);
    if args.daemon && args.bench.is_none() {
        if let Some(code) = from_daemon(args, &template, format)? {
            return Ok(code);
        }
    }
    let signals = Signals::block();

    if let Some(n) = args.bench {
        return bench(args, template, format, n);
    }
    if args.no_lock {
        return lead(args, template, format, &signals, None);
    }
    let dir = instance::runtime_dir();
    let key = instance::config_key(&config_string(args));
    loop {
        match instance::claim(&dir, &key) {
            Err(e) => {
                // No runtime directory, or one (or a file in it) kernstat does not
                // trust: sample ourselves rather than fail.
                if e.kind() == std::io::ErrorKind::PermissionDenied {
                    eprintln!("kernstat: {e}; sampling alone");
                } else {
                    eprintln!(
                        "kernstat: no instance lock in {} ({e}); sampling alone",
                        dir.display()
                    );
                }
                return lead(args, template, format, &signals, None);
            }
            Ok(Role::Leader(l)) => return lead(args, template, format, &signals, Some(l)),
            Ok(Role::Follower(f)) => {
                if let Err(e) = f.check() {
                    eprintln!("kernstat: {e}; sampling alone");
                    return lead(args, template, format, &signals, None);
                }
                let mut out = Stdout::new();
                let mut header = Vec::new();
                let renderer = BarRenderer::new(format, template.clone());
                renderer.header(&mut header);
                if out.write(&header) == WriteOutcome::Closed {
                    return Ok(0);
                }
                let mut lines = 0u64;
                let mut closed = false;
                let end = f.follow(
                    args.interval.max(Duration::from_millis(500)),
                    || signals.poll() == Wake::Stop,
                    |line| {
                        let comma = format == BarFormat::I3bar && lines > 0;
                        lines += 1;
                        let ok = (!comma || out.write(b",") == WriteOutcome::Written)
                            && out.write(line) == WriteOutcome::Written;
                        closed = !ok;
                        ok
                    },
                )?;
                match end {
                    FollowEnd::Stop => return Ok(0),
                    FollowEnd::LeaderGone if closed => return Ok(0),
                    FollowEnd::LeaderGone => continue,
                }
            }
        }
    }
}

/// How long `bar --daemon` keeps trying to reach a daemon that went away (a restart).
const RECONNECT_FOR: Duration = Duration::from_secs(10);

/// One update of the daemon's `summary` key.
#[derive(serde::Deserialize)]
struct DaemonUpdate {
    ok: bool,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    data: Option<DaemonSummary>,
}

#[derive(serde::Deserialize)]
struct DaemonSummary {
    #[serde(flatten)]
    model: Model,
    #[serde(default)]
    sample_us: f64,
}

/// Where `bar --daemon` reads the daemon's summaries from: the shared-memory snapshot
/// (polled when a sample is due; no socket, nothing for the daemon to do), else a socket
/// `watch` stream.
enum Feed {
    Shm(Box<lookup::Follow>),
    Socket(kernstat_client::session::Watch),
}

impl Feed {
    fn open(socket: Option<&Path>) -> Result<(PathBuf, Feed), String> {
        let sock = match socket {
            Some(p) => p.to_path_buf(),
            None => kernstat_client::default_socket().map_err(|e| e.to_string())?,
        };
        if let Some(f) = lookup::Follow::new(sock.clone(), "summary") {
            return Ok((sock, Feed::Shm(Box::new(f))));
        }
        let (sock, s) = crate::client::connect(Some(&sock))?;
        let w = s
            .watch("summary", None)
            .map_err(|e| format!("daemon at {}: {e}", sock.display()))?;
        Ok((sock, Feed::Socket(w)))
    }

    /// The next summary; Ok(None) when this feed ended (the daemon went away).
    fn next(&mut self) -> anyhow::Result<Option<DaemonSummary>> {
        let update: DaemonUpdate = match self {
            Feed::Shm(f) => {
                let Some((v, _)) = f.next_stored() else {
                    return Ok(None);
                };
                if v.error {
                    bail!("daemon: {}", String::from_utf8_lossy(&v.bytes));
                }
                DaemonUpdate {
                    ok: true,
                    error: None,
                    data: serde_json::from_slice(&v.bytes)
                        .context("reading the daemon's summary")?,
                }
            }
            Feed::Socket(w) => match w.next_raw() {
                Ok(Some(line)) => {
                    serde_json::from_slice(line).context("reading the daemon's summary")?
                }
                Ok(None) | Err(_) => return Ok(None),
            },
        };
        match update.data.filter(|_| update.ok) {
            Some(summary) => Ok(Some(summary)),
            None => bail!(
                "daemon: {}",
                update.error.unwrap_or_else(|| "no summary".into())
            ),
        }
    }
}

/// `bar --daemon`: renders every update of the daemon's summary (ticks follow the
/// daemon's interval). Returns None to sample here instead, when no daemon answers at
/// start; a daemon that goes away later gets `RECONNECT_FOR` to come back.
fn from_daemon(
    args: &BarArgs,
    template: &Template,
    format: BarFormat,
) -> anyhow::Result<Option<i32>> {
    let (sock, mut feed) = match Feed::open(args.socket.as_deref()) {
        Ok(c) => c,
        Err(why) => {
            eprintln!("kernstat: {why}; sampling here");
            return Ok(None);
        }
    };
    // SIGRTMIN and SIGRTMIN+1 steer a sampling bar; here the daemon samples, and they
    // must not kill the bar. SAFETY: setting a signal's disposition to SIG_IGN.
    unsafe {
        libc::signal(libc::SIGRTMIN(), libc::SIG_IGN);
        libc::signal(libc::SIGRTMIN() + 1, libc::SIG_IGN);
    }
    let thresholds = args.thresholds();
    let mut renderer = BarRenderer::new(format, template.clone());
    let mut out = Stdout::new();
    let mut buf = Vec::with_capacity(16 * 1024);
    renderer.header(&mut buf);
    if out.write(&buf) == WriteOutcome::Closed {
        return Ok(Some(0));
    }
    loop {
        let Some(summary) = feed.next()? else {
            let gone = Instant::now();
            loop {
                std::thread::sleep(Duration::from_secs(1));
                if let Ok((_, f)) = Feed::open(Some(&sock)) {
                    feed = f;
                    break;
                }
                if gone.elapsed() > RECONNECT_FOR {
                    bail!("the daemon at {} went away", sock.display());
                }
            }
            continue;
        };
        let mut model = summary.model;
        model.apply_thresholds(&thresholds);
        buf.clear();
        let tick = TickInfo {
            sample_us: summary.sample_us,
            self_cost_percent: None,
        };
        renderer.render(&model, &tick, &mut buf);
        if out.write(&buf) == WriteOutcome::Closed {
            return Ok(Some(0));
        }
    }
}

struct Loop {
    collector: Collector,
    prev: RawSample,
    cur: RawSample,
    model: Model,
    opts: ModelOptions,
    renderer: BarRenderer,
    out: Vec<u8>,
}

impl Loop {
    fn new(args: &BarArgs, template: Template, format: BarFormat) -> anyhow::Result<Self> {
        let mut collector = crate::source::open_collector(&args.source)?;
        let renderer = BarRenderer::new(format, template);
        let (links, processes) = renderer.network_shown();
        collector.keep_network(links, processes);
        Ok(Loop {
            collector,
            prev: RawSample::default(),
            cur: RawSample::default(),
            model: Model::default(),
            opts: ModelOptions {
                include_kthreads: args.kthreads,
                thresholds: args.thresholds(),
            },
            renderer,
            out: Vec::with_capacity(16 * 1024),
        })
    }

    /// Samples into `cur`, updates the model from `prev`, renders into `out`, and makes
    /// `cur` the next `prev`. Returns how long it took.
    fn tick(&mut self, self_cost: Option<f64>) -> anyhow::Result<Duration> {
        let t0 = Instant::now();
        self.collector.sample(&mut self.cur).context("sampling")?;
        self.model.update(&self.prev, &self.cur, &self.opts);
        self.out.clear();
        let tick = TickInfo {
            sample_us: t0.elapsed().as_secs_f64() * 1e6,
            self_cost_percent: self_cost,
        };
        self.renderer.render(&self.model, &tick, &mut self.out);
        std::mem::swap(&mut self.prev, &mut self.cur);
        Ok(t0.elapsed())
    }
}

fn lead(
    args: &BarArgs,
    template: Template,
    format: BarFormat,
    signals: &Signals,
    leader: Option<Leader>,
) -> anyhow::Result<i32> {
    let mut lp = Loop::new(args, template, format)?;
    let mut self_cost = args
        .self_cost
        .then(|| SelfCost::start(lp.collector.sampler()));
    if let Some(why) = self_cost.as_ref().and_then(|s| s.bpf_unavailable.as_ref()) {
        eprintln!("kernstat: --self-cost counts process CPU only: {why}");
    }
    if lp.collector.source() == Source::Bpf {
        let mut scratch = RawSample::default();
        let collector = &mut lp.collector;
        privileges::drop_after_load(|| collector.sample(&mut scratch).is_ok());
    }

    let mut out = Stdout::new();
    let mut header = Vec::new();
    lp.renderer.header(&mut header);
    if out.write(&header) == WriteOutcome::Closed {
        return Ok(0);
    }
    lp.collector.sample(&mut lp.prev).context("sampling")?;
    let mut interval = args.interval;
    let mut interval_idx = args
        .intervals
        .0
        .iter()
        .position(|&i| i == interval)
        .unwrap_or(args.intervals.0.len() - 1);
    let wall = Instant::now();
    if let Some(sc) = self_cost.as_mut() {
        sc.measure(lp.collector.sampler(), 0);
    }
    let mut next = wall + FIRST_WINDOW.min(interval);
    loop {
        let now = Instant::now();
        if next > now {
            match signals.wait(next - now) {
                // Resize is not blocked here (only top takes SIGWINCH).
                Wake::Timeout | Wake::Resize => continue,
                Wake::Stop => return Ok(0),
                Wake::RtMin => {
                    interval_idx = (interval_idx + 1) % args.intervals.0.len();
                    interval = args.intervals.0[interval_idx];
                    next = Instant::now();
                    continue;
                }
                Wake::RtMin1 => {
                    lp.opts.include_kthreads = !lp.opts.include_kthreads;
                    next = Instant::now();
                    continue;
                }
            }
        }
        let cost = self_cost
            .as_mut()
            .and_then(|sc| sc.measure(lp.collector.sampler(), wall.elapsed().as_nanos() as u64));
        lp.tick(cost)?;
        if out.write(&lp.out) == WriteOutcome::Closed {
            return Ok(0);
        }
        if let Some(l) = &leader {
            l.publish(&lp.out);
        }
        // Next grid point after now (skip missed ones after a suspend or a stall).
        let now = Instant::now();
        next += interval;
        if next <= now {
            next = now + interval;
        }
    }
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[idx] as f64 / 1000.0
}

fn bench(args: &BarArgs, template: Template, format: BarFormat, n: u32) -> anyhow::Result<i32> {
    if n == 0 {
        crate::cli::usage!("--bench needs at least one sample");
    }
    let mut lp = Loop::new(args, template, format)?;
    lp.collector.sample(&mut lp.prev).context("sampling")?;
    // Let every buffer grow to its working size first.
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(1));
        lp.tick(None)?;
    }
    let mut times = Vec::with_capacity(n as usize);
    // A sample that reads more processes, tasks or processes that used a socket than
    // any before grows its tables (an allocation that stays), and so does the next (the
    // samples alternate between two sets of tables); every other sample must allocate
    // nothing. Counted apart, so that the claim holds on a machine where processes come
    // and go.
    let size = |lp: &Loop| {
        [
            lp.prev.tasks.procs.len(),
            lp.prev.tasks.tasks as usize,
            lp.prev.net.procs.len(),
        ]
    };
    let mut most = size(&lp);
    let mut grew_last = false;
    let (mut allocs, mut steady_allocs, mut growing) = (0u64, 0u64, 0u32);
    for _ in 0..n {
        std::thread::sleep(Duration::from_millis(1));
        let a0 = allocations();
        let t = lp.tick(None)?;
        let made = allocations() - a0;
        allocs += made;
        let now = size(&lp);
        let grew = now.iter().zip(&most).any(|(n, m)| n > m);
        for (m, n) in most.iter_mut().zip(now) {
            *m = (*m).max(n);
        }
        let after_growth = std::mem::replace(&mut grew_last, grew);
        if grew || after_growth {
            growing += 1;
        } else {
            steady_allocs += made;
        }
        times.push(t.as_nanos() as u64);
    }
    let avg = times.iter().sum::<u64>() as f64 / times.len() as f64 / 1000.0;
    times.sort_unstable();
    let report = serde_json::json!({
        "n": n,
        "source": lp.collector.source().as_str(),
        "tasks": lp.prev.tasks.tasks,
        "avg_us": round2(avg),
        "p50_us": round2(percentile(&times, 0.50)),
        "p95_us": round2(percentile(&times, 0.95)),
        "p99_us": round2(percentile(&times, 0.99)),
        "min_us": round2(percentile(&times, 0.0)),
        "max_us": round2(percentile(&times, 1.0)),
        "allocs_per_sample": allocs as f64 / n as f64,
        "growing_samples": growing,
        "allocs_in_steady_samples": steady_allocs,
    });
    let mut stdout = io::stdout().lock();
    if args.json {
        writeln!(stdout, "{report}")?;
    } else {
        writeln!(
            stdout,
            "{n} samples ({}, {} tasks): p50 {} µs, p95 {} µs, p99 {} µs, min {} µs, max {} µs, {} allocations per sample",
            report["source"].as_str().unwrap_or("?"),
            report["tasks"],
            report["p50_us"],
            report["p95_us"],
            report["p99_us"],
            report["min_us"],
            report["max_us"],
            report["allocs_per_sample"],
        )?;
    }
    Ok(0)
}

fn round2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}
