//! `kernstat writes`: write-size (or, with --reads, read-size) histograms per process,
//! syscall and file kind, rates, and a small-write verdict with advice.
//!
//! The command only wires parts together: the BPF collector (kernstat-bpf writes),
//! interval differences and verdicts (kernstat-model writes), the reports
//! (kernstat-render writes) and the pacing (interval.rs). Without an interval, one
//! report at Ctrl-C covers the whole run.

use std::io::{self, Write};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use kernstat_bpf::writes::{Config, Family, Writes};
use kernstat_model::writes::{Intervals, Thresholds};
use kernstat_render::writes::{write_json, write_text, WritesReport};

use crate::cli::WritesArgs;
use crate::interval::Ticker;
use crate::signals::Signals;

/// Runs `kernstat writes`; returns the exit status.
pub fn run(args: &WritesArgs) -> anyhow::Result<i32> {
    if args.pid.len() > 8 {
        crate::cli::usage!("-p: at most 8 processes");
    }
    if let Some(pid) = args.pid.iter().find(|&&p| {
        !kernstat_sources::procs::process_exists(&kernstat_sources::Roots::default(), p)
    }) {
        crate::cli::usage!("-p {pid}: no such process");
    }
    if let Some(c) = &args.comm {
        if c.len() > 15 {
            crate::cli::usage!("-c {c:?}: command names are at most 15 bytes (the kernel's comm)");
        }
    }
    if !(0.0..=1.0).contains(&args.small_share) {
        crate::cli::usage!("--small-share must be between 0 and 1");
    }
    let reads = args.reads;
    let cfg = Config {
        pids: args.pid.clone(),
        comm: args.comm.clone(),
        family: if reads { Family::Reads } else { Family::Writes },
        force_tracepoints: args.tracepoints,
    };
    let thresholds = Thresholds {
        small_bytes: args.small_bytes,
        min_rate: args.min_rate,
        small_share: args.small_share,
    };
    let signals = Signals::block();
    let t0 = Instant::now();
    let w = Writes::load(&cfg).context("writes needs BPF")?;
    eprintln!(
        "Tracing {}-family syscalls ({}, attached in {:.1} ms)... Hit Ctrl-C to end.",
        if reads { "read" } else { "write" },
        w.attach().as_str(),
        t0.elapsed().as_secs_f64() * 1e3
    );
    let mut out = io::stdout().lock();
    let mut intervals = Intervals::default();
    let mut ticker = Ticker::new(&signals, args.interval.map(Duration::from_secs), args.count);
    loop {
        let tick = ticker.wait();
        let processes = intervals.next(w.read()?, tick.seconds, &thresholds, reads, args.top);
        let report = WritesReport {
            timestamp: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs_f64())
                .unwrap_or(0.0),
            interval_s: tick.seconds,
            reads,
            attach: w.attach().as_str(),
            processes: &processes,
        };
        if args.json {
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
    Ok(0)
}
