//! Control groups (cgroup v2): what one reading of a group's files holds, and the rates
//! over an interval that the views show — pure functions, no I/O.
//!
//! Every figure is the group's own file's, so hierarchical as the kernel keeps it (a
//! parent's CPU includes its children's). A figure the machine cannot give (a hybrid
//! machine's v2 hierarchy has no memory, io or pids controller; a root group has no
//! limits) is `None`, and the group says why in `missing`.

use serde::{Deserialize, Serialize};

use crate::raw::PsiLine;

/// Pressure of one resource: the `some` and `full` lines (cpu's `full` is the kernel's
/// since 5.13 and always zero for the root).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Pressure {
    /// At least one task stalled.
    pub some: Option<PsiLine>,
    /// Every non-idle task stalled.
    pub full: Option<PsiLine>,
}

/// One device's line of io.stat, cumulative.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct IoDevice {
    /// Block device major number.
    pub major: u32,
    /// Block device minor number.
    pub minor: u32,
    /// Bytes read.
    pub rbytes: u64,
    /// Bytes written.
    pub wbytes: u64,
    /// Read operations.
    pub rios: u64,
    /// Write operations.
    pub wios: u64,
}

/// Memory of a group (memory.current, memory.stat, memory.events, the limits).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CgroupMemory {
    /// memory.current, bytes.
    pub current: u64,
    /// memory.peak, bytes (5.19+).
    pub peak: Option<u64>,
    /// memory.stat anon.
    pub anon: Option<u64>,
    /// memory.stat file (page cache).
    pub file: Option<u64>,
    /// memory.stat kernel (5.18+; else kernel_stack + slab + percpu + sock).
    pub kernel: Option<u64>,
    /// memory.stat sock.
    pub sock: Option<u64>,
    /// memory.max; None: "max" (no limit).
    pub max: Option<u64>,
    /// memory.high; None: "max".
    pub high: Option<u64>,
    /// memory.swap.current.
    pub swap: Option<u64>,
    /// memory.events oom: times the group hit its limit and the OOM killer was invoked.
    pub oom: u64,
    /// memory.events oom_kill: processes killed.
    pub oom_kill: u64,
    /// memory.events high: times reclaim was forced by memory.high.
    pub high_events: u64,
}

/// CPU of a group (cpu.stat, cpu.max, cpu.weight).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CgroupCpu {
    /// usage_usec.
    pub usage_us: u64,
    /// user_usec.
    pub user_us: u64,
    /// system_usec.
    pub system_us: u64,
    /// nr_periods (with a cpu.max quota).
    pub periods: Option<u64>,
    /// nr_throttled.
    pub throttled_periods: Option<u64>,
    /// throttled_usec.
    pub throttled_us: Option<u64>,
    /// cpu.max quota µs per period; None: "max".
    pub max_us: Option<u64>,
    /// cpu.max period, µs.
    pub period_us: Option<u64>,
    /// cpu.weight.
    pub weight: Option<u64>,
}

/// One group as read.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CgroupSample {
    /// Path below the hierarchy's root: "/" for the root, "/system.slice/cron.service".
    pub path: String,
    /// Its id (the directory's inode: what BPF's cgroup ids are).
    pub id: u64,
    /// Depth: 0 for the root.
    pub depth: u32,
    /// CLOCK_MONOTONIC when this group's cpu.stat was read, ns (0: unknown, then the
    /// tree's time is used). A walk over hundreds of groups, or a preempted reader,
    /// spreads the groups' reads over milliseconds; each rate uses its own interval.
    pub read_ns: u64,
    /// cpu.stat and the limits.
    pub cpu: CgroupCpu,
    /// None without the memory controller here.
    pub memory: Option<CgroupMemory>,
    /// io.stat per device; None without the io controller here.
    pub io: Option<Vec<IoDevice>>,
    /// pids.current; None without the pids controller.
    pub pids: Option<u64>,
    /// pids.max; None: "max" or no controller.
    pub pids_max: Option<u64>,
    /// cpu.pressure, memory.pressure, io.pressure.
    pub psi_cpu: Pressure,
    /// See `psi_cpu`.
    pub psi_memory: Pressure,
    /// See `psi_cpu`.
    pub psi_io: Pressure,
    /// Figures the group lacks, each with why ("memory: no memory controller in this
    /// cgroup v2 hierarchy (hybrid: it is on cgroup v1)").
    pub missing: Vec<String>,
    /// Child groups not read (past the reader's bounds on groups, or no descriptor
    /// left): their figures are in this group's, which count its whole subtree.
    #[serde(skip_serializing_if = "is_zero")]
    pub truncated: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// A whole reading: every group, parents before children, and when.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CgroupTree {
    /// Where the hierarchy is mounted.
    pub mount: String,
    /// "v2" (cgroup2 alone) or "hybrid" (v1 controllers beside a v2 hierarchy).
    pub layout: String,
    /// CLOCK_MONOTONIC at the reading, ns.
    pub taken_ns: u64,
    /// Every group.
    pub groups: Vec<CgroupSample>,
}

/// Per-process network summed into a group: bytes per second over the interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CgroupNet {
    /// Received by its processes (and its children's).
    pub rx_bps: f64,
    /// Sent.
    pub tx_bps: f64,
}

/// One group over an interval: what the views show.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct CgroupRate {
    /// Path below the hierarchy's root.
    pub path: String,
    /// Its id.
    pub id: u64,
    /// Depth: 0 for the root.
    pub depth: u32,
    /// CPU % of one core over the interval (its processes and its children's).
    pub cpu_percent: f64,
    /// The user part.
    pub user_percent: f64,
    /// The system part.
    pub system_percent: f64,
    /// Share of its cpu.max periods that were throttled in the interval, %.
    pub throttled_percent: Option<f64>,
    /// Time throttled per second of the interval, ms/s.
    pub throttled_ms_per_s: Option<f64>,
    /// Throttled periods in the interval.
    pub throttled_periods: Option<u64>,
    /// cpu.max as a percentage of one core (None: no quota).
    pub cpu_max_percent: Option<f64>,
    /// cpu.weight.
    pub cpu_weight: Option<u64>,
    /// Memory as read at the end of the interval.
    pub memory: Option<CgroupMemory>,
    /// OOM kills in the interval.
    pub oom_kills: Option<u64>,
    /// Storage read per second, all devices.
    pub io_read_bps: Option<f64>,
    /// Storage written per second.
    pub io_write_bps: Option<f64>,
    /// Read operations per second.
    pub io_read_iops: Option<f64>,
    /// Write operations per second.
    pub io_write_iops: Option<f64>,
    /// Per device, cumulative (as read at the end).
    pub io: Option<Vec<IoDevice>>,
    /// pids.current.
    pub pids: Option<u64>,
    /// pids.max.
    pub pids_max: Option<u64>,
    /// Pressure at the end of the interval (the kernel's averages and totals).
    pub psi_cpu: Pressure,
    /// See `psi_cpu`.
    pub psi_memory: Pressure,
    /// See `psi_cpu`.
    pub psi_io: Pressure,
    /// Stall time in the interval per second, % ("some"), for cpu, memory, io: what
    /// the interval itself saw, where avg10 smooths over 10 s.
    pub stall_percent: [Option<f64>; 3],
    /// Its processes' socket bytes (None: not counted here).
    pub net: Option<CgroupNet>,
    /// Figures the group lacks, and why.
    pub missing: Vec<String>,
    /// Child groups not read (past the reader's bounds): their figures are in this
    /// group's.
    #[serde(skip_serializing_if = "is_zero")]
    pub truncated: u32,
    /// The cumulative CPU counters as read at the end (for Prometheus' counters).
    pub cpu: CgroupCpu,
}

fn per_s(now: u64, then: u64, dt: f64) -> f64 {
    if dt > 0.0 {
        now.saturating_sub(then) as f64 / dt
    } else {
        0.0
    }
}

/// The rate of one group between two readings `dt` seconds apart (`before` None: a
/// group that appeared in the interval, counted from zero).
pub fn rate(before: Option<&CgroupSample>, now: &CgroupSample, dt: f64) -> CgroupRate {
    let zero = CgroupSample::default();
    let b = before.unwrap_or(&zero);
    let pct = |n: u64, t: u64| per_s(n, t, dt) / 1e4; // µs/s -> % of one core
    let c = &now.cpu;
    let throttled_percent = match (
        c.periods,
        c.throttled_periods,
        b.cpu.periods,
        b.cpu.throttled_periods,
    ) {
        (Some(p), Some(t), bp, bt) => {
            let dp = p.saturating_sub(bp.unwrap_or(0));
            let dtp = t.saturating_sub(bt.unwrap_or(0));
            Some(if dp == 0 {
                0.0
            } else {
                dtp as f64 / dp as f64 * 100.0
            })
        }
        _ => None,
    };
    let sum_io = |io: &Option<Vec<IoDevice>>, f: fn(&IoDevice) -> u64| -> Option<u64> {
        io.as_ref().map(|v| v.iter().map(f).sum())
    };
    let io_rate = |f: fn(&IoDevice) -> u64| -> Option<f64> {
        let n = sum_io(&now.io, f)?;
        Some(per_s(n, sum_io(&b.io, f).unwrap_or(0), dt))
    };
    let stall = |n: &Pressure, p: &Pressure| -> Option<f64> {
        let n = n.some?.total_us;
        let p = p.some.map_or(0, |l| l.total_us);
        Some(per_s(n, p, dt) / 1e4)
    };
    CgroupRate {
        path: now.path.clone(),
        id: now.id,
        depth: now.depth,
        cpu_percent: pct(c.usage_us, b.cpu.usage_us),
        user_percent: pct(c.user_us, b.cpu.user_us),
        system_percent: pct(c.system_us, b.cpu.system_us),
        throttled_percent,
        throttled_ms_per_s: c
            .throttled_us
            .map(|t| per_s(t, b.cpu.throttled_us.unwrap_or(0), dt) / 1e3),
        throttled_periods: c
            .throttled_periods
            .map(|t| t.saturating_sub(b.cpu.throttled_periods.unwrap_or(0))),
        cpu_max_percent: match (c.max_us, c.period_us) {
            (Some(q), Some(p)) if p > 0 => Some(q as f64 / p as f64 * 100.0),
            _ => None,
        },
        cpu_weight: c.weight,
        memory: now.memory,
        oom_kills: now.memory.map(|m| {
            m.oom_kill
                .saturating_sub(b.memory.map_or(0, |x| x.oom_kill))
        }),
        io_read_bps: io_rate(|d| d.rbytes),
        io_write_bps: io_rate(|d| d.wbytes),
        io_read_iops: io_rate(|d| d.rios),
        io_write_iops: io_rate(|d| d.wios),
        io: now.io.clone(),
        pids: now.pids,
        pids_max: now.pids_max,
        psi_cpu: now.psi_cpu,
        psi_memory: now.psi_memory,
        psi_io: now.psi_io,
        stall_percent: [
            stall(&now.psi_cpu, &b.psi_cpu),
            stall(&now.psi_memory, &b.psi_memory),
            stall(&now.psi_io, &b.psi_io),
        ],
        net: None,
        missing: now.missing.clone(),
        truncated: now.truncated,
        cpu: now.cpu,
    }
}

/// Every group of `now` over the interval from `before` (matched by path and id: a
/// group removed and made again under the same name is a new one).
pub fn rates(before: &CgroupTree, now: &CgroupTree) -> Vec<CgroupRate> {
    let dt = now.taken_ns.saturating_sub(before.taken_ns) as f64 / 1e9;
    let prev: std::collections::HashMap<(&str, u64), &CgroupSample> = before
        .groups
        .iter()
        .map(|g| ((g.path.as_str(), g.id), g))
        .collect();
    now.groups
        .iter()
        .map(|g| {
            let before = prev.get(&(g.path.as_str(), g.id)).copied();
            let own = match before {
                Some(b) if b.read_ns != 0 && g.read_ns > b.read_ns => {
                    (g.read_ns - b.read_ns) as f64 / 1e9
                }
                _ => dt,
            };
            rate(before, g, own)
        })
        .collect()
}

/// A group's path as the user typed it, in the form groups are named here: one leading
/// `/`, no trailing one (`system.slice/` → `/system.slice`, `` → `/`).
pub fn normalize(p: &str) -> String {
    let t = p.trim_end_matches('/');
    if t.is_empty() {
        "/".into()
    } else if t.starts_with('/') {
        t.into()
    } else {
        format!("/{t}")
    }
}

/// Whether `path` is `group` or below it.
pub fn within(path: &str, group: &str) -> bool {
    group == "/"
        || path == group
        || (path.len() > group.len()
            && path.starts_with(group)
            && path.as_bytes()[group.len()] == b'/')
}

/// One group as the BPF cgroup iterator gives it (kernstat-bpf's cgroups module): its
/// place in the tree and its CPU time, the counters cpu.stat shows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CgroupCounters {
    /// The group's id (its directory's inode).
    pub id: u64,
    /// Its parent's id (0 for the walk's root).
    pub parent_id: u64,
    /// Depth in the whole hierarchy.
    pub level: u32,
    /// The directory's name.
    pub name: String,
    /// CPU time of the group and its descendants, ns.
    pub usage_ns: u64,
    /// Of which in user mode (tick-sampled, as the kernel keeps it), ns.
    pub user_ns: u64,
    /// Of which in the kernel, ns.
    pub system_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(path: &str, usage: u64, periods: u64, throttled: u64, rbytes: u64) -> CgroupSample {
        CgroupSample {
            path: path.into(),
            id: 7,
            cpu: CgroupCpu {
                usage_us: usage,
                user_us: usage / 2,
                system_us: usage / 2,
                periods: Some(periods),
                throttled_periods: Some(throttled),
                throttled_us: Some(throttled * 1000),
                max_us: Some(20_000),
                period_us: Some(100_000),
                ..Default::default()
            },
            io: Some(vec![IoDevice {
                major: 8,
                rbytes,
                rios: rbytes / 4096,
                ..Default::default()
            }]),
            psi_memory: Pressure {
                some: Some(PsiLine {
                    total_us: usage / 10,
                    ..Default::default()
                }),
                full: None,
            },
            ..Default::default()
        }
    }

    #[test]
    fn rates_over_an_interval() {
        let a = CgroupTree {
            taken_ns: 1_000_000_000,
            groups: vec![g("/a", 1_000_000, 10, 0, 0)],
            ..Default::default()
        };
        let b = CgroupTree {
            taken_ns: 3_000_000_000,
            groups: vec![
                g("/a", 1_400_000, 30, 15, 8 << 20),
                g("/new", 500_000, 0, 0, 0),
            ],
            ..Default::default()
        };
        let r = rates(&a, &b);
        assert_eq!(r[0].cpu_percent, 20.0, "0.4 s of CPU in 2 s");
        assert_eq!(r[0].user_percent, 10.0);
        assert_eq!(r[0].throttled_percent, Some(75.0), "15 of 20 periods");
        assert_eq!(r[0].throttled_periods, Some(15));
        assert_eq!(r[0].cpu_max_percent, Some(20.0));
        assert_eq!(r[0].io_read_bps, Some(4.0 * 1024.0 * 1024.0));
        assert_eq!(r[0].stall_percent[1], Some(2.0), "40 ms stalled in 2 s");
        assert_eq!(r[0].stall_percent[0], None, "no cpu.pressure read");
        assert_eq!(r[1].cpu_percent, 25.0, "a new group counts from zero");
    }

    #[test]
    fn each_group_uses_its_own_read_times() {
        // The tree was stamped at 1 s and 3 s, but /a's cpu.stat was read at 1.0 s and
        // 3.5 s (a reader preempted mid-walk): 0.5 s of CPU is 20 % of 2.5 s, not 25 %.
        let mut before = g("/a", 1_000_000, 0, 0, 0);
        before.read_ns = 1_000_000_000;
        let mut now = g("/a", 1_500_000, 0, 0, 0);
        now.read_ns = 3_500_000_000;
        let tree = |taken_ns, g| CgroupTree {
            taken_ns,
            groups: vec![g],
            ..Default::default()
        };
        let r = rates(&tree(1_000_000_000, before), &tree(3_000_000_000, now));
        assert_eq!(r[0].cpu_percent, 20.0);
    }

    #[test]
    fn within_is_by_path_component() {
        assert!(within("/a/b", "/a"));
        assert!(within("/a", "/a"));
        assert!(!within("/ab", "/a"));
        assert!(within("/anything", "/"));
    }
}
