//! When git keys are computed: on first request; again when a request finds the
//! repository changed since (HEAD, index, the branch's ref, packed-refs, the stash
//! log and, in a repository of at most 64 tracked files, those files, compared by
//! `stat`: a prompt drawn right after `git checkout` or an edit shows it); on inotify events from the repository (a user daemon: `watch` streams and
//! the shared-memory snapshot follow changes nobody asked about yet); on a poll timer
//! as a fallback; forgotten when nobody asked for a while; backed off when they fail.
//! The slow counts (ahead/behind, status) are kept fresh only for paths whose counts
//! someone asked for, and rate-limited by their own cost.
//!
//! Each path is read by one job at a time, in its user's slots (`jobs.rs`), so a path on
//! a hung file system delays only the requests for that path. A user keeps at most
//! `MAX_PATHS_PER_USER` paths (the least recently asked is forgotten first). A system
//! daemon reading for another user (`Rights::Of`) keys its answers by that user, sets
//! no inotify watches for them (the stamps keep requests current; inotify instances
//! are the daemon's own to spend) and computes no counts (see `counts.rs`).

use std::collections::HashMap;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use notify::{RecursiveMode, Watcher};
use tokio::sync::{mpsc, Notify};

use super::{count_values, counts, read, values, GitCounts, GitInfo, COUNT_KEYS, GIT_KEYS};
use crate::client_files::{Rights, Walk};
use crate::hub::{Event, Hub};
pub use kernstat_client::keys::git::{stamp_files, STAMP_KEY};

#[path = "schedule_reads.rs"]
mod reads;
use reads::*;

/// Paths one user's git keys are kept for at once.
pub const MAX_PATHS_PER_USER: usize = 128;
/// How long a request waits for its path's files to be read.
const READ_WAIT: Duration = Duration::from_secs(2);
/// How long a request for a count waits for gix.
const COUNT_WAIT: Duration = Duration::from_secs(10);
/// How long a request waits for the stamp check on a file system that may hang.
const STAMP_WAIT: Duration = Duration::from_millis(500);

/// What a stamp check needs, kept open: a repository's git and common directories
/// (and the branch's ref), or, for a directory in no repository, the directory and
/// each above it (where `git init` or a clone would make one appear); and whether they
/// are on a file system that answers `stat` without a server (a local one: checked on
/// the asking thread; a network or FUSE one: in a job, as it may hang).
#[derive(Clone)]
struct Stamping {
    dirs: Dirs,
    local: bool,
    /// The files stamped, by path, in the order of the stamp (published for readers of
    /// the snapshot, who compare the same `stat`s themselves).
    /// Shared: every request clones its path's `Stamping` out of the lock, and with a
    /// work tree stamped this is up to 69 paths (an allocation each if copied).
    files: Arc<Vec<PathBuf>>,
}

#[derive(Clone)]
enum Dirs {
    Repo {
        git: Arc<OwnedFd>,
        common: Arc<OwnedFd>,
        branch_ref: Option<String>,
        /// The work tree's top directory and the entries of it the stamp covers (see
        /// `work_entries`), when the repository is small enough.
        work: Option<(Arc<OwnedFd>, Arc<Vec<String>>)>,
    },
    Outside(Arc<Vec<OwnedFd>>),
}

struct GitPath {
    /// The directory asked about.
    path: String,
    rights: Rights,
    uid: u32,
    _watcher: Option<notify::RecommendedWatcher>,
    failures: u32,
    retry_at: Instant,
    last_asked: Instant,
    /// Someone asked for a count key: only then are the counts kept fresh (they cost
    /// CPU, and gix's code and buffers resident memory).
    wants_counts: bool,
    /// The counts (ahead/behind, status) are being computed.
    counts_busy: bool,
    /// Not before then: a count that took T waits 50 T before the next, so that a
    /// huge repository costs at most ~2 % of a core however often it changes.
    counts_next: Instant,
    /// A read in flight, and who waits for it.
    reading: Option<Arc<Notify>>,
    counting: Option<Arc<Notify>>,
    /// The repository's state when last read.
    stamping: Option<Stamping>,
    stamp: Vec<u64>,
    /// The stamp the counts in the cache started from (the last count that finished),
    /// published with the stamp: a reader of the snapshot takes a count key from it only
    /// when this is the repository's stamp now.
    counts_of: Option<Vec<u64>>,
}

impl GitPath {
    fn new(path: &str, rights: &Rights, uid: u32, now: Instant) -> Self {
        GitPath {
            path: path.to_string(),
            rights: rights.clone(),
            uid,
            _watcher: None,
            failures: 0,
            retry_at: now,
            last_asked: now,
            wants_counts: false,
            counts_busy: false,
            counts_next: now,
            reading: None,
            counting: None,
            stamping: None,
            stamp: Vec::new(),
            counts_of: None,
        }
    }
}

/// What a git refresh does about the slow keys (ahead/behind and status counts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counts {
    /// Start them in the background if they are due.
    Spawn,
    /// Compute them before returning (a client is waiting for one of them), when the
    /// repository moved since they were made.
    Await,
    /// Read everything and compute the counts again now, whatever the stamps say (the
    /// `refresh` op: a client knows the work tree changed).
    Force,
}

impl Counts {
    /// What a request for `key` needs.
    pub fn for_key(key: &str) -> Self {
        if COUNT_KEYS.contains(&key) {
            Counts::Await
        } else {
            Counts::Spawn
        }
    }
}

/// Where a path's keys are cached: the path itself for the daemon's own user (the
/// shared-memory snapshot is looked up by it), the path and uid for another user.
pub fn scope(path: &str, rights: &Rights) -> String {
    match rights.uid() {
        None => path.to_string(),
        Some(uid) => format!("{path}\0uid={uid}"),
    }
}

/// The paths the daemon keeps git keys for, and their schedule.
pub struct GitPaths {
    paths: Mutex<HashMap<String, GitPath>>,
    changed: mpsc::UnboundedSender<String>,
    changes: Mutex<Option<mpsc::UnboundedReceiver<String>>>,
}

impl Default for GitPaths {
    fn default() -> Self {
        let (changed, changes) = mpsc::unbounded_channel();
        GitPaths {
            paths: Mutex::new(HashMap::new()),
            changed,
            changes: Mutex::new(Some(changes)),
        }
    }
}

/// Whether a count request started the computation or joined one already running
/// (which may have read the work tree before the change the request saw).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Joined {
    Started,
    Running,
}

/// Why a request got no fresh answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NotRead(pub String);

fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

impl GitPaths {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, GitPath>> {
        self.paths.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Paths kept now.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// No path is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Paths kept now for `uid`.
    pub fn len_for(&self, uid: u32) -> usize {
        self.lock().values().filter(|p| p.uid == uid).count()
    }

    /// Makes sure the keys of `path` (as `rights` may read them) are as current as the
    /// repository: read on first request or when its stamp moved, the counts too when
    /// `counts` is Await. Waits a bounded time; Err says why the cache may lack them.
    pub async fn ensure(
        self: &Arc<Self>,
        h: &Arc<Hub>,
        path: &str,
        rights: &Rights,
        counts: Counts,
    ) -> Result<(), NotRead> {
        let scope = scope(path, rights);
        let uid = rights.uid().unwrap_or_else(euid);
        let (known, stamping, old_stamp) = {
            let mut g = self.lock();
            match g.get_mut(&scope) {
                Some(p) => {
                    p.last_asked = Instant::now();
                    (true, p.stamping.clone(), p.stamp.clone())
                }
                None => {
                    self.make_room(h, &mut g, uid);
                    g.insert(
                        scope.clone(),
                        GitPath::new(path, rights, uid, Instant::now()),
                    );
                    (false, None, Vec::new())
                }
            }
        };
        let mut observed = None;
        let moved = match (known, stamping) {
            (false, _) => true,
            (true, None) => h.cache.get("git.branch", Some(&scope)).is_none(),
            (true, Some(s)) => {
                let now = if s.local {
                    Some(stamp_of(&s))
                } else {
                    let s2 = s.clone();
                    h.jobs
                        .run(uid, STAMP_WAIT, move || stamp_of(&s2))
                        .await
                        .ok()
                };
                observed = now.clone();
                now.is_some_and(|n| n != old_stamp)
            }
        };
        if moved || counts == Counts::Force {
            self.refresh(h, &scope, Some(READ_WAIT)).await?;
            // A read already under way when this request came (started by the watcher
            // on an earlier change) may have read the files before the change this
            // request saw: then one more, so that the answer is never a command behind.
            let behind = observed
                .is_some_and(|seen| self.lock().get(&scope).is_some_and(|p| p.stamp != seen));
            if behind {
                self.refresh(h, &scope, Some(READ_WAIT)).await?;
            }
        }
        // The counts again only when the repository moved since the counts in the cache
        // were made (`counts_of`: a count that finished, not one that started): `git
        // add` and `git commit` move the index, and an edit moves a tracked file's stamp
        // (in a repository of at most 64 tracked files), so the next prompt's dirty and
        // staged are current; other work-tree changes reach them through the poll.
        let current = |me: &Self| {
            me.lock()
                .get(&scope)
                .is_none_or(|p| p.counts_of.as_ref() == Some(&p.stamp))
        };
        if rights.uid().is_some() {
            return Ok(());
        }
        match counts {
            Counts::Spawn => {}
            Counts::Await => {
                // A count already under way (started in the background after an
                // earlier change, e.g. the watcher's read after `git add`) may have
                // started before the change this request saw (`git commit`): then one
                // more, which starts from now.
                for _ in 0..2 {
                    if current(self) {
                        break;
                    }
                    self.count(h, &scope, true).await?;
                }
            }
            Counts::Force => {
                // The work tree changed (the stamps cannot tell): a count that starts
                // after this request.
                if self.count(h, &scope, true).await? == Joined::Running {
                    self.count(h, &scope, true).await?;
                }
            }
        }
        Ok(())
    }

    /// Forgets `uid`'s least recently asked paths until it has room for one more.
    fn make_room(&self, h: &Hub, g: &mut HashMap<String, GitPath>, uid: u32) {
        loop {
            let mine: Vec<(&String, &GitPath)> = g.iter().filter(|(_, p)| p.uid == uid).collect();
            if mine.len() < MAX_PATHS_PER_USER {
                return;
            }
            let Some(oldest) = mine
                .iter()
                .min_by_key(|(_, p)| p.last_asked)
                .map(|(k, _)| (*k).clone())
            else {
                return;
            };
            g.remove(&oldest);
            h.cache.forget_path(&oldest);
        }
    }

    /// Reads the files of `scope`'s path again (one job at a time per path), starts
    /// watching the repository the first time (the daemon's own user only), and wakes
    /// watchers; the counts follow in the background when they are wanted and due.
    /// With `wait`, waits for the read that much at most.
    async fn refresh(
        self: &Arc<Self>,
        h: &Arc<Hub>,
        scope: &str,
        wait: Option<Duration>,
    ) -> Result<(), NotRead> {
        let notify = {
            let mut g = self.lock();
            let Some(p) = g.get_mut(scope) else {
                return Ok(());
            };
            match &p.reading {
                Some(n) => n.clone(),
                None => {
                    let n = Arc::new(Notify::new());
                    p.reading = Some(n.clone());
                    let job = ReadJob {
                        path: PathBuf::from(&p.path),
                        rights: p.rights.clone(),
                        branch_ref: p.stamping.as_ref().and_then(|s| match &s.dirs {
                            Dirs::Repo { branch_ref, .. } => branch_ref.clone(),
                            Dirs::Outside(_) => None,
                        }),
                        watch: (p.rights.uid().is_none() && p._watcher.is_none())
                            .then(|| (self.changed.clone(), scope.to_string())),
                    };
                    let (h2, me, scope2, uid) = (h.clone(), self.clone(), scope.to_string(), p.uid);
                    let done = n.clone();
                    tokio::spawn(async move {
                        let out = h2.jobs.spawn(uid, move || job.run()).await;
                        me.finish_read(&h2, &scope2, out);
                        done.notify_waiters();
                    });
                    n
                }
            }
        };
        let Some(wait) = wait else { return Ok(()) };
        let notified = notify.notified();
        // The read may have finished between the lock and here.
        if self.lock().get(scope).is_some_and(|p| p.reading.is_none()) {
            return Ok(());
        }
        match tokio::time::timeout(wait, notified).await {
            Ok(()) => Ok(()),
            Err(_) => Err(NotRead(format!(
                "reading the repository took more than {wait:?} (a slow or hung file system?)"
            ))),
        }
    }

    fn finish_read(self: &Arc<Self>, h: &Arc<Hub>, scope: &str, out: Option<ReadOut>) {
        let now = Instant::now();
        let mut count_now = false;
        {
            let mut g = self.lock();
            let Some(p) = g.get_mut(scope) else { return };
            p.reading = None;
            match out.map(|o| (o.info, o.watcher, o.stamping, o.stamp)) {
                Some((Ok(info), watcher, stamping, stamp)) => {
                    for (k, v) in values(&info) {
                        h.cache.put(k, Some(scope), v);
                    }
                    if watcher.is_some() {
                        p._watcher = watcher;
                    }
                    p.stamp = stamp;
                    p.stamping = stamping;
                    publish_stamp(h, scope, p);
                    p.failures = 0;
                    p.retry_at = now;
                    count_now = p.wants_counts && p.counts_next <= now && !p.counts_busy;
                }
                Some((Err(e), _, stamping, stamp)) if e.kind() == std::io::ErrorKind::NotFound => {
                    // Not a repository: every key is null (a prompt asks again and again),
                    // until a `.git` appears in the directory or one above it.
                    for (k, _) in GIT_KEYS {
                        h.cache.put(k, Some(scope), b"null".to_vec());
                    }
                    p.stamping = stamping;
                    p.stamp = stamp;
                    publish_stamp(h, scope, p);
                }
                Some((Err(e), _, _, _)) => {
                    // Failing: back off 2 s, 4 s ... up to a minute; every key says why.
                    for (k, _) in GIT_KEYS {
                        h.cache.put_failed(k, Some(scope), &e.to_string());
                    }
                    p.failures += 1;
                    p.retry_at = now + Duration::from_secs(1u64 << p.failures.min(6));
                }
                None => {
                    p.failures += 1;
                    p.retry_at = now + Duration::from_secs(1u64 << p.failures.min(6));
                }
            }
        }
        h.notify(Event::Path(scope.into()));
        if count_now {
            let (h2, me, scope2) = (h.clone(), self.clone(), scope.to_string());
            tokio::spawn(async move {
                let _ = me.count(&h2, &scope2, false).await;
            });
        }
    }

    /// Computes the counts of `scope`'s path with gix (the daemon's own user only), one
    /// computation at a time per path; with `wait`, waits for it (bounded). Says whether
    /// it started the computation or joined one already running.
    async fn count(
        self: &Arc<Self>,
        h: &Arc<Hub>,
        scope: &str,
        wait: bool,
    ) -> Result<Joined, NotRead> {
        let (notify, joined) = {
            let mut g = self.lock();
            let Some(p) = g.get_mut(scope) else {
                return Ok(Joined::Started);
            };
            if wait {
                p.wants_counts = true;
            }
            if p.rights.uid().is_some() {
                return Ok(Joined::Started);
            }
            match &p.counting {
                Some(n) => (n.clone(), Joined::Running),
                None => {
                    let n = Arc::new(Notify::new());
                    p.counting = Some(n.clone());
                    p.counts_busy = true;
                    let from = p.stamp.clone();
                    let (h2, me, scope2, uid, done) =
                        (h.clone(), self.clone(), scope.to_string(), p.uid, n.clone());
                    let dir = PathBuf::from(&p.path);
                    tokio::spawn(async move {
                        let t0 = Instant::now();
                        let out = h2
                            .jobs
                            .spawn(uid, move || {
                                let info = read(&dir, &Rights::Own).map_err(|e| e.to_string())?;
                                counts(&info)
                            })
                            .await;
                        me.finish_count(&h2, &scope2, out, from, t0.elapsed());
                        done.notify_waiters();
                    });
                    (n, Joined::Started)
                }
            }
        };
        if !wait {
            return Ok(joined);
        }
        let notified = notify.notified();
        if self.lock().get(scope).is_some_and(|p| p.counting.is_none()) {
            return Ok(joined);
        }
        match tokio::time::timeout(COUNT_WAIT, notified).await {
            Ok(()) => Ok(joined),
            Err(_) => Err(NotRead(format!(
                "counting changes took more than {COUNT_WAIT:?}"
            ))),
        }
    }

    fn finish_count(
        &self,
        h: &Arc<Hub>,
        scope: &str,
        out: Option<Result<GitCounts, String>>,
        from: Vec<u64>,
        took: Duration,
    ) {
        match out {
            Some(Ok(c)) => {
                for (k, v) in count_values(&c) {
                    h.cache.put(k, Some(scope), v);
                }
            }
            _ => {
                // The file-only keys stand; the counts say they are unknown.
                for k in COUNT_KEYS {
                    h.cache.put(k, Some(scope), b"null".to_vec());
                }
            }
        }
        if let Some(p) = self.lock().get_mut(scope) {
            p.counting = None;
            p.counts_busy = false;
            p.counts_next = Instant::now() + took * 50;
            p.counts_of = Some(from);
            publish_stamp(h, scope, p);
        }
        h.notify(Event::Path(scope.into()));
    }

    /// Background work: inotify-triggered refreshes (coalesced), the poll timer,
    /// dropping idle paths. Runs until the runtime stops; a second call returns at once.
    pub async fn run(self: Arc<Self>, h: Arc<Hub>) {
        let Some(mut changes) = self.changes.lock().ok().and_then(|mut c| c.take()) else {
            return;
        };
        let mut tick = tokio::time::interval(h.timing().poll_every);
        loop {
            tokio::select! {
                Some(scope) = changes.recv() => {
                    // Coalesce a burst of events (git writes several files per operation).
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let mut scopes = vec![scope];
                    while let Ok(p) = changes.try_recv() {
                        scopes.push(p);
                    }
                    scopes.sort();
                    scopes.dedup();
                    for s in scopes {
                        let _ = self.refresh(&h, &s, None).await;
                    }
                }
                _ = tick.tick() => self.poll(&h).await,
            }
        }
    }

    async fn poll(self: &Arc<Self>, h: &Arc<Hub>) {
        let now = Instant::now();
        let idle_after = h.timing().idle_after;
        let (idle, due): (Vec<String>, Vec<String>) = {
            let g = self.lock();
            let idle = g
                .iter()
                .filter(|(_, p)| now.duration_since(p.last_asked) >= idle_after)
                .map(|(k, _)| k.clone())
                .collect();
            let due = g
                .iter()
                .filter(|(_, p)| now.duration_since(p.last_asked) < idle_after && p.retry_at <= now)
                .map(|(k, _)| k.clone())
                .collect();
            (idle, due)
        };
        if !idle.is_empty() {
            let mut g = self.lock();
            for s in &idle {
                g.remove(s);
                h.cache.forget_path(s);
            }
            drop(g);
            crate::memory::trim();
        }
        for s in due {
            let _ = self.refresh(h, &s, None).await;
        }
    }
}
