//! `kernstat writes`: write-size (or, with --reads, read-size) histograms per process,
//! syscall and file kind, rates, and a small-write verdict with advice.
//!
//! Intervals are differences of the kernel's cumulative counters (nothing is reset, so
//! nothing is lost between a read and a reset); without an interval, one report at
//! Ctrl-C covers the whole run.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use kernstat_bpf::writes::{Config, Family, Writes};
use kernstat_model::writes::{
    judge, slot_hi, slot_lo, FileKind, SizeStats, Syscall, Thresholds, Verdict, SIZE_SLOTS,
};
use serde::Serialize;

use crate::cli::WritesArgs;
use crate::signals::{Signals, Wake};

#[derive(Serialize)]
struct Bucket {
    lo: u64,
    hi: u64,
    count: u64,
}

fn buckets(slots: &[u64; SIZE_SLOTS]) -> Vec<Bucket> {
    let Some(last) = slots.iter().rposition(|&c| c > 0) else {
        return Vec::new();
    };
    (0..=last)
        .map(|i| Bucket {
            lo: slot_lo(i),
            hi: slot_hi(i),
            count: slots[i],
        })
        .collect()
}

#[derive(Serialize)]
struct JsonBy {
    syscall: &'static str,
    kind: FileKind,
    calls: u64,
    errors: u64,
    asked_bytes: u64,
    done_bytes: u64,
    asked: Vec<Bucket>,
    done: Vec<Bucket>,
}

#[derive(Serialize)]
struct JsonProc {
    #[serde(flatten)]
    verdict: Verdict,
    by: Vec<JsonBy>,
}

#[derive(Serialize)]
struct JsonInterval {
    timestamp: f64,
    interval_s: f64,
    family: &'static str,
    attach: &'static str,
    processes: Vec<JsonProc>,
}

fn write_hist(out: &mut String, slots: &[u64; SIZE_SLOTS]) {
    let b = buckets(slots);
    let max = b.iter().map(|b| b.count).max().unwrap_or(0);
    out.push_str("         bytes               : count    distribution\n");
    for x in &b {
        let stars = (x.count * 40).checked_div(max).unwrap_or(0) as usize;
        out.push_str(&format!(
            "    {:>10} -> {:<10} : {:<8} |{:<40}|\n",
            x.lo,
            x.hi,
            x.count,
            "*".repeat(stars)
        ));
    }
}

/// Runs `kernstat writes`; returns the exit status.
pub fn run(args: &WritesArgs) -> anyhow::Result<i32> {
    if args.pid.len() > 8 {
        bail!("-p: at most 8 processes");
    }
    if let Some(c) = &args.comm {
        if c.len() > 15 {
            bail!("-c {c:?}: command names are at most 15 bytes (the kernel's comm)");
        }
    }
    if !(0.0..=1.0).contains(&args.small_share) {
        bail!("--small-share must be between 0 and 1");
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
    let mut prev: BTreeMap<(u32, Syscall, FileKind), SizeStats> = BTreeMap::new();
    let interval = args.interval.map(Duration::from_secs);
    let mut printed = 0u64;
    let mut last = Instant::now();
    loop {
        let stop = match interval {
            Some(d) => {
                let deadline = Instant::now() + d;
                let mut stop = false;
                while Instant::now() < deadline {
                    if signals.wait(deadline - Instant::now()) == Wake::Stop {
                        stop = true;
                        break;
                    }
                }
                stop
            }
            None => loop {
                if signals.wait(Duration::from_secs(3600)) == Wake::Stop {
                    break true;
                }
            },
        };
        let secs = last.elapsed().as_secs_f64();
        last = Instant::now();
        let cur = w.read()?;
        let mut by_pid: BTreeMap<u32, Vec<SizeStats>> = BTreeMap::new();
        for s in &cur {
            let key = (s.pid, s.sys, s.kind);
            let d = match prev.get(&key) {
                Some(p) => s.since(p),
                None => s.clone(),
            };
            if d.calls > 0 {
                by_pid.entry(s.pid).or_default().push(d);
            }
        }
        prev = cur
            .into_iter()
            .map(|s| ((s.pid, s.sys, s.kind), s))
            .collect();
        let mut verdicts: Vec<(Verdict, Vec<SizeStats>)> = by_pid
            .into_values()
            .filter_map(|v| {
                let refs: Vec<&SizeStats> = v.iter().collect();
                judge(&refs, secs, &thresholds, reads).map(|j| (j, v))
            })
            .collect();
        verdicts.sort_by(|a, b| b.0.calls.cmp(&a.0.calls).then(a.0.pid.cmp(&b.0.pid)));
        verdicts.truncate(args.top);

        if args.json {
            let line = JsonInterval {
                timestamp: SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map(|d| d.as_secs_f64())
                    .unwrap_or(0.0),
                interval_s: secs,
                family: if reads { "reads" } else { "writes" },
                attach: w.attach().as_str(),
                processes: verdicts
                    .into_iter()
                    .map(|(v, stats)| JsonProc {
                        verdict: v,
                        by: stats
                            .iter()
                            .map(|s| JsonBy {
                                syscall: s.sys.name(reads),
                                kind: s.kind,
                                calls: s.calls,
                                errors: s.errors,
                                asked_bytes: s.asked_bytes,
                                done_bytes: s.done_bytes,
                                asked: buckets(&s.asked),
                                done: buckets(&s.done),
                            })
                            .collect(),
                    })
                    .collect(),
            };
            serde_json::to_writer(&mut out, &line)?;
            writeln!(out)?;
        } else {
            let mut s = format!(
                "\n{} over {:.1} s ({}):\n{:>8} {:<16} {:>10} {:>10} {:>8} {:>7}  VERDICT\n",
                if reads { "reads" } else { "writes" },
                secs,
                w.attach().as_str(),
                "PID",
                "COMM",
                "CALLS/s",
                "BYTES/s",
                "MEAN",
                "SMALL"
            );
            for (v, stats) in &verdicts {
                let mut rate = String::new();
                let _ = kernstat_render::human::bytes(&mut rate, v.bytes_per_s);
                s.push_str(&format!(
                    "{:>8} {:<16} {:>10.1} {:>9}/s {:>8.0} {:>6.0}%  {}\n",
                    v.pid,
                    v.comm,
                    v.calls_per_s,
                    rate,
                    v.mean_bytes,
                    v.small_share * 100.0,
                    if v.small_writes {
                        if reads {
                            "small reads"
                        } else {
                            "small writes"
                        }
                    } else {
                        "ok"
                    }
                ));
                for st in stats {
                    s.push_str(&format!(
                        "  {} to {:?}: {} calls ({} failed), {} bytes asked, {} moved\n",
                        st.sys.name(reads),
                        st.kind,
                        st.calls,
                        st.errors,
                        st.asked_bytes,
                        st.done_bytes
                    ));
                    write_hist(&mut s, &st.asked);
                }
                if !v.advice.is_empty() {
                    s.push_str(&format!("  advice: {}\n", v.advice));
                }
            }
            out.write_all(s.as_bytes())?;
        }
        out.flush()?;
        printed += 1;
        if stop || args.count.is_some_and(|c| printed >= c) {
            break;
        }
    }
    Ok(0)
}
