//! Answers for clients that ask again and again — `kernstat get`, `eval`, `session`,
//! `bar --daemon`, Rust programs: from the daemon's shared-memory snapshot first (once
//! mapped, memory loads and no system call), over one kept socket connection for what
//! the snapshot lacks (a git path or a context nobody asked about yet: the daemon then
//! mirrors it, and the next read comes from memory).
//!
//! A long-lived `Lookup` survives daemon restarts: a lost connection is made again once
//! per fetch, and the mapping is re-checked (same file, daemon alive) at most once a
//! second.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::client::{Query, Reply, Session};
use crate::providers::context::{self, Env};
use crate::shm;

/// How often a kept mapping is checked for being current.
const RECHECK: Duration = Duration::from_secs(1);

/// Shared memory first, then the socket.
#[derive(Debug)]
pub struct Lookup {
    socket: PathBuf,
    snapshot: Option<shm::Reader>,
    checked: Option<Instant>,
    session: Option<Session>,
    timeout: Option<Duration>,
}

/// What a fetch found.
#[derive(Debug, Default)]
pub struct Fetched {
    /// One per query: None where nobody could answer (no daemon).
    pub replies: Vec<Option<Reply>>,
    /// Why the socket could not be asked, when it was needed and could not.
    pub unreachable: Option<String>,
}

impl Lookup {
    /// A lookup against the daemon at `socket` (nothing is opened yet). `timeout`: how
    /// long to wait for the daemon's replies.
    pub fn new(socket: PathBuf, timeout: Option<Duration>) -> Lookup {
        Lookup {
            socket,
            snapshot: None,
            checked: None,
            session: None,
            timeout,
        }
    }

    /// The daemon's socket.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// The snapshot, mapped if it is usable now.
    fn snapshot(&mut self) -> Option<&mut shm::Reader> {
        let due = self.checked.is_none_or(|t| t.elapsed() >= RECHECK);
        if due {
            self.checked = Some(Instant::now());
            if !self.snapshot.as_ref().is_some_and(shm::Reader::is_current) {
                self.snapshot = shm::Reader::beside(&self.socket).ok();
            }
        }
        self.snapshot.as_mut()
    }

    fn connect(&mut self) -> io::Result<&mut Session> {
        if self.session.is_none() {
            let s = Session::connect(&self.socket)?;
            s.set_timeout(self.timeout)?;
            self.session = Some(s);
        }
        Ok(self.session.as_mut().expect("just connected"))
    }

    /// Answers `queries`: each from the snapshot where it has the key, the rest in one
    /// pipelined write over the kept connection (made again once if the daemon went
    /// away). `answered_by` says which. Err: a daemon that answered nonsense.
    pub fn fetch(&mut self, queries: &[Query<'_>]) -> io::Result<Fetched> {
        let mut replies: Vec<Option<Reply>> = vec![None; queries.len()];
        if let Some(snap) = self.snapshot() {
            let interval = snap.interval_ms();
            for (i, q) in queries.iter().enumerate() {
                let Some(stored) = snapshot_key(q).and_then(|k| snap.get(&k)) else {
                    continue;
                };
                let mut r = stored_reply(q.key, stored, interval);
                r.answered_by = Some("shm".into());
                replies[i] = Some(r);
            }
        }
        let missing: Vec<usize> = (0..queries.len())
            .filter(|&i| replies[i].is_none())
            .collect();
        if missing.is_empty() {
            return Ok(Fetched {
                replies,
                unreachable: None,
            });
        }
        let asked: Vec<Query<'_>> = missing.iter().map(|&i| queries[i].clone()).collect();
        let mut unreachable = None;
        for attempt in 0..2 {
            let got = match self.connect() {
                Ok(s) => s.get_many(&asked),
                Err(e) => {
                    unreachable = Some(match e.kind() {
                        io::ErrorKind::PermissionDenied => e.to_string(),
                        _ => format!("no daemon at {} ({e})", self.socket.display()),
                    });
                    break;
                }
            };
            match got {
                Ok(got) => {
                    for (&i, mut r) in missing.iter().zip(got) {
                        r.answered_by = Some("socket".into());
                        replies[i] = Some(r);
                    }
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::InvalidData => return Err(e),
                Err(e) => {
                    // The daemon went away (restarted, or stopped): once more with a
                    // new connection, then say it is unreachable.
                    self.session = None;
                    if attempt == 1 {
                        unreachable = Some(format!("daemon at {}: {e}", self.socket.display()));
                    }
                }
            }
        }
        Ok(Fetched {
            replies,
            unreachable,
        })
    }
}

/// The key a query's value is stored under in the snapshot (None: not kept there,
/// like sudo's, which are answered per asking process).
fn snapshot_key(q: &Query<'_>) -> Option<String> {
    if let Some((p, _)) = context::lookup(q.key) {
        if p.per_client {
            return None;
        }
        let env = Env::Given(q.env.cloned().unwrap_or_default());
        let scope = context::scope_id(p, q.path, &env, None, None);
        return Some(shm::stored_key(q.key, Some(&scope)));
    }
    Some(shm::stored_key(q.key, q.path))
}

/// A reply made from a snapshot's value, aged and judged stale as the daemon would.
fn stored_reply(key: &str, v: shm::Stored, interval_ms: u32) -> Reply {
    if v.error {
        return Reply {
            ok: false,
            code: Some("failed".into()),
            error: Some(format!("{key}: {}", String::from_utf8_lossy(&v.bytes))),
            ..Reply::default()
        };
    }
    let mut r = Reply::from_json(&v.bytes);
    if r.ok {
        let age_ms = shm::now_ns().saturating_sub(v.updated_ns) / 1_000_000;
        r.age_ms = Some(age_ms);
        r.stale = Some(crate::server::is_stale(
            key,
            Duration::from_millis(age_ms),
            Duration::from_millis(u64::from(interval_ms)),
        ));
    }
    r
}

/// The variables of this process that the context providers of `keys` read, as a
/// query's `env`.
pub fn process_env<'a>(keys: impl IntoIterator<Item = &'a str>) -> BTreeMap<String, String> {
    context::env_for(keys)
        .into_iter()
        .filter_map(|v| Some((v.to_string(), std::env::var(v).ok()?)))
        .collect()
}
