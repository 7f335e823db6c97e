//! Network: bytes per process (what the net collector counts at every send and receive)
//! and per link (the kernel's interface counters), as raw cumulative counters, and the
//! rates people read — pure functions, no I/O.
//!
//! Per-process counters are kept by the kernel side per (pid, start time), so a reused
//! pid is another process; they outlive the process until the collector has read them
//! after its exit, so a process that sent 1 MB and exited between two samples still
//! counts, in the interval it did it. Where no collector runs (no BPF, a kernel without
//! the hooks) there are no per-process figures at all: `None`, never zeros.

use serde::{Deserialize, Serialize};

use crate::raw::Comm;
use crate::text::ShortStr;
use crate::top::{Top, TopEntry};

/// The socket kinds counted apart, in the order of the counters' arrays.
pub const KINDS: [&str; 4] = ["tcp", "udp", "unix", "other"];

/// Who the bytes are counted for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Attribution {
    /// The process that made the send or receive (the kernel's socket-layer hooks).
    #[default]
    Caller,
}

impl Attribution {
    /// "caller".
    pub fn as_str(self) -> &'static str {
        match self {
            Attribution::Caller => "caller",
        }
    }
}

/// Cumulative payload bytes and calls of one process, per socket kind (index: [`KINDS`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct NetCounters {
    /// Bytes received.
    pub rx_bytes: [u64; 4],
    /// Bytes sent.
    pub tx_bytes: [u64; 4],
    /// Receives that moved bytes.
    pub rx_calls: [u64; 4],
    /// Sends that moved bytes.
    pub tx_calls: [u64; 4],
}

impl NetCounters {
    /// Bytes received, all kinds.
    pub fn rx(&self) -> u64 {
        self.rx_bytes.iter().sum()
    }

    /// Bytes sent, all kinds.
    pub fn tx(&self) -> u64 {
        self.tx_bytes.iter().sum()
    }

    /// What accrued since `before` (each counter; a counter that went back counts 0).
    pub fn since(&self, before: &NetCounters) -> NetCounters {
        let d = |a: [u64; 4], b: [u64; 4]| std::array::from_fn(|i| a[i].saturating_sub(b[i]));
        NetCounters {
            rx_bytes: d(self.rx_bytes, before.rx_bytes),
            tx_bytes: d(self.tx_bytes, before.tx_bytes),
            rx_calls: d(self.rx_calls, before.rx_calls),
            tx_calls: d(self.tx_calls, before.tx_calls),
        }
    }
}

/// One process's counters as the collector read them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NetProcSample {
    /// Process id.
    pub pid: u32,
    /// Its start time (ns since boot): with `pid`, one process.
    pub start_ns: u64,
    /// Its command name when it first used a socket.
    pub comm: Comm,
    /// Its owner when it first used a socket (0 where not known, as in a replay).
    pub uid: u32,
    /// Cumulative counters.
    pub counters: NetCounters,
}

/// The counters of one user's processes that had no entry of their own in the
/// collector's table (the user held its share of it, or the table was full): counted
/// together, so that the machine's totals stay whole.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CrowdedUser {
    /// The user; [`UNKNOWN_UID`] for sends counted where even the per-user table was full.
    pub uid: u32,
    /// Cumulative counters.
    pub counters: NetCounters,
}

/// See [`CrowdedUser::uid`].
pub const UNKNOWN_UID: u32 = u32::MAX;

/// One network interface's counters (/proc/net/dev), cumulative since it came up.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LinkSample {
    /// Interface name.
    pub name: ShortStr<16>,
    /// It carries the default route (the first such, by metric).
    pub is_default: bool,
    /// Bytes received.
    pub rx_bytes: u64,
    /// Packets received.
    pub rx_packets: u64,
    /// Receive errors.
    pub rx_errors: u64,
    /// Packets dropped on receive.
    pub rx_dropped: u64,
    /// Bytes sent.
    pub tx_bytes: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Transmit errors.
    pub tx_errors: u64,
    /// Packets dropped on transmit.
    pub tx_dropped: u64,
}

/// Everything network a sample holds.
#[derive(Clone, Debug, Default)]
pub struct NetSample {
    /// Whose bytes the per-process counters are; None: no per-process counting here.
    pub attribution: Option<Attribution>,
    /// Per process, sorted by (pid, start_ns).
    pub procs: Vec<NetProcSample>,
    /// Per user, for processes without an entry of their own, sorted by uid.
    pub crowded: Vec<CrowdedUser>,
    /// Sends and receives not counted per process (counted in `crowded` instead),
    /// since the collector started.
    pub lost: u64,
    /// Every interface, the default route's first.
    pub links: Vec<LinkSample>,
}

impl NetSample {
    /// Empties it, keeping capacity.
    pub fn clear(&mut self) {
        self.attribution = None;
        self.procs.clear();
        self.crowded.clear();
        self.lost = 0;
        self.links.clear();
    }

    /// The counters of process (pid, start_ns), if it used a socket.
    pub fn get(&self, pid: u32, start_ns: u64) -> Option<&NetProcSample> {
        self.procs
            .binary_search_by_key(&(pid, start_ns), |p| (p.pid, p.start_ns))
            .ok()
            .map(|i| &self.procs[i])
    }
}

/// One interface over an interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LinkRate {
    /// Interface name.
    pub name: ShortStr<16>,
    /// It carries the default route.
    pub is_default: bool,
    /// Bytes received per second.
    pub rx_bps: f64,
    /// Bytes sent per second.
    pub tx_bps: f64,
    /// Packets received per second.
    pub rx_pps: f64,
    /// Packets sent per second.
    pub tx_pps: f64,
    /// Cumulative counters, as the kernel keeps them.
    pub rx_bytes: u64,
    /// See `rx_bytes`.
    pub tx_bytes: u64,
    /// Packets received since the interface came up.
    pub rx_packets: u64,
    /// Packets sent.
    pub tx_packets: u64,
    /// Receive errors since the interface came up.
    pub rx_errors: u64,
    /// Transmit errors.
    pub tx_errors: u64,
    /// Packets dropped on receive.
    pub rx_dropped: u64,
    /// Packets dropped on transmit.
    pub tx_dropped: u64,
}

/// One socket kind over an interval, all processes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct KindRate {
    /// Bytes received per second.
    pub rx_bps: f64,
    /// Bytes sent per second.
    pub tx_bps: f64,
}

/// Per-process network over an interval, all processes together.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NetModel {
    /// Whose bytes these are: "caller".
    pub attribution: Attribution,
    /// Payload bytes received per second by every process (including those that exited
    /// during the interval).
    pub rx_bps: f64,
    /// Payload bytes sent per second.
    pub tx_bps: f64,
    /// The same by socket kind: tcp, udp, unix, other.
    pub tcp: KindRate,
    /// UDP.
    pub udp: KindRate,
    /// Unix-domain sockets.
    pub unix: KindRate,
    /// Anything else (netlink, packet, vsock ...).
    pub other: KindRate,
    /// Bytes of processes that exited during the interval (received, sent).
    pub exited_rx_bytes: u64,
    /// See `exited_rx_bytes`.
    pub exited_tx_bytes: u64,
    /// The busiest processes (value: received + sent bytes/s; extra: sent bytes/s).
    pub top: Top<{ crate::top::TOP_N }>,
    /// Sends and receives not counted per process since the collector started (its
    /// table was full, or their user held its share of it).
    pub lost: u64,
    /// Payload bytes per second received by processes counted per user, not per
    /// process (see [`CrowdedUser`]): in the totals above, not in `top`.
    pub crowded_rx_bps: f64,
    /// Sent, the same.
    pub crowded_tx_bps: f64,
    /// Users whose processes were counted so in the interval.
    pub crowded_users: u32,
    /// The per-process figures of the interval miss someone (`top` and per-process
    /// columns are incomplete; the totals are not).
    pub incomplete: bool,
}

/// What one process did over the interval: (received, sent) bytes per second.
pub fn proc_rates(cur: &NetCounters, before: Option<&NetCounters>, dt: f64) -> (f64, f64) {
    let d = before.map_or(*cur, |b| cur.since(b));
    if dt <= 0.0 {
        return (0.0, 0.0);
    }
    (d.rx() as f64 / dt, d.tx() as f64 / dt)
}

/// Per-process network over the interval from `prev` to `cur`, or None without a
/// collector. `alive(pid, start_ns)` says whether the process is in the task table
/// (the others exited during the interval). `include(pid, start_ns)` filters the top
/// list (kernel threads).
pub fn model(
    prev: &NetSample,
    cur: &NetSample,
    dt: f64,
    alive: impl Fn(u32, u64) -> bool,
) -> Option<NetModel> {
    let attribution = cur.attribution?;
    let mut m = NetModel {
        attribution,
        lost: cur.lost,
        ..NetModel::default()
    };
    let mut kinds = [KindRate::default(); 4];
    for p in &cur.procs {
        let before = prev.get(p.pid, p.start_ns).map(|b| &b.counters);
        let d = before.map_or(p.counters, |b| p.counters.since(b));
        for (k, kind) in kinds.iter_mut().enumerate() {
            kind.rx_bps += d.rx_bytes[k] as f64;
            kind.tx_bps += d.tx_bytes[k] as f64;
        }
        if !alive(p.pid, p.start_ns) {
            m.exited_rx_bytes += d.rx();
            m.exited_tx_bytes += d.tx();
        }
        let (rx, tx) = proc_rates(&p.counters, before, dt);
        if rx + tx > 0.0 {
            m.top.offer(TopEntry {
                pid: p.pid,
                comm: p.comm,
                value: rx + tx,
                extra: tx,
            });
        }
    }
    // Not after a sample without the collector's reading (a failed read): the users'
    // cumulative counts would show as one interval's.
    let crowded: &[CrowdedUser] = if prev.attribution.is_some() {
        &cur.crowded
    } else {
        &[]
    };
    for c in crowded {
        let before = prev.crowded.iter().find(|b| b.uid == c.uid);
        let d = before.map_or(c.counters, |b| c.counters.since(&b.counters));
        for (k, kind) in kinds.iter_mut().enumerate() {
            kind.rx_bps += d.rx_bytes[k] as f64;
            kind.tx_bps += d.tx_bytes[k] as f64;
        }
        m.crowded_rx_bps += d.rx() as f64;
        m.crowded_tx_bps += d.tx() as f64;
        if d.rx() + d.tx() > 0 {
            m.crowded_users += 1;
        }
    }
    m.incomplete = cur.lost > prev.lost || m.crowded_users > 0;
    if dt > 0.0 {
        for k in kinds.iter_mut() {
            k.rx_bps /= dt;
            k.tx_bps /= dt;
        }
        m.crowded_rx_bps /= dt;
        m.crowded_tx_bps /= dt;
    } else {
        kinds = [KindRate::default(); 4];
        (m.crowded_rx_bps, m.crowded_tx_bps) = (0.0, 0.0);
    }
    [m.tcp, m.udp, m.unix, m.other] = kinds;
    m.rx_bps = kinds.iter().map(|k| k.rx_bps).sum();
    m.tx_bps = kinds.iter().map(|k| k.tx_bps).sum();
    Some(m)
}

/// Every interface over the interval, the default route's first, into `out` (cleared).
pub fn link_rates(prev: &[LinkSample], cur: &[LinkSample], dt: f64, out: &mut Vec<LinkRate>) {
    out.clear();
    for l in cur {
        let before = prev.iter().find(|p| p.name == l.name);
        let per_s = |now: u64, then: Option<u64>| -> f64 {
            match then {
                Some(t) if dt > 0.0 => now.saturating_sub(t) as f64 / dt,
                _ => 0.0,
            }
        };
        out.push(LinkRate {
            name: l.name,
            is_default: l.is_default,
            rx_bps: per_s(l.rx_bytes, before.map(|b| b.rx_bytes)),
            tx_bps: per_s(l.tx_bytes, before.map(|b| b.tx_bytes)),
            rx_pps: per_s(l.rx_packets, before.map(|b| b.rx_packets)),
            tx_pps: per_s(l.tx_packets, before.map(|b| b.tx_packets)),
            rx_bytes: l.rx_bytes,
            tx_bytes: l.tx_bytes,
            rx_packets: l.rx_packets,
            tx_packets: l.tx_packets,
            rx_errors: l.rx_errors,
            tx_errors: l.tx_errors,
            rx_dropped: l.rx_dropped,
            tx_dropped: l.tx_dropped,
        });
    }
}

/// The link a bar shows: the default route's, else the busiest that is not loopback.
pub fn main_link(links: &[LinkRate]) -> Option<&LinkRate> {
    links.iter().find(|l| l.is_default).or_else(|| {
        links
            .iter()
            .filter(|l| l.name.as_str() != "lo")
            .max_by(|a, b| (a.rx_bps + a.tx_bps).total_cmp(&(b.rx_bps + b.tx_bps)))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proc(pid: u32, start: u64, rx: u64, tx: u64) -> NetProcSample {
        let mut c = NetCounters::default();
        c.rx_bytes[0] = rx;
        c.tx_bytes[2] = tx;
        NetProcSample {
            pid,
            start_ns: start,
            comm: Comm::from_str_lossy("p"),
            uid: 0,
            counters: c,
        }
    }

    #[test]
    fn a_process_that_exited_in_the_interval_still_counts() {
        let prev = NetSample {
            attribution: Some(Attribution::Caller),
            procs: vec![proc(10, 1, 100, 0), proc(11, 5, 0, 0)],
            ..NetSample::default()
        };
        let cur = NetSample {
            attribution: Some(Attribution::Caller),
            // 10 sent nothing more; 11 (gone now) received 1,000,000 before it exited;
            // 12 is new with 500 sent; 10's pid reused by another start is new too.
            procs: vec![
                proc(10, 1, 100, 0),
                proc(11, 5, 1_000_000, 0),
                proc(12, 9, 0, 500),
            ],
            ..NetSample::default()
        };
        let m = model(&prev, &cur, 2.0, |pid, _| pid != 11).unwrap();
        assert_eq!(m.exited_rx_bytes, 1_000_000);
        assert_eq!(m.rx_bps, 500_000.0);
        assert_eq!(m.tx_bps, 250.0);
        assert_eq!(m.tcp.rx_bps, 500_000.0);
        assert_eq!(m.unix.tx_bps, 250.0);
        assert_eq!(m.top.as_slice()[0].pid, 11);
        assert!(model(&prev, &NetSample::default(), 2.0, |_, _| true).is_none());
        assert!(!m.incomplete);
    }

    /// A user's processes past its share are counted for the user: in the totals,
    /// not in the top list, and the interval says its per-process figures are short.
    #[test]
    fn processes_counted_per_user_stay_in_the_totals() {
        let crowded = |tx: u64| {
            let mut counters = NetCounters::default();
            counters.tx_bytes[1] = tx;
            CrowdedUser {
                uid: 1000,
                counters,
            }
        };
        let prev = NetSample {
            attribution: Some(Attribution::Caller),
            procs: vec![proc(10, 1, 0, 0)],
            crowded: vec![crowded(100)],
            lost: 3,
            ..NetSample::default()
        };
        let cur = NetSample {
            crowded: vec![crowded(2100)],
            lost: 9,
            procs: vec![proc(10, 1, 0, 600)],
            ..prev.clone()
        };
        let m = model(&prev, &cur, 2.0, |_, _| true).unwrap();
        assert_eq!(m.tx_bps, 1300.0);
        assert_eq!(m.udp.tx_bps, 1000.0);
        assert_eq!((m.crowded_tx_bps, m.crowded_users), (1000.0, 1));
        assert!(m.incomplete);
        assert_eq!(m.top.as_slice().len(), 1);
        let quiet = model(&cur, &cur, 2.0, |_, _| true).unwrap();
        assert!(!quiet.incomplete && quiet.crowded_users == 0);
    }

    #[test]
    fn links_rate_and_the_main_one() {
        let l = |name: &str, default: bool, rx: u64| LinkSample {
            name: ShortStr::from_str_lossy(name),
            is_default: default,
            rx_bytes: rx,
            rx_packets: rx / 100,
            ..LinkSample::default()
        };
        let mut out = Vec::new();
        link_rates(
            &[l("lo", false, 0), l("eth0", true, 1000)],
            &[
                l("lo", false, 500),
                l("eth0", true, 3000),
                l("new0", false, 7),
            ],
            2.0,
            &mut out,
        );
        assert_eq!(out[1].rx_bps, 1000.0);
        assert_eq!(out[1].rx_pps, 10.0);
        assert_eq!(out[2].rx_bps, 0.0, "no earlier reading: no rate");
        assert_eq!(main_link(&out).unwrap().name.as_str(), "eth0");
        out[1].is_default = false;
        assert_eq!(
            main_link(&out).unwrap().name.as_str(),
            "eth0",
            "busiest, not lo"
        );
    }
}
