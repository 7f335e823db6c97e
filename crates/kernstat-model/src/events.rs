//! Notable kernel events: what `kernstat events` streams and lists, the daemon keeps
//! (its recent list, `oom.last`), Prometheus counts, the recorder records and `top`
//! shows in its header. An OOM kill for now.

use serde::{Deserialize, Serialize};

/// A process the OOM killer killed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct OomKill {
    /// When, ns since the Unix epoch.
    pub time_unix_ns: u64,
    /// The victim.
    pub pid: u32,
    /// Its command name.
    pub comm: String,
    /// Its real uid.
    pub uid: u32,
    /// Its resident set at the kill, bytes (None: the kernel's older tracepoint gave the
    /// pid alone).
    pub rss_bytes: Option<u64>,
    /// Its oom_score_adj.
    pub oom_score_adj: Option<i32>,
    /// Its memory control group (path in the memory controller's hierarchy).
    pub group: String,
    /// The group whose limit fired, or "system" (the machine ran out).
    pub limit: String,
    /// The task whose allocation (or limit change) invoked the killer.
    pub killer_pid: u32,
    /// Its command name.
    pub killer_comm: String,
    /// The biggest memory growers in the limit's group over the minute before:
    /// (pid, command, growth in bytes), largest first.
    pub growers: Vec<(u32, String, i64)>,
}

impl OomKill {
    /// One line for people: "OOM kill: pid 4242 (hog), 1.2G, in /ks-test (limit: /ks-test)".
    pub fn line(&self) -> String {
        let rss = self
            .rss_bytes
            .map(|b| format!(", {:.1} MiB", b as f64 / (1 << 20) as f64))
            .unwrap_or_default();
        // Group paths are names any user with a delegated subtree chooses.
        let group = if self.group.is_empty() {
            String::new()
        } else {
            format!(" in {}", crate::text::printable(&self.group))
        };
        format!(
            "OOM kill: pid {} ({}){rss}{group}; limit: {}",
            self.pid,
            crate::text::printable(&self.comm),
            crate::text::printable(&self.limit)
        )
    }
}

/// A notable event.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Event {
    /// The OOM killer killed a process.
    OomKill(OomKill),
}

impl Event {
    /// When it happened, ns since the Unix epoch.
    pub fn time_unix_ns(&self) -> u64 {
        match self {
            Event::OomKill(k) => k.time_unix_ns,
        }
    }

    /// One line for people.
    pub fn line(&self) -> String {
        match self {
            Event::OomKill(k) => k.line(),
        }
    }
}
