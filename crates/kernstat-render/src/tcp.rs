//! One interval of `kernstat tcp`: retransmits per process, group, peer and socket,
//! connect latency and connects per process, as a JSON object or as text (the command
//! itself only reads and waits).

use std::collections::BTreeMap;

use kernstat_model::hist::Hist;
use kernstat_model::tcp::{by_process_and_peer, ProcessTcp, SocketRetrans};

use crate::hist::write_log2;

/// One interval: `sockets` retransmitted in it, `hist` its connect latencies (µs),
/// `connects` every process's connects so far; the `top` busiest processes and peers.
pub struct TcpInterval<'a> {
    /// Seconds since the Unix epoch at the interval's end.
    pub timestamp: f64,
    /// Retransmits per socket, owners and groups filled in.
    pub sockets: &'a [SocketRetrans],
    /// Connect latency in the interval, µs.
    pub hist: &'a Hist,
    /// Connects per process, cumulative.
    pub connects: &'a [ProcessTcp],
    /// Processes and peers listed, at most.
    pub top: usize,
}

impl TcpInterval<'_> {
    /// The interval as one JSON object.
    pub fn json(&self) -> serde_json::Value {
        let (procs, peers) = by_process_and_peer(self.sockets, self.top);
        serde_json::json!({
            "timestamp": self.timestamp,
            "retransmits": self.sockets.iter().map(|s| s.count).sum::<u64>(),
            "processes": procs.iter().map(|(pid, comm, n)| serde_json::json!({"pid": pid, "comm": comm, "retransmits": n})).collect::<Vec<_>>(),
            "groups": self.per_group().iter().map(|(g, n)| serde_json::json!({"cgroup": g, "retransmits": n})).collect::<Vec<_>>(),
            "peers": peers,
            "sockets": self.sockets,
            "connect_latency": {
                "count": self.hist.count(),
                "p50_us": self.hist.percentile(0.50),
                "p99_us": self.hist.percentile(0.99),
                "buckets": self.hist.log2(),
            },
            "connects": self.connects,
        })
    }

    /// The interval as text: the retransmits, the busiest processes and peers, and the
    /// connect latency histogram when there were connects.
    pub fn text(&self) -> String {
        let (procs, peers) = by_process_and_peer(self.sockets, self.top);
        let mut t = format!(
            "{} retransmits\n",
            self.sockets.iter().map(|s| s.count).sum::<u64>()
        );
        for (pid, comm, n) in &procs {
            t.push_str(&format!("  {n:>8}  {pid:>7} {comm}\n"));
        }
        for p in &peers {
            t.push_str(&format!("  {:>8}  to {}\n", p.count, p.remote));
        }
        if self.hist.count() > 0 {
            t.push_str(&format!("{} connects:\n", self.hist.count()));
            write_log2(&mut t, "usecs", &self.hist.log2());
        }
        t
    }

    fn per_group(&self) -> BTreeMap<&str, u64> {
        let mut per_group: BTreeMap<&str, u64> = BTreeMap::new();
        for s in self.sockets {
            *per_group.entry(s.cgroup.as_str()).or_default() += s.count;
        }
        per_group
    }
}
