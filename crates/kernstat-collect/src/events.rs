//! Notable kernel events with what makes them useful: an OOM kill (kernstat-bpf's oom
//! hook) with the victim's memory group as a path, the group whose limit fired (or
//! "system"), and the biggest memory growers of that group over the minute before (from
//! the resident sets the caller feeds in at each sample).
//!
//! Which limit fired: the kernel counts a limit's OOM on the group that hit it (cgroup v2
//! `memory.events.local` oom; v1 `memory.failcnt`) before it marks the victim, so the
//! nearest group on the way from the victim's up to the root that has a limit and whose
//! counter grew since it was last read (or, read for the first time, is not zero) is the
//! one; none is "system". Read only when a kill happens.

use std::collections::{HashMap, VecDeque};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use kernstat_bpf::oom::{Oom, RawKill};
use kernstat_model::events::{Event, OomKill};

/// How long resident sets are kept for the growers.
const HISTORY_NS: u64 = 65_000_000_000;

/// A process's resident set at a sample: (pid, command name, bytes).
type Resident = (u32, kernstat_model::Comm, u64);

/// Where the memory controller's hierarchy is mounted: v2 (where memory is among its
/// controllers) or v1, and which.
#[derive(Clone, Debug)]
struct MemoryHierarchy {
    root: PathBuf,
    v2: bool,
}

fn memory_hierarchy() -> Option<MemoryHierarchy> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    let mut v2_root = None;
    for line in mounts.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let mount_point = left.split(' ').nth(4)?;
        let mut r = right.split(' ');
        let fstype = r.next()?;
        let options = r.nth(1).unwrap_or("");
        if fstype == "cgroup" && options.split(',').any(|o| o == "memory") {
            return Some(MemoryHierarchy {
                root: PathBuf::from(mount_point),
                v2: false,
            });
        }
        if fstype == "cgroup2" {
            let controllers = Path::new(mount_point).join("cgroup.controllers");
            let has = std::fs::read_to_string(controllers)
                .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"));
            if has {
                v2_root = Some(PathBuf::from(mount_point));
            }
        }
    }
    v2_root.map(|root| MemoryHierarchy { root, v2: true })
}

/// Watches for OOM kills.
pub struct OomWatcher {
    oom: Oom,
    memory: Option<MemoryHierarchy>,
    /// Group directory by kernfs id (its inode), found by walking the hierarchy.
    paths: HashMap<u64, PathBuf>,
    /// Each group's OOM counter when last read.
    counters: HashMap<PathBuf, u64>,
    /// (time, [(pid, comm, rss)]) of recent samples, oldest first (their buffers are
    /// reused: remembering a sample allocates nothing once the history is full).
    history: VecDeque<(u64, Vec<Resident>)>,
    boot_to_unix_ns: i128,
}

impl std::fmt::Debug for OomWatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OomWatcher").finish_non_exhaustive()
    }
}

fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

impl OomWatcher {
    /// Loads the hook (needs BPF).
    pub fn open() -> Result<Self, kernstat_bpf::LoadError> {
        let oom = Oom::load()?;
        let boot = kernstat_sources::boottime_ns() as i128;
        Ok(OomWatcher {
            oom,
            memory: memory_hierarchy(),
            paths: HashMap::new(),
            counters: HashMap::new(),
            history: VecDeque::new(),
            boot_to_unix_ns: unix_now_ns() as i128 - boot,
        })
    }

    /// The hook's ring buffer descriptor (readable when a kill is waiting).
    pub fn ring_fd(&self) -> i32 {
        self.oom.ring_fd()
    }

    /// The attached program (for BPF run-time statistics).
    pub fn programs(&self) -> Vec<(&'static str, std::os::fd::BorrowedFd<'_>)> {
        self.oom.programs()
    }

    /// Keeps the resident sets of a sample (for the growers of a kill).
    pub fn remember(&mut self, procs: impl Iterator<Item = (u32, kernstat_model::Comm, u64)>) {
        let now = unix_now_ns();
        let mut buf = match self.history.front() {
            Some((t, _)) if now.saturating_sub(*t) > HISTORY_NS => {
                self.history.pop_front().map(|(_, v)| v).unwrap_or_default()
            }
            _ => Vec::new(),
        };
        buf.clear();
        buf.extend(procs);
        self.history.push_back((now, buf));
        while self
            .history
            .front()
            .is_some_and(|(t, _)| now.saturating_sub(*t) > HISTORY_NS)
        {
            self.history.pop_front();
        }
    }

    /// The kills since the last call, completed.
    pub fn poll(&mut self) -> Vec<Event> {
        let raw = self.oom.drain().unwrap_or_default();
        raw.into_iter()
            .map(|k| Event::OomKill(self.complete(k)))
            .collect()
    }

    fn complete(&mut self, k: RawKill) -> OomKill {
        let group_dir = k.memcg_id.and_then(|id| self.path_of(id));
        let memory = self.memory.clone();
        let (group, limit) = match (&memory, &group_dir) {
            (Some(m), Some(dir)) => {
                let rel = |d: &Path| {
                    let r = d.strip_prefix(&m.root).unwrap_or(d).display().to_string();
                    if r.is_empty() {
                        "/".to_string()
                    } else {
                        format!("/{r}")
                    }
                };
                let limit = self.limit_of(dir).map_or("system".to_string(), |d| rel(&d));
                (rel(dir), limit)
            }
            _ => (String::new(), "system".to_string()),
        };
        let growers = self.growers(k.pid, &limit);
        let time = (k.boot_ns as i128 + self.boot_to_unix_ns).max(0) as u64;
        OomKill {
            time_unix_ns: time,
            pid: k.pid,
            comm: k.comm,
            uid: k.uid,
            rss_bytes: k.rss_bytes,
            oom_score_adj: k.oom_score_adj,
            group,
            limit,
            killer_pid: k.killer_pid,
            killer_comm: k.killer_comm,
            growers,
        }
    }

    /// The directory of the memory group with kernfs id `id` (its inode).
    fn path_of(&mut self, id: u64) -> Option<PathBuf> {
        if let Some(p) = self.paths.get(&id) {
            return Some(p.clone());
        }
        let root = self.memory.as_ref()?.root.clone();
        // A bounded walk: at most 10,000 directories.
        let mut stack = vec![root];
        let mut seen = 0;
        while let Some(d) = stack.pop() {
            seen += 1;
            if seen > 10_000 {
                break;
            }
            if let Ok(md) = std::fs::symlink_metadata(&d) {
                self.paths.insert(md.ino(), d.clone());
                if md.ino() == id {
                    return Some(d);
                }
            }
            if let Ok(rd) = std::fs::read_dir(&d) {
                for e in rd.flatten() {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        stack.push(e.path());
                    }
                }
            }
        }
        None
    }

    /// The nearest group from `dir` up whose limit fired (see the module header).
    fn limit_of(&mut self, dir: &Path) -> Option<PathBuf> {
        let m = self.memory.clone()?;
        let mut d = dir.to_path_buf();
        loop {
            let read = |f: &str| std::fs::read_to_string(d.join(f)).ok();
            let (limited, counter) = if m.v2 {
                let limited = read("memory.max").is_some_and(|v| v.trim() != "max");
                let oom = read("memory.events.local")
                    .or_else(|| read("memory.events"))
                    .and_then(|e| {
                        e.lines().find_map(|l| {
                            l.strip_prefix("oom ").and_then(|n| n.trim().parse().ok())
                        })
                    })
                    .unwrap_or(0u64);
                (limited, oom)
            } else {
                let limited = read("memory.limit_in_bytes")
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .is_some_and(|v| v < 1 << 60);
                let fails = read("memory.failcnt")
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0u64);
                (limited, fails)
            };
            let before = self.counters.insert(d.clone(), counter);
            let grew = match before {
                Some(b) => counter > b,
                None => counter > 0,
            };
            if limited && grew {
                return Some(d);
            }
            if d == m.root || !d.pop() || !d.starts_with(&m.root) {
                return None;
            }
        }
    }

    /// The biggest growers of resident memory over the kept history, in `limit`'s group
    /// ("system": any), largest first, at most three (the victim among them).
    fn growers(&self, victim: u32, limit: &str) -> Vec<(u32, String, i64)> {
        let (Some(first), Some(last)) = (self.history.front(), self.history.back()) else {
            return Vec::new();
        };
        let then: HashMap<u32, u64> = first.1.iter().map(|(p, _, r)| (*p, *r)).collect();
        let mut g: Vec<(u32, String, i64)> = last
            .1
            .iter()
            .map(|(p, c, r)| {
                (
                    *p,
                    c.as_str().to_string(),
                    *r as i64 - *then.get(p).unwrap_or(&0) as i64,
                )
            })
            .filter(|(_, _, d)| *d > 0)
            .collect();
        g.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
        let in_limit = |pid: u32| {
            limit == "system"
                || pid == victim
                || std::fs::read_to_string(format!("/proc/{pid}/cgroup")).is_ok_and(|c| {
                    c.lines().any(|l| {
                        let path = l.rsplit(':').next().unwrap_or("");
                        (l.contains(":memory:") || l.starts_with("0::"))
                            && (path == limit || path.starts_with(&format!("{limit}/")))
                    })
                })
        };
        g.retain(|(p, _, _)| in_limit(*p));
        g.truncate(3);
        g
    }
}
