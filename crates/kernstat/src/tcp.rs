//! `kernstat tcp`: TCP retransmits per process, per control group and per peer, and
//! connect latency (a histogram, and per process), live, every interval; `--json`: one
//! object per interval. The collector is kernstat-bpf's tcp (tracepoints only); sockets
//! whose owner no hook saw (accepted ones) are found by their inode in /proc.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::time::Duration;

use anyhow::Context;
use kernstat_bpf::tcp::Tcp;
use kernstat_model::hist::Hist;
use kernstat_model::tcp::by_process_and_peer;
use kernstat_render::hist::write_log2;

use crate::cli::TcpArgs;
use crate::interval::Ticker;
use crate::signals::Signals;

/// Runs `kernstat tcp`; returns the exit status.
pub fn run(args: &TcpArgs) -> anyhow::Result<i32> {
    let signals = Signals::block();
    let tcp = Tcp::load().context("kernstat tcp needs BPF")?;
    eprintln!("Tracing TCP retransmits and connects... Hit Ctrl-C to end.");
    let mut out = io::stdout().lock();
    let mut groups = None;
    let mut hist_before = Hist::default();
    let mut ticker = Ticker::new(
        &signals,
        Some(Duration::from_secs(args.interval.unwrap_or(1))),
        args.count,
    );
    loop {
        let tick = ticker.wait();
        let mut sockets = tcp.take_retransmits()?;
        kernstat_collect::tcp_owners::attribute(&mut sockets, &mut groups);
        let hist_now = tcp.connect_hist()?;
        let hist = hist_now.since(&hist_before);
        hist_before = hist_now;
        let connects = tcp.connects()?;
        let (procs, peers) = by_process_and_peer(&sockets, args.top);
        let mut per_group: BTreeMap<String, u64> = BTreeMap::new();
        for s in &sockets {
            *per_group.entry(s.cgroup.clone()).or_default() += s.count;
        }
        if args.json {
            let v = serde_json::json!({
                "timestamp": kernstat_os::interval::epoch_s(),
                "retransmits": sockets.iter().map(|s| s.count).sum::<u64>(),
                "processes": procs.iter().map(|(pid, comm, n)| serde_json::json!({"pid": pid, "comm": comm, "retransmits": n})).collect::<Vec<_>>(),
                "groups": per_group.iter().map(|(g, n)| serde_json::json!({"cgroup": g, "retransmits": n})).collect::<Vec<_>>(),
                "peers": peers,
                "sockets": sockets,
                "connect_latency": {
                    "count": hist.count(),
                    "p50_us": hist.percentile(0.50),
                    "p99_us": hist.percentile(0.99),
                    "buckets": hist.log2(),
                },
                "connects": connects,
            });
            writeln!(out, "{v}")?;
        } else {
            let mut t = String::new();
            t.push_str(&format!(
                "{} retransmits\n",
                sockets.iter().map(|s| s.count).sum::<u64>()
            ));
            for (pid, comm, n) in &procs {
                t.push_str(&format!("  {n:>8}  {pid:>7} {comm}\n"));
            }
            for p in &peers {
                t.push_str(&format!("  {:>8}  to {}\n", p.count, p.remote));
            }
            if hist.count() > 0 {
                t.push_str(&format!("{} connects:\n", hist.count()));
                write_log2(&mut t, "usecs", &hist.log2());
            }
            out.write_all(t.as_bytes())?;
        }
        out.flush()?;
        if tick.last {
            break;
        }
    }
    Ok(0)
}
