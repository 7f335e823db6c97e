//! TCP retransmits and connect latency (bpf/tcp.bpf.c) as people read them: per socket
//! (its owner, group and peer), summed per process and per remote address; connect
//! latency as a histogram and per process.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::Serialize;

use crate::hist::Hist;

/// Retransmits of one socket since the last reading.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SocketRetrans {
    /// Segments retransmitted.
    pub count: u64,
    /// The owning process (0: unknown), and its command name.
    pub pid: u32,
    /// See `pid`.
    pub comm: String,
    /// The cgroup v2 id the socket was made in (0: unknown), and its path when known.
    pub cgroup_id: u64,
    /// See `cgroup_id`.
    pub cgroup: String,
    /// Local and remote address and port.
    pub local: (IpAddr, u16),
    /// See `local`.
    pub remote: (IpAddr, u16),
    /// The socket's inode (socket:[ino]).
    pub ino: u64,
}

/// Per process: retransmits, and connects.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ProcessTcp {
    /// Process id.
    pub pid: u32,
    /// Command name.
    pub comm: String,
    /// Segments retransmitted (in the interval).
    pub retransmits: u64,
    /// Connects completed and failed (cumulative).
    pub connects: u64,
    /// See `connects`.
    pub failed: u64,
    /// Mean and largest connect latency, ms.
    pub connect_mean_ms: f64,
    /// See `connect_mean_ms`.
    pub connect_max_ms: f64,
}

/// Retransmits summed by remote address.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RemoteRetrans {
    /// The peer.
    pub remote: IpAddr,
    /// Segments retransmitted to it.
    pub count: u64,
}

/// Sums per process (retransmits of sockets whose owner is known) and per peer, the N
/// largest of each, largest first.
pub fn by_process_and_peer(
    sockets: &[SocketRetrans],
    n: usize,
) -> (Vec<(u32, String, u64)>, Vec<RemoteRetrans>) {
    let mut procs: BTreeMap<u32, (String, u64)> = BTreeMap::new();
    let mut peers: BTreeMap<IpAddr, u64> = BTreeMap::new();
    for s in sockets {
        let e = procs.entry(s.pid).or_insert_with(|| (s.comm.clone(), 0));
        e.1 += s.count;
        *peers.entry(s.remote.0).or_default() += s.count;
    }
    let mut p: Vec<(u32, String, u64)> =
        procs.into_iter().map(|(pid, (c, n))| (pid, c, n)).collect();
    p.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
    p.truncate(n);
    let mut r: Vec<RemoteRetrans> = peers
        .into_iter()
        .map(|(remote, count)| RemoteRetrans { remote, count })
        .collect();
    r.sort_by_key(|p| std::cmp::Reverse(p.count));
    r.truncate(n);
    (p, r)
}

/// A histogram of connect latency, µs, and its total.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConnectLatency {
    /// Latency, µs.
    pub hist: Hist,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_per_process_and_peer() {
        let s = |pid, count, ip: &str| SocketRetrans {
            count,
            pid,
            comm: format!("p{pid}"),
            cgroup_id: 0,
            cgroup: String::new(),
            local: ("10.0.0.1".parse().unwrap(), 1),
            remote: (ip.parse().unwrap(), 80),
            ino: 0,
        };
        let (p, r) = by_process_and_peer(
            &[
                s(1, 3, "10.0.0.2"),
                s(2, 5, "10.0.0.2"),
                s(1, 4, "10.0.0.3"),
            ],
            10,
        );
        assert_eq!(p[0], (1, "p1".to_string(), 7));
        assert_eq!(r[0].count, 8);
    }
}

/// What one sample read of TCP (where the collector loads the hooks).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TcpSample {
    /// The hooks are loaded.
    pub present: bool,
    /// Retransmits per socket since the sample before.
    pub retransmits: Vec<SocketRetrans>,
    /// Connect latency since the hooks were loaded, µs.
    pub connect: Hist,
}

/// TCP over an interval.
#[derive(Clone, Debug, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct TcpModel {
    /// Segments retransmitted in the interval (attributed or not).
    pub retransmits: u64,
    /// The processes that retransmitted most: (pid, command, segments).
    pub top: Vec<(u32, String, u64)>,
    /// The peers retransmitted to most: (address, segments).
    pub peers: Vec<(String, u64)>,
    /// Connects completed in the interval, and their latency percentiles, ms.
    pub connects: u64,
    /// See `connects`.
    pub connect_p50_ms: Option<f64>,
    /// See `connects`.
    pub connect_p99_ms: Option<f64>,
}

/// The interval's TCP figures from two samples.
pub fn model(prev: &TcpSample, cur: &TcpSample) -> Option<TcpModel> {
    if !cur.present {
        return None;
    }
    let (top, peers) = by_process_and_peer(&cur.retransmits, 5);
    let h = cur.connect.since(&prev.connect);
    Some(TcpModel {
        retransmits: cur.retransmits.iter().map(|s| s.count).sum(),
        top,
        peers: peers
            .into_iter()
            .map(|p| (p.remote.to_string(), p.count))
            .collect(),
        connects: h.count(),
        connect_p50_ms: h.percentile(0.50).map(|v| v / 1e3),
        connect_p99_ms: h.percentile(0.99).map(|v| v / 1e3),
    })
}
