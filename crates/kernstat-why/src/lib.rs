//! `kernstat why`: what hurt this machine most over a window, and who did it.
//!
//! Every finding has a **score** in one unit, so that resources can be ranked: the
//! fraction of the window that work was stalled on that resource (pressure stall time,
//! throttled time, per second of window; for network, where the kernel keeps no stall
//! time, ten times the retransmitted share of segments sent; an OOM kill scores 1).
//! A finding is **notable** at or above its rule's threshold (docs/why.md lists every
//! rule with its source); on a healthy machine none is. Culprits are who consumed the
//! resource (CPU time, memory growth, I/O bytes, the throttled group, the retransmitting
//! process, an OOM kill's growers); victims are who waited (run delay, groups' pressure,
//! the killed process): they may differ.
//!
//! The same rules run live (two readings a window apart, or the daemon's sliding window)
//! and on a recorded window (two frames and the events between): the inputs are
//! [`Snapshot`]s of cumulative counters, made from a raw sample either way.

mod recorded;
mod rules;
mod snapshot;
pub mod text;

pub use recorded::{recorded, snapshot_of};
pub use rules::{findings, Between, Rule, Thresholds, RULES};
pub use snapshot::{GroupSnap, ProcSnap, Snapshot};

use serde::{Deserialize, Serialize};

/// A resource a finding is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Resource {
    /// Waiting for a CPU.
    Cpu,
    /// Stalled on memory (reclaim, swap-in, refaults).
    Memory,
    /// Stalled on storage.
    Io,
    /// Held back by a cgroup's CPU quota.
    Throttling,
    /// Segments lost and sent again.
    Network,
    /// The OOM killer killed a process.
    Oom,
    /// The CPU is hot (it slows itself down).
    Thermal,
}

impl Resource {
    /// Its name in the output.
    pub fn name(self) -> &'static str {
        match self {
            Resource::Cpu => "cpu",
            Resource::Memory => "memory",
            Resource::Io => "io",
            Resource::Throttling => "throttling",
            Resource::Network => "network",
            Resource::Oom => "oom",
            Resource::Thermal => "thermal",
        }
    }
}

/// A process or group named by a finding, with its share of what the finding counts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Party {
    /// Process id (None: a group).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Command name (a group: empty).
    pub comm: String,
    /// Control group path, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<String>,
    /// Its share: of the resource consumed (culprits), or of the window spent waiting
    /// (victims), 0..1.
    pub share: f64,
}

/// One figure behind a finding.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// What was measured, in words with its value.
    pub what: String,
    /// The threshold it is compared with, when it is the rule's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub threshold: Option<String>,
    /// Where the rule comes from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// One finding.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// What it is about.
    pub resource: Resource,
    /// Fraction of the window stalled (see the crate header).
    pub score: f64,
    /// At or above its rule's threshold: worth an operator's look.
    pub notable: bool,
    /// One line.
    pub verdict: String,
    /// Who consumed the resource.
    pub culprits: Vec<Party>,
    /// Who waited for it.
    pub victims: Vec<Party>,
    /// The figures behind it.
    pub evidence: Vec<Evidence>,
    /// The command that looks deeper.
    pub next: String,
}

/// The window a report covers.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WindowInfo {
    /// Start and end, ns since the Unix epoch.
    pub start_unix_ns: u64,
    /// See `start_unix_ns`.
    pub end_unix_ns: u64,
    /// Its length, s.
    pub seconds: f64,
    /// "live" or "recorded".
    pub source: String,
}

/// Every finding of a window, the highest score first.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    /// The window.
    pub window: WindowInfo,
    /// The findings, ranked.
    pub findings: Vec<Finding>,
}

impl Report {
    /// The first notable finding, if any.
    pub fn top(&self) -> Option<&Finding> {
        self.findings.first().filter(|f| f.notable)
    }
}
