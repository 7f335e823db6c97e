//! The kernel histograms and notable events a frame carries (run-queue latency, write
//! sizes, disk latency, retransmits; OOM kills and the like).

use serde::{Deserialize, Serialize};

/// Kernel histograms, cumulative since the recorder started (a difference of two frames
/// is their interval's).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Hists {
    /// Run-queue latency of every CPU, per slot of kernstat's log2 histogram (µs).
    pub runqlat_us: Option<Vec<u64>>,
    /// Write sizes per system call and kind of file.
    pub writes: Vec<WriteSizes>,
    /// Block I/O latency per device and operation, µs slots.
    pub biolat: Vec<DiskLatency>,
    /// TCP connect latency, µs slots.
    pub connect_us: Option<Vec<u64>>,
}

/// Write sizes of one system call on one kind of file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct WriteSizes {
    /// "write", "pwrite64" ...
    pub syscall: String,
    /// "file", "pipe", "socket" ...
    pub kind: String,
    /// Calls per log2 size slot.
    pub slots: Vec<u64>,
    /// Bytes asked for.
    pub bytes: u64,
}

/// Block I/O latency of one device and operation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DiskLatency {
    /// Device name.
    pub disk: String,
    /// "read", "write", "flush", "discard".
    pub op: String,
    /// Requests per log2 µs slot.
    pub slots: Vec<u64>,
    /// Bytes.
    pub bytes: u64,
    /// Requests that completed with an error.
    pub errors: u64,
}

/// TCP segments one process retransmitted to one peer since the frame before.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Retransmit {
    /// The process (0: not found), and its command name.
    pub pid: u32,
    /// See `pid`.
    pub comm: String,
    /// The socket's control group path.
    pub cgroup: String,
    /// The peer's address and port.
    pub peer: String,
    /// Segments.
    pub count: u64,
}

/// A notable kernel event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Event {
    /// The OOM killer killed a process.
    OomKill {
        /// When, ns since the Unix epoch.
        time_unix_ns: u64,
        /// The victim.
        pid: u32,
        /// Its command name.
        comm: String,
        /// Its uid.
        uid: u32,
        /// Its resident memory at the kill, bytes.
        rss_bytes: Option<u64>,
        /// Its oom_score_adj.
        oom_score_adj: Option<i32>,
        /// Its memory control group.
        group: String,
        /// The group whose limit fired, or "system".
        limit: String,
        /// The task that invoked the killer, and its command name.
        killer_pid: u32,
        /// See `killer_pid`.
        killer_comm: String,
        /// The biggest growers in the limit's group over the minute before: (pid,
        /// command, growth in bytes).
        growers: Vec<(u32, String, i64)>,
    },
}

impl Event {
    /// From the model's event.
    pub fn of(e: &kernstat_model::events::Event) -> Event {
        match e {
            kernstat_model::events::Event::OomKill(k) => Event::OomKill {
                time_unix_ns: k.time_unix_ns,
                pid: k.pid,
                comm: k.comm.clone(),
                uid: k.uid,
                rss_bytes: k.rss_bytes,
                oom_score_adj: k.oom_score_adj,
                group: k.group.clone(),
                limit: k.limit.clone(),
                killer_pid: k.killer_pid,
                killer_comm: k.killer_comm.clone(),
                growers: k.growers.clone(),
            },
        }
    }

    /// As the model's event.
    pub fn to_model(&self) -> kernstat_model::events::Event {
        match self {
            Event::OomKill {
                time_unix_ns,
                pid,
                comm,
                uid,
                rss_bytes,
                oom_score_adj,
                group,
                limit,
                killer_pid,
                killer_comm,
                growers,
            } => kernstat_model::events::Event::OomKill(kernstat_model::events::OomKill {
                time_unix_ns: *time_unix_ns,
                pid: *pid,
                comm: comm.clone(),
                uid: *uid,
                rss_bytes: *rss_bytes,
                oom_score_adj: *oom_score_adj,
                group: group.clone(),
                limit: limit.clone(),
                killer_pid: *killer_pid,
                killer_comm: killer_comm.clone(),
                growers: growers.clone(),
            }),
        }
    }
}
