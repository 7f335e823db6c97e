//! `kernstat bar`: the status-bar loop, its `--bench` mode, and following another bar.
//!
//! Each tick: one sample (BPF walk or procfs), one model update, one render into a kept
//! buffer, one write(2) to stdout. Ticks sit on a fixed grid (start + k * interval) so the
//! bar does not drift; the wait between them is sigtimedwait, so SIGRTMIN (cycle the
//! interval), SIGRTMIN+1 (toggle kernel threads) and SIGINT/SIGTERM act at once. A closed
//! stdout (Waybar went away) ends the loop with status 0.

use std::io::{self, Write};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use kernstat_bar::feed::Feed;
use kernstat_bar::Ticker;
use kernstat_model::{ModelOptions, RawSample, Source};
use kernstat_render::{BarFormat, BarRenderer, Template, TickInfo, FIELDS};

use crate::alloc::allocations;
use crate::cli::{BarArgs, FormatArg};
use crate::privileges;
use crate::selfcost::SelfCost;
use crate::signals::{Signals, Wake};
use crate::stdout::{Stdout, WriteOutcome};
use kernstat_client::instance::{self, FollowEnd, Leader, Role};

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
        let Some(summary) = feed.next_summary()? else {
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

fn ticker(args: &BarArgs, template: Template, format: BarFormat) -> anyhow::Result<Ticker> {
    let lp = Ticker::open(
        crate::source::collect_options(&args.source),
        BarRenderer::new(format, template),
        ModelOptions {
            include_kthreads: args.kthreads,
            thresholds: args.thresholds(),
        },
    )
    .context("opening /proc")?;
    if let Some(notice) = lp.collector.notice(args.source.no_bpf) {
        eprintln!("kernstat: {notice}");
    }
    Ok(lp)
}

fn lead(
    args: &BarArgs,
    template: Template,
    format: BarFormat,
    signals: &Signals,
    leader: Option<Leader>,
) -> anyhow::Result<i32> {
    let mut lp = ticker(args, template, format)?;
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
    } else if !lp.renderer.processes_shown() {
        // Reading no process, it needs no capability at all (a procfs bar that shows
        // processes keeps root's, which reading other users' /proc/PID/io needs).
        privileges::drop_after_load(|| true);
    }

    let mut out = Stdout::new();
    let mut header = Vec::new();
    lp.renderer.header(&mut header);
    if out.write(&header) == WriteOutcome::Closed {
        return Ok(0);
    }
    lp.baseline()?;
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

fn bench(args: &BarArgs, template: Template, format: BarFormat, n: u32) -> anyhow::Result<i32> {
    if n == 0 {
        crate::cli::usage!("--bench needs at least one sample");
    }
    let mut lp = ticker(args, template, format)?;
    let r = kernstat_bar::bench::bench(&mut lp, n, allocations)?;
    let report = serde_json::json!({
        "n": n,
        "source": lp.collector.source().as_str(),
        "tasks": r.tasks,
        "avg_us": round2(r.avg_us),
        "p50_us": round2(r.percentile_us(0.50)),
        "p95_us": round2(r.percentile_us(0.95)),
        "p99_us": round2(r.percentile_us(0.99)),
        "min_us": round2(r.percentile_us(0.0)),
        "max_us": round2(r.percentile_us(1.0)),
        "allocs_per_sample": r.allocations as f64 / n as f64,
        "growing_samples": r.growing_samples,
        "allocs_in_steady_samples": r.allocs_in_steady_samples,
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
