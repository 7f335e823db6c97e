//! `kernstat runqlat`: run-queue latency histograms, with libbpf-tools runqlat's flags
//! and output, plus per-CPU histograms, interpolated percentiles (CSV and JSON), a
//! cumulative mode and a plot.
//!
//! The command only wires parts together: the BPF collector (kernstat-bpf runqlat),
//! interval differences (kernstat-model runqlat), the reports (kernstat-render runqlat),
//! names of processes and cgroups (kernstat-sources), and the pacing (interval.rs).

use std::io::{self, Write};
use std::time::{Duration, Instant};

use anyhow::Context;
use kernstat_bpf::runqlat::{Config, KeyKind, Runqlat};
use kernstat_model::hist::Hist;
use kernstat_model::runqlat::Intervals;
use kernstat_render::hist::{csv_header, csv_row};
use kernstat_render::plot::{self, Point};
use kernstat_render::runqlat::{write_json, write_text, Part, RunqlatReport, Split};
use kernstat_sources::procs::comm_of;
use kernstat_sources::Roots;

use crate::cli::RunqlatArgs;
use crate::interval::{clock, epoch_s, Ticker};
use crate::signals::Signals;

/// The flags' choices, checked.
fn config(args: &RunqlatArgs) -> anyhow::Result<(Config, Split)> {
    let per = [args.pids, args.tids, args.pidnss, args.cpus]
        .iter()
        .filter(|&&b| b)
        .count();
    if per > 1 {
        crate::cli::usage!("choose one of -P, -L, --pidnss and -C");
    }
    if args.csv && args.json {
        crate::cli::usage!("choose one of --csv and --json");
    }
    if let Some(pid) = args.pid {
        if !kernstat_sources::procs::process_exists(&Roots::default(), pid) {
            crate::cli::usage!("-p {pid}: no such process");
        }
    }
    if let Some(p) = &args.plot {
        let ext = p.extension().and_then(|e| e.to_str()).unwrap_or("");
        if !ext.eq_ignore_ascii_case("png") && !ext.eq_ignore_ascii_case("svg") {
            crate::cli::usage!(
                "--plot {}: the file name must end in .png or .svg",
                p.display()
            );
        }
    }
    let (key, split) = if args.pids {
        (KeyKind::Pid, Split::Pid)
    } else if args.tids {
        (KeyKind::Tid, Split::Tid)
    } else if args.pidnss {
        (KeyKind::PidNs, Split::PidNs)
    } else if args.cpus {
        (KeyKind::None, Split::Cpu)
    } else {
        (KeyKind::None, Split::None)
    };
    let cgroup = match &args.cgroup {
        Some(p) => Some(kernstat_sources::cgroup::target(p).context("--cgroup")?),
        None => None,
    };
    Ok((
        Config {
            pid: args.pid,
            ms: args.milliseconds,
            key,
            cgroup,
            force_raw_tp: args.raw_tp,
            offcpu: args.offcpu,
        },
        split,
    ))
}

/// Runs `kernstat runqlat`; returns the exit status.
pub fn run(args: &RunqlatArgs) -> anyhow::Result<i32> {
    let (cfg, split) = config(args)?;
    let signals = Signals::block();
    let rq = Runqlat::load(&cfg).context("runqlat needs BPF")?;
    let ns_per_unit = if args.milliseconds { 1e6 } else { 1e3 };
    eprintln!(
        "Tracing {} ({})... Hit Ctrl-C to end.",
        if args.offcpu {
            "off-CPU time"
        } else {
            "run queue latency"
        },
        rq.attach_kind().as_str()
    );
    let roots = Roots::default();
    let mut out = io::stdout().lock();
    if args.csv {
        let short = if args.milliseconds { "ms" } else { "us" };
        writeln!(out, "{}", csv_header(short))?;
    }
    let keyed = cfg.key != KeyKind::None;
    // Everything since attach counts: the maps were empty at load, so the first interval
    // starts from zero, as libbpf-tools' does. A baseline read here, after the banner,
    // dropped the events of a workload started on seeing it whenever this process was
    // slow to get here (under CPU load: 40-97 of a ping-pong's 20,000 wake-ups in 1 run
    // of 2 beside `stress-ng --cpu 2`, while the kernel's histogram held them all).
    let mut intervals = Intervals::new(Vec::new(), keyed, args.cumulative);
    let start = Instant::now();
    let mut points: Vec<Point> = Vec::new();
    // The whole run's distribution, for the plot.
    let mut dist = Hist::default();
    let mut ticker = Ticker::new(&signals, args.interval.map(Duration::from_secs), args.count);
    loop {
        let tick = ticker.wait();
        let cpus = rq.read_per_cpu()?;
        let keyed_now = if keyed { rq.read_keyed()? } else { Vec::new() };
        let iv = intervals.next(cpus, keyed_now, rq.take_max_ns()?);
        rq.forget_keys(&iv.forget);
        let parts: Vec<Part<'_>> = match split {
            Split::None => Vec::new(),
            Split::Cpu => iv
                .cpus
                .iter()
                .enumerate()
                .filter(|(_, h)| h.count() > 0)
                .map(|(cpu, hist)| Part {
                    key: cpu as u64,
                    comm: None,
                    hist,
                })
                .collect(),
            _ => iv
                .keyed
                .iter()
                .map(|(k, hist)| Part {
                    key: u64::from(*k),
                    comm: matches!(split, Split::Pid | Split::Tid).then(|| comm_of(&roots, *k)),
                    hist,
                })
                .collect(),
        };
        let report = RunqlatReport {
            timestamp: epoch_s(),
            clock: args.timestamp.then(clock),
            millis: args.milliseconds,
            attach: rq.attach_kind().as_str(),
            total: &iv.total,
            max: Some(iv.max_ns as f64 / ns_per_unit),
            split,
            parts,
        };
        let summary = report.summary();
        if args.cumulative {
            dist = iv.total.clone();
        } else {
            dist.add(&iv.total);
        }
        points.push(Point {
            t: start.elapsed().as_secs_f64(),
            p50: summary.p50,
            p90: summary.p90,
            p99: summary.p99,
            max: summary.max.unwrap_or(0.0),
        });
        if args.csv {
            writeln!(out, "{}", csv_row(report.timestamp, &summary))?;
        } else if args.json {
            let mut line = Vec::new();
            write_json(&mut line, &report)?;
            line.push(b'\n');
            out.write_all(&line)?;
        } else {
            let mut text = String::new();
            write_text(&mut text, &report);
            out.write_all(text.as_bytes())?;
        }
        out.flush()?;
        if tick.last {
            break;
        }
    }
    let missed = rq.missed();
    let lost = rq.lost().unwrap_or(0);
    if missed + lost > 0 {
        eprintln!(
            "kernstat: {} runs not measured: the kernel skipped {missed} events (a handler \
             was already running on that CPU) and {lost} enqueue times could not be stored \
             (the map refused a nested write)",
            missed + lost
        );
    }
    if let Some(path) = &args.plot {
        let unit = if args.milliseconds { "msecs" } else { "usecs" };
        plot::plot(path, unit, &points, &dist.log2())?;
        eprintln!("kernstat: wrote {}", path.display());
    }
    Ok(0)
}
