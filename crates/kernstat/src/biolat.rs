//! `kernstat biolat`: block I/O latency histograms with libbpf-tools biolatency's flags
//! (interval and count, -D per disk, -F per request flags, -Q from the request's
//! making, -m milliseconds, -d one disk, -T timestamps) and output, and `--json`: one
//! object per interval with, per disk and operation, its count, bytes, errors,
//! percentiles and buckets. The collector is kernstat-bpf's biolat; names of devices
//! come from sysfs.

use std::io::{self, Write};
use std::time::Duration;

use anyhow::Context;
use kernstat_bpf::biolat::{Biolat, Config};
use kernstat_model::biolat::{flag_names, since, BioOp, DiskOp};
use kernstat_model::hist::Hist;
use kernstat_render::hist::write_log2;

use crate::cli::BiolatArgs;
use crate::interval::Ticker;
use crate::signals::Signals;

/// Runs `kernstat biolat`; returns the exit status.
pub fn run(args: &BiolatArgs) -> anyhow::Result<i32> {
    let disk = match &args.disk {
        Some(name) => match kernstat_sources::block::block_device_numbers(name) {
            Some(d) => Some(d),
            None => crate::cli::usage!("-d {name}: no such block device (see /sys/class/block)"),
        },
        None => None,
    };
    let cfg = Config {
        queued: args.queued,
        per_flags: args.flags,
        pair: args.pair,
        per_cgroup: false,
        disk,
        force_raw_tp: args.raw_tp,
    };
    let signals = Signals::block();
    let bio = Biolat::load(&cfg).context("biolat needs BPF")?;
    eprintln!(
        "Tracing block device I/O ({}{})... Hit Ctrl-C to end.",
        bio.attach_kind().as_str(),
        if args.pair {
            ", issue and completion"
        } else {
            ""
        }
    );
    let mut names = kernstat_sources::block::BlockNames::default();
    let mut name = |ma: u32, mi: u32| names.name(ma, mi);
    let mut before: Vec<DiskOp> = Vec::new();
    let mut unstamped_before = 0;
    let mut out = io::stdout().lock();
    let mut ticker = Ticker::new(&signals, args.interval.map(Duration::from_secs), args.count);
    loop {
        let tick = ticker.wait();
        let now = bio.read(&mut name)?;
        let iv = since(&now, &before);
        before = now;
        let unstamped = bio.unstamped();
        let parts = group(&iv, args.per_disk, args.flags);
        if args.json {
            let v = serde_json::json!({
                "timestamp": crate::runqlat::epoch_s(),
                "unit": if args.milliseconds { "ms" } else { "us" },
                "attach": bio.attach_kind().as_str(),
                "unstamped": unstamped - unstamped_before,
                "disks": parts.iter().map(|p| part_json(p, args.milliseconds)).collect::<Vec<_>>(),
            });
            writeln!(out, "{v}")?;
        } else {
            let mut text = String::new();
            if args.timestamp {
                text.push_str(&format!("{}\n", crate::runqlat::clock()));
            }
            for p in &parts {
                if !p.label.is_empty() {
                    text.push_str(&format!("\n{}\n", p.label));
                }
                let h = if args.milliseconds {
                    to_ms(&p.hist)
                } else {
                    p.hist.clone()
                };
                write_log2(
                    &mut text,
                    if args.milliseconds { "msecs" } else { "usecs" },
                    &h.log2(),
                );
            }
            out.write_all(text.as_bytes())?;
        }
        unstamped_before = unstamped;
        out.flush()?;
        if tick.last {
            break;
        }
    }
    let unstamped = bio.unstamped();
    if unstamped > 0 && !args.pair {
        eprintln!(
            "kernstat: {unstamped} requests not measured: their queue keeps no I/O \
             statistics stamp (--pair measures them from a hook at issue)"
        );
    }
    Ok(0)
}

/// What one histogram of the output covers.
struct Part {
    label: String,
    disk: String,
    op: Option<BioOp>,
    flags: Option<u32>,
    hist: Hist,
    count: u64,
    bytes: u64,
    errors: u64,
}

/// The interval's entries merged as the flags ask: one histogram, per disk (-D), and/or
/// per flags (-F); operations always apart when split.
fn group(iv: &[DiskOp], per_disk: bool, per_flags: bool) -> Vec<Part> {
    let mut parts: Vec<Part> = Vec::new();
    for d in iv {
        let disk = if per_disk {
            d.disk.clone()
        } else {
            String::new()
        };
        let op = (per_disk || per_flags).then_some(d.op);
        let flags = per_flags.then_some(d.flags);
        let label = match (per_disk, per_flags) {
            (true, true) => format!(
                "disk = {}  op = {}  flags = {}",
                d.disk,
                d.op.name(),
                flag_names(d.flags)
            ),
            (true, false) => format!("disk = {}  op = {}", d.disk, d.op.name()),
            (false, true) => format!("op = {}  flags = {}", d.op.name(), flag_names(d.flags)),
            (false, false) => String::new(),
        };
        match parts
            .iter_mut()
            .find(|p| p.disk == disk && p.op == op && p.flags == flags)
        {
            Some(p) => {
                p.hist.add(&d.hist);
                p.count += d.count;
                p.bytes += d.bytes;
                p.errors += d.errors;
            }
            None => parts.push(Part {
                label,
                disk,
                op,
                flags,
                hist: d.hist.clone(),
                count: d.count,
                bytes: d.bytes,
                errors: d.errors,
            }),
        }
    }
    parts.retain(|p| p.count > 0 || p.errors > 0);
    parts
}

fn to_ms(h: &Hist) -> Hist {
    let mut m = Hist::default();
    for (slot, &n) in h.slots.iter().enumerate() {
        if n > 0 {
            let (lo, _) = kernstat_model::hist::slot_bounds(slot);
            let s = kernstat_model::hist::slot_of(lo / 1000);
            m.slots[s] += n;
        }
    }
    m
}

fn part_json(p: &Part, ms: bool) -> serde_json::Value {
    let h = if ms { to_ms(&p.hist) } else { p.hist.clone() };
    let pct = |q: f64| h.percentile(q);
    serde_json::json!({
        "disk": if p.disk.is_empty() { None } else { Some(&p.disk) },
        "op": p.op.map(BioOp::name),
        "flags": p.flags.map(flag_names),
        "count": p.count,
        "bytes": p.bytes,
        "errors": p.errors,
        "p50": pct(50.0),
        "p90": pct(90.0),
        "p99": pct(99.0),
        "buckets": h.log2(),
    })
}
