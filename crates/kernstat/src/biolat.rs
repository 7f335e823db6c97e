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
use kernstat_model::biolat::{group, since, DiskOp};
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
                "timestamp": kernstat_os::interval::epoch_s(),
                "unit": if args.milliseconds { "ms" } else { "us" },
                "attach": bio.attach_kind().as_str(),
                "unstamped": unstamped - unstamped_before,
                "disks": parts.iter().map(|p| p.json(args.milliseconds)).collect::<Vec<_>>(),
            });
            writeln!(out, "{v}")?;
        } else {
            let mut text = String::new();
            if args.timestamp {
                text.push_str(&format!("{}\n", kernstat_os::interval::clock()));
            }
            for p in &parts {
                if !p.label.is_empty() {
                    text.push_str(&format!("\n{}\n", p.label));
                }
                let h = if args.milliseconds {
                    p.hist.to_ms()
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
