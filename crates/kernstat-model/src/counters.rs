//! The cheap machine-wide signals an incident starts with, from counters the kernel
//! already keeps (no hook): softirq time by kind, page faults, memory reclaim and OOM
//! kills (/proc/vmstat), TCP segments, retransmits and connects (/proc/net/snmp), and
//! every block device's requests, time busy and queue (/proc/diskstats). Readings are
//! cumulative; [`rates`] turns two into per-second figures.

use serde::{Deserialize, Serialize};

/// Softirq kinds, in /proc/softirqs' order.
pub const SOFTIRQS: [&str; 10] = [
    "hi", "timer", "net_tx", "net_rx", "block", "irq_poll", "tasklet", "sched", "hrtimer", "rcu",
];

/// One block device's /proc/diskstats line, cumulative.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskStat {
    /// Device name.
    pub name: String,
    /// Device numbers.
    pub major: u32,
    /// See `major`.
    pub minor: u32,
    /// Reads and writes completed.
    pub reads: u64,
    /// See `reads`.
    pub writes: u64,
    /// Sectors (512 bytes) read and written.
    pub read_sectors: u64,
    /// See `read_sectors`.
    pub write_sectors: u64,
    /// ms spent reading and writing.
    pub read_ms: u64,
    /// See `read_ms`.
    pub write_ms: u64,
    /// ms with I/O in flight (utilisation).
    pub io_ms: u64,
    /// Weighted ms in queue (queue depth × time).
    pub queue_ms: u64,
    /// Requests in flight now.
    pub in_flight: u64,
}

/// The kernel's counters, cumulative since boot.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelCounters {
    /// Whether they were read (a reader that does not ask for them leaves this false).
    pub read: bool,
    /// How often each kind of softirq ran, summed over CPUs (/proc/softirqs; their time
    /// is in /proc/stat's softirq column, not split by kind).
    pub softirqs: [u64; 10],
    /// /proc/vmstat: page faults, major faults.
    pub pgfault: u64,
    /// See `pgfault`.
    pub pgmajfault: u64,
    /// Pages scanned and reclaimed (kswapd and direct).
    pub pgscan: u64,
    /// See `pgscan`.
    pub pgsteal: u64,
    /// Pages scanned in direct reclaim (tasks stalled reclaiming themselves).
    pub pgscan_direct: u64,
    /// Processes the OOM killer killed.
    pub oom_kill: u64,
    /// /proc/net/snmp Tcp: segments sent, retransmitted, active opens, failed attempts.
    pub tcp_out_segs: u64,
    /// See `tcp_out_segs`.
    pub tcp_retrans_segs: u64,
    /// See `tcp_out_segs`.
    pub tcp_active_opens: u64,
    /// See `tcp_out_segs`.
    pub tcp_attempt_fails: u64,
    /// Block devices (partitions and loop devices without I/O left out).
    pub disks: Vec<DiskStat>,
}

impl CounterRates {
    /// The busiest disk (highest utilisation), if any.
    pub fn busiest_disk(&self) -> Option<&DiskRate> {
        self.disks
            .iter()
            .max_by(|a, b| a.util_percent.total_cmp(&b.util_percent))
    }
}

/// One disk over an interval.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskRate {
    /// Device name.
    pub name: String,
    /// Reads and writes per second.
    pub reads_ps: f64,
    /// See `reads_ps`.
    pub writes_ps: f64,
    /// Bytes read and written per second.
    pub read_bps: f64,
    /// See `read_bps`.
    pub write_bps: f64,
    /// Percent of the interval with I/O in flight (iostat's %util).
    pub util_percent: f64,
    /// Average requests queued or in service (iostat's aqu-sz).
    pub queue_depth: f64,
    /// Average time a request took, ms (iostat's await: read and write).
    pub await_ms: f64,
}

/// The counters over an interval, per second.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CounterRates {
    /// Softirqs run per second, by kind ([`SOFTIRQS`]).
    pub softirqs_ps: [f64; 10],
    /// Page faults and major faults per second.
    pub pgfault_ps: f64,
    /// See `pgfault_ps`.
    pub pgmajfault_ps: f64,
    /// Pages scanned and reclaimed per second.
    pub pgscan_ps: f64,
    /// See `pgscan_ps`.
    pub pgsteal_ps: f64,
    /// Pages scanned in direct reclaim per second.
    pub pgscan_direct_ps: f64,
    /// OOM kills in the interval.
    pub oom_kills: u64,
    /// OOM kills since boot.
    pub oom_kills_total: u64,
    /// TCP segments sent and retransmitted per second.
    pub tcp_out_segs_ps: f64,
    /// See `tcp_out_segs_ps`.
    pub tcp_retrans_ps: f64,
    /// Retransmitted share of segments sent, %.
    pub tcp_retrans_percent: f64,
    /// Connects per second, and those that failed.
    pub tcp_connects_ps: f64,
    /// See `tcp_connects_ps`.
    pub tcp_connect_fails_ps: f64,
    /// Every disk.
    pub disks: Vec<DiskRate>,
}

/// `now` over `dt_s` seconds since `before` (None when either was not read).
pub fn rates(before: &KernelCounters, now: &KernelCounters, dt_s: f64) -> Option<CounterRates> {
    if !before.read || !now.read || dt_s <= 0.0 {
        return None;
    }
    let ps = |a: u64, b: u64| a.saturating_sub(b) as f64 / dt_s;
    let mut r = CounterRates {
        pgfault_ps: ps(now.pgfault, before.pgfault),
        pgmajfault_ps: ps(now.pgmajfault, before.pgmajfault),
        pgscan_ps: ps(now.pgscan, before.pgscan),
        pgsteal_ps: ps(now.pgsteal, before.pgsteal),
        pgscan_direct_ps: ps(now.pgscan_direct, before.pgscan_direct),
        oom_kills: now.oom_kill.saturating_sub(before.oom_kill),
        oom_kills_total: now.oom_kill,
        tcp_out_segs_ps: ps(now.tcp_out_segs, before.tcp_out_segs),
        tcp_retrans_ps: ps(now.tcp_retrans_segs, before.tcp_retrans_segs),
        tcp_connects_ps: ps(now.tcp_active_opens, before.tcp_active_opens),
        tcp_connect_fails_ps: ps(now.tcp_attempt_fails, before.tcp_attempt_fails),
        ..CounterRates::default()
    };
    for (i, s) in r.softirqs_ps.iter_mut().enumerate() {
        *s = ps(now.softirqs[i], before.softirqs[i]);
    }
    if r.tcp_out_segs_ps > 0.0 {
        r.tcp_retrans_percent = r.tcp_retrans_ps / r.tcp_out_segs_ps * 100.0;
    }
    for d in &now.disks {
        let Some(b) = before.disks.iter().find(|b| b.name == d.name) else {
            continue;
        };
        let ios = (d.reads + d.writes).saturating_sub(b.reads + b.writes);
        let ms = (d.read_ms + d.write_ms).saturating_sub(b.read_ms + b.write_ms);
        r.disks.push(DiskRate {
            name: d.name.clone(),
            reads_ps: ps(d.reads, b.reads),
            writes_ps: ps(d.writes, b.writes),
            read_bps: ps(d.read_sectors, b.read_sectors) * 512.0,
            write_bps: ps(d.write_sectors, b.write_sectors) * 512.0,
            util_percent: (ps(d.io_ms, b.io_ms) / 10.0).min(100.0),
            queue_depth: ps(d.queue_ms, b.queue_ms) / 1000.0,
            await_ms: if ios > 0 { ms as f64 / ios as f64 } else { 0.0 },
        });
    }
    Some(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_over_an_interval() {
        let disk = |reads, io_ms, queue_ms, read_ms| DiskStat {
            name: "sda".into(),
            reads,
            read_sectors: reads * 8,
            io_ms,
            queue_ms,
            read_ms,
            ..DiskStat::default()
        };
        let a = KernelCounters {
            read: true,
            tcp_out_segs: 1000,
            tcp_retrans_segs: 10,
            disks: vec![disk(100, 0, 0, 0)],
            ..KernelCounters::default()
        };
        let b = KernelCounters {
            tcp_out_segs: 3000,
            tcp_retrans_segs: 30,
            disks: vec![disk(300, 500, 2000, 400)],
            ..a.clone()
        };
        let r = rates(&a, &b, 2.0).unwrap();
        assert_eq!(r.tcp_retrans_ps, 10.0);
        assert_eq!(r.tcp_retrans_percent, 1.0);
        let d = &r.disks[0];
        assert_eq!((d.reads_ps, d.read_bps), (100.0, 100.0 * 4096.0));
        assert_eq!(
            (d.util_percent, d.queue_depth, d.await_ms),
            (25.0, 1.0, 2.0)
        );
        assert!(rates(&KernelCounters::default(), &b, 2.0).is_none());
    }
}
