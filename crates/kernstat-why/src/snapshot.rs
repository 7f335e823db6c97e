//! What the rules read: a moment's cumulative counters, from a raw sample (live, or a
//! recorded frame turned back into one), small enough for the daemon to keep a window
//! of them.

use kernstat_model::counters::KernelCounters;
use kernstat_model::RawSample;
use serde::{Deserialize, Serialize};

/// One process's counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ProcSnap {
    /// Process id and start (its identity).
    pub pid: u32,
    /// See `pid`.
    pub start: u64,
    /// Command name.
    pub comm: String,
    /// Control group path, when known.
    pub cgroup: Option<String>,
    /// CPU time, ns.
    pub cpu_ns: u64,
    /// Time waited runnable for a CPU, ns.
    pub run_delay_ns: u64,
    /// Storage bytes read and written.
    pub io_bytes: u64,
    /// Resident set, bytes.
    pub rss_bytes: u64,
    /// Bytes sent on its sockets (where per-process network is counted).
    #[serde(default)]
    pub net_tx_bytes: u64,
    /// In uninterruptible sleep now.
    pub blocked: bool,
    /// A kernel thread.
    pub kthread: bool,
}

/// One control group's counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupSnap {
    /// Its path.
    pub path: String,
    /// CPU time, µs.
    pub cpu_us: u64,
    /// Time held back by its cpu.max quota, µs (None: no quota).
    pub throttled_us: Option<u64>,
    /// Its quota, µs per period, and the period.
    pub quota: Option<(u64, u64)>,
    /// Pressure stall totals, µs: cpu, memory, io ("some").
    pub psi_us: [Option<u64>; 3],
}

/// A moment's counters.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// When, ns since the Unix epoch.
    pub unix_ns: u64,
    /// CLOCK_MONOTONIC when read, ns (intervals are its differences).
    pub mono_ns: u64,
    /// Online CPUs.
    pub ncpus: u32,
    /// Busy time of all CPUs, ns.
    pub busy_ns: u64,
    /// Pressure stall totals, µs: cpu some, memory some, memory full, io some, io full.
    pub psi_us: [Option<u64>; 5],
    /// Memory available and total, bytes.
    pub mem_available: u64,
    /// See `mem_available`.
    pub mem_total: u64,
    /// Pages swapped in and out since boot, and the page size.
    pub swap_in_pages: u64,
    /// See `swap_in_pages`.
    pub swap_out_pages: u64,
    /// See `swap_in_pages`.
    pub page_size: u64,
    /// CPU temperature, °C.
    pub temp_c: Option<f32>,
    /// The kernel's counters (reclaim, faults, TCP, disks), where read.
    pub kernel: KernelCounters,
    /// Every process.
    pub procs: Vec<ProcSnap>,
    /// Every control group read.
    pub groups: Vec<GroupSnap>,
}

impl Snapshot {
    /// From a raw sample taken at `unix_ns`; `cgroup_of(pid)` names a process's group
    /// where the caller knows it.
    pub fn of(
        raw: &RawSample,
        unix_ns: u64,
        cgroup_of: &dyn Fn(u32) -> Option<String>,
    ) -> Snapshot {
        let s = &raw.sys;
        let psi = |l: &Option<kernstat_model::PsiLine>| l.map(|l| l.total_us);
        Snapshot {
            unix_ns,
            mono_ns: s.taken_ns,
            ncpus: s.ncpus.max(1),
            busy_ns: s.busy_ns,
            psi_us: [
                psi(&s.psi.cpu_some),
                psi(&s.psi.memory_some),
                psi(&s.psi.memory_full),
                psi(&s.psi.io_some),
                psi(&s.psi.io_full),
            ],
            mem_available: s.mem.available,
            mem_total: s.mem.total,
            swap_in_pages: s.swap_in_pages,
            swap_out_pages: s.swap_out_pages,
            page_size: s.page_size.max(1),
            temp_c: s.hw.temp_c,
            kernel: raw.kernel.clone(),
            procs: raw
                .tasks
                .procs
                .iter()
                .map(|p| ProcSnap {
                    pid: p.pid,
                    start: p.start,
                    comm: p.comm.as_str().to_string(),
                    cgroup: cgroup_of(p.pid),
                    cpu_ns: p.cpu_ns,
                    run_delay_ns: p.run_delay_ns,
                    io_bytes: p.read_bytes + p.write_bytes,
                    rss_bytes: p.rss_bytes,
                    net_tx_bytes: raw
                        .net
                        .get(p.pid, p.start)
                        .or_else(|| raw.net.procs.iter().find(|n| n.pid == p.pid))
                        .map_or(0, |n| n.counters.tx()),
                    blocked: p.state == b'D' || p.has_d_thread,
                    kthread: p.kthread,
                })
                .collect(),
            groups: raw
                .cgroups
                .groups
                .iter()
                .map(|g| GroupSnap {
                    path: g.path.clone(),
                    cpu_us: g.cpu.usage_us,
                    throttled_us: g.cpu.throttled_us,
                    quota: g.cpu.max_us.zip(g.cpu.period_us),
                    psi_us: [
                        g.psi_cpu.some.map(|l| l.total_us),
                        g.psi_memory.some.map(|l| l.total_us),
                        g.psi_io.some.map(|l| l.total_us),
                    ],
                })
                .collect(),
        }
    }

    /// Its groups by path, to pair them with another snapshot's: a lookup per group,
    /// where a scan per group made a pass over 1,000 groups a million comparisons.
    pub fn groups_by_path(&self) -> std::collections::HashMap<&str, &GroupSnap> {
        self.groups.iter().map(|g| (g.path.as_str(), g)).collect()
    }

    /// The reading of the same process in this snapshot (sorted by pid).
    pub fn proc(&self, pid: u32, start: u64) -> Option<&ProcSnap> {
        let i = self.procs.partition_point(|p| p.pid < pid);
        self.procs[i..]
            .iter()
            .take_while(|p| p.pid == pid)
            .find(|p| p.start == start)
    }
}
