//! One complete sample: what every source put together at one instant (the machine's
//! counters, every process, the network, the control groups). The aggregate of the raw
//! parts, kept out of raw.rs so that the parts (which net, cgroup and top use) depend on
//! nothing that depends on them.

use crate::raw::{Source, SystemSample, TaskTable};

/// One complete sample.
#[derive(Clone, Debug, Default)]
pub struct RawSample {
    /// Which mechanism produced the task table and busy time.
    pub source: Source,
    /// Machine-wide values.
    pub sys: SystemSample,
    /// Per-process values.
    pub tasks: TaskTable,
    /// Network: per process (where a collector counts it) and per interface.
    pub net: crate::net::NetSample,
    /// Control groups, where a collector reads them (the daemon, snapshot); empty else.
    pub cgroups: crate::cgroup::CgroupTree,
    /// The kernel's own counters (faults, reclaim, TCP, disks, softirqs), where a
    /// collector reads them (the daemon, the recorder); `read` false else.
    pub kernel: crate::counters::KernelCounters,
    /// TCP retransmits and connects, where a collector loads the hooks.
    pub tcp: crate::tcp::TcpSample,
}
