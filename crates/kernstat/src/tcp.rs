//! `kernstat tcp`: TCP retransmits per process, per control group and per peer, and
//! connect latency (a histogram, and per process), live, every interval; `--json`: one
//! object per interval. The collector is kernstat-bpf's tcp (tracepoints only); sockets
//! whose owner no hook saw (accepted ones) are found by their inode in /proc.

use std::io::{self, Write};
use std::time::Duration;

use anyhow::Context;
use kernstat_bpf::tcp::Tcp;
use kernstat_model::hist::Hist;
use kernstat_render::tcp::TcpInterval;

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
        let iv = TcpInterval {
            timestamp: kernstat_os::interval::epoch_s(),
            sockets: &sockets,
            hist: &hist,
            connects: &connects,
            top: args.top,
        };
        if args.json {
            writeln!(out, "{}", iv.json())?;
        } else {
            out.write_all(iv.text().as_bytes())?;
        }
        out.flush()?;
        if tick.last {
            break;
        }
    }
    Ok(0)
}
