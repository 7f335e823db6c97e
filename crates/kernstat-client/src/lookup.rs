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

use crate::keys::context::{self, Env};
use crate::keys::git::COUNT_KEYS;
use crate::session::{Query, Reply, Session};
use kernstat_shm as shm;

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

    /// Answers what the snapshot holds, without a socket (None for the rest, and for
    /// all when there is no usable snapshot).
    pub fn from_snapshot(&mut self, queries: &[Query<'_>]) -> Vec<Option<Reply>> {
        let mut replies: Vec<Option<Reply>> = vec![None; queries.len()];
        if let Some(snap) = self.snapshot() {
            let interval = snap.interval_ms();
            // Per path: are the git values in memory still the repository's (the
            // files' and, for a count key, the counts')?
            let mut current: Vec<(&str, Current)> = Vec::new();
            for (i, q) in queries.iter().enumerate() {
                if let (true, Some(path)) = (q.key == "git" || q.key.starts_with("git."), q.path) {
                    let now = match current.iter().find(|(p, _)| *p == path) {
                        Some((_, c)) => *c,
                        None => {
                            let c = git_current(snap, path);
                            current.push((path, c));
                            c
                        }
                    };
                    let counted = q.key == "git" || COUNT_KEYS.contains(&q.key);
                    if !now.files || (counted && !now.counts) {
                        continue;
                    }
                }
                let Some(stored) = snapshot_key(q).and_then(|k| snap.get(&k)) else {
                    continue;
                };
                let mut r = stored_reply(q.key, stored, interval);
                r.answered_by = Some("shm".into());
                replies[i] = Some(r);
            }
        }
        replies
    }

    /// Answers `queries`: each from the snapshot where it has the key, the rest in one
    /// pipelined write over the kept connection (made again once if the daemon went
    /// away). `answered_by` says which. Err: a daemon that answered nonsense.
    pub fn fetch(&mut self, queries: &[Query<'_>]) -> io::Result<Fetched> {
        let mut replies = self.from_snapshot(queries);
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

/// Follows one machine-wide key (load, memory, the bar's `summary`, a `var.`) through
/// the snapshot for `kernstat watch` and `bar --daemon`: each new value once, found by
/// polling the entry's time — a sleep until the next sample is due (at most `POLL_MAX`
/// for values that change between samples), then memory loads — so a follower costs the
/// daemon nothing and makes no socket round trip. Per-directory and context keys are not followed here: the daemon keeps those
/// only while somebody asks or watches over the socket.
#[derive(Debug)]
pub struct Follow {
    lookup: Lookup,
    key: String,
    stored: String,
    last: Option<u64>,
    /// Whether the daemon changes the value only when it samples (system and host keys):
    /// then a follower sleeps until the next sample is due; others (network keys on
    /// netlink events, `var.` puts, script keys) are looked at every `POLL_MAX` too.
    sampled: bool,
}

/// How long after a sample is due a follower looks for it (the daemon publishes within a
/// millisecond of sampling on an idle machine; a busy one may take longer, and then the
/// follower looks again every `POLL_MIN` to `POLL_MAX`).
const DUE_SLACK: Duration = Duration::from_millis(3);
const POLL_MIN: Duration = Duration::from_millis(20);
/// The longest a follower of a value the daemon changes between samples (a netlink event,
/// a `put`) sleeps: such a change shows within this, a status bar's rate. Each look is a
/// nanosleep and a few memory loads (and once a second a stat and a read of
/// /proc/PID/stat); a wake-up costs more than the look (measured: `bar --daemon` looking
/// five times a second used 3.6× the CPU of a socket watch, so sampled keys do not).
const POLL_MAX: Duration = Duration::from_millis(200);

impl Follow {
    /// A follower of `key` in the snapshot beside `socket`, or None when the snapshot is
    /// not usable or does not hold the key (then watch over the socket).
    pub fn new(socket: PathBuf, key: &str) -> Option<Follow> {
        if crate::keys::path_scoped(key) || context::lookup(key).is_some() {
            return None;
        }
        let stored = shm::stored_key(key, None);
        let mut lookup = Lookup::new(socket, None);
        lookup.snapshot()?.get(&stored)?;
        let sampled = crate::keys::system::SYSTEM_KEYS
            .iter()
            .any(|m| m.key == key)
            || crate::keys::host::BASIC_KEYS.iter().any(|(k, _)| *k == key);
        Some(Follow {
            lookup,
            key: key.to_string(),
            stored,
            last: None,
            sampled,
        })
    }

    /// The key followed.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The current value at once, then each newer one as it is published. None: the
    /// snapshot can no longer serve the key (its daemon stopped or was replaced by one
    /// without it; noticed within a second) — fall back to the socket.
    pub fn next_stored(&mut self) -> Option<(shm::Stored, u32)> {
        loop {
            let snap = self.lookup.snapshot()?;
            let interval_ms = snap.interval_ms();
            let updated_ns = snap.updated_ns(&self.stored)?;
            if self.last != Some(updated_ns) {
                let v = snap.get(&self.stored)?;
                self.last = Some(v.updated_ns);
                return Some((v, interval_ms));
            }
            let interval = Duration::from_millis(u64::from(interval_ms));
            let due = updated_ns + interval.as_nanos() as u64 + DUE_SLACK.as_nanos() as u64;
            let now = shm::now_ns();
            let wait = if due > now {
                let until_due = Duration::from_nanos(due - now);
                if self.sampled {
                    until_due
                } else {
                    until_due.min(POLL_MAX)
                }
            } else {
                (interval / 10).clamp(POLL_MIN, POLL_MAX)
            };
            std::thread::sleep(wait);
        }
    }
}

/// Each value as a reply (`answered_by` "shm", with its age and staleness), as
/// `next_stored` finds them; the end means: fall back to the socket.
impl Iterator for Follow {
    type Item = Reply;

    fn next(&mut self) -> Option<Reply> {
        let (v, interval_ms) = self.next_stored()?;
        let mut r = stored_reply(&self.key, v, interval_ms);
        if r.no_data() {
            // A null value (no default route, no battery): a socket watch sends it as a
            // line like any other value, and so does this.
            r = Reply {
                ok: true,
                ..Reply::default()
            };
        }
        r.key = Some(self.key.clone());
        r.answered_by = Some("shm".into());
        Some(r)
    }
}

/// Whether the snapshot's git values for a path are the repository's now.
#[derive(Clone, Copy, Default)]
struct Current {
    /// The values read from the repository's files (branch, commit, stash ...).
    files: bool,
    /// The counts (dirty, staged, ahead ...), computed later than the files are read.
    counts: bool,
}

/// The stamp the daemon took before its read (HEAD, index, the branch's ref,
/// packed-refs, the stash log; or where a `.git` could appear) against the same files'
/// `stat` now — a few microseconds, so that a prompt drawn right after `git checkout` or
/// `git commit` never shows the state before it (it asks the daemon instead, which reads
/// again); the counts are current when the stamp they were computed from is today's.
fn git_current(snap: &mut shm::Reader, path: &str) -> Current {
    #[derive(serde::Deserialize)]
    struct Stamp {
        files: Vec<PathBuf>,
        stamp: Vec<u64>,
        #[serde(default)]
        counts_of: Option<Vec<u64>>,
    }
    use crate::keys::git::{stamp_files, STAMP_KEY};
    let Some(v) = snap.get(&shm::stored_key(STAMP_KEY, Some(path))) else {
        return Current::default();
    };
    match serde_json::from_slice::<Stamp>(&v.bytes) {
        Ok(s) => {
            let now = stamp_files(&s.files);
            Current {
                files: now == s.stamp,
                counts: s.counts_of.as_ref() == Some(&now),
            }
        }
        Err(_) => Current::default(),
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
        r.stale = Some(crate::keys::is_stale(
            key,
            Duration::from_millis(age_ms),
            Duration::from_millis(u64::from(interval_ms)),
        ));
    }
    r
}

/// For per-directory keys: the directory as an absolute path (the daemon has another
/// cwd), `path` or the current directory. None for every other key.
pub fn key_dir(key: &str, path: Option<&Path>) -> io::Result<Option<String>> {
    if !crate::keys::path_scoped(key) {
        return Ok(None);
    }
    let dir = match path {
        Some(p) => p.to_path_buf(),
        None => std::env::current_dir()?,
    };
    let abs = dir
        .canonicalize()
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.display())))?;
    Ok(Some(abs.to_string_lossy().into_owned()))
}

/// The variables of this process that the context providers of `keys` read, as a
/// query's `env`.
pub fn process_env<'a>(keys: impl IntoIterator<Item = &'a str>) -> BTreeMap<String, String> {
    context::env_for(keys)
        .into_iter()
        .filter_map(|v| Some((v.to_string(), std::env::var(v).ok()?)))
        .collect()
}
