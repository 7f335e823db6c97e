//! When context providers are read: on the first request for a context (provider,
//! directory, environment), again when inotify reports a change to one of the files it
//! looked at (or a directory on the way to one appearing or vanishing), when its reading
//! says it expires (sudo), and on a slow poll as a fallback; forgotten when nobody asked
//! for a while (with its watches); backed off when it fails. Like git's schedule, reads
//! run off the server's threads and results go into the cache and wake watchers — only
//! when the answer changed.
//!
//! One inotify watcher per user served: a directory is watched once however many of
//! that user's contexts look into it (inotify instances are few: 128 per user by
//! default). Watches are added and removed on blocking threads in the user's job slots
//! (an `inotify_add_watch` on a hung FUSE mount hangs; it must stall only that user's
//! watcher), reads run as jobs too, a request waits for its read a bounded time, and a
//! user keeps at most `MAX_PER_USER` contexts (the least recently asked go first).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;

use super::{values, Client, Ctx, Env, Provider, Reading};
use crate::cache::Entry;
use crate::client_files::Rights;
use crate::hub::{Event, Hub};

/// Contexts one user keeps at once.
pub const MAX_PER_USER: usize = 64;
/// How long a request waits for its context to be read.
const READ_WAIT: Duration = Duration::from_secs(2);

/// Re-read a context this often even without file events (a change inotify cannot see:
/// a file on NFS, a watch limit reached).
pub const POLL: Duration = Duration::from_secs(30);

/// Where a context's answer lives: the provider and its scope id.
type ScopeKey = (&'static str, Arc<str>);

struct Scope {
    provider: &'static Provider,
    path: Option<PathBuf>,
    env: Env,
    client: Option<Client>,
    rights: Rights,
    /// Whose slots and watcher it uses.
    uid: u32,
    /// Files the last reading looked at, and the directories watched for them.
    watched: Vec<PathBuf>,
    dirs: Vec<PathBuf>,
    /// Keys published for it (dynamic fields come and go).
    keys: Vec<String>,
    /// The whole object last published, to tell a change.
    last: Option<Vec<u8>>,
    failures: u32,
    next_read: Instant,
    last_asked: Instant,
    /// A read in flight, and who waits for it.
    reading: Option<Arc<tokio::sync::Notify>>,
    /// A file it read changed and it was not read since: a request reads it first (a
    /// prompt drawn right after `kubectl config use-context` must show the new one).
    dirty: bool,
}

#[derive(Default)]
struct Watches {
    watcher: Option<notify::RecommendedWatcher>,
    dirs: HashMap<PathBuf, usize>,
}

/// The contexts the daemon keeps, and their schedule.
pub struct Contexts {
    /// Shared with the inotify callbacks, which mark contexts dirty the moment an
    /// event arrives (not after the background loop's coalescing pause).
    scopes: Arc<Mutex<HashMap<ScopeKey, Scope>>>,
    /// Each user's watcher (locked only on blocking threads).
    watches: Mutex<HashMap<u32, Arc<Mutex<Watches>>>>,
    changed: mpsc::UnboundedSender<PathBuf>,
    changes: Mutex<Option<mpsc::UnboundedReceiver<PathBuf>>>,
}

impl Default for Contexts {
    fn default() -> Self {
        let (changed, changes) = mpsc::unbounded_channel();
        Contexts {
            scopes: Arc::new(Mutex::new(HashMap::new())),
            watches: Mutex::new(HashMap::new()),
            changed,
            changes: Mutex::new(Some(changes)),
        }
    }
}

/// The directories to watch so that a change to `file` (or its appearance) is seen:
/// the nearest existing ancestor, and a watched directory itself (changes inside it).
fn dirs_for(file: &Path, out: &mut Vec<PathBuf>) {
    if file.is_dir() {
        out.push(file.to_path_buf());
    }
    let mut dir = file.parent();
    while let Some(d) = dir {
        if d.is_dir() {
            out.push(d.to_path_buf());
            return;
        }
        dir = d.parent();
    }
}

/// Whether an event on `changed` concerns a context that looked at `watched`.
fn concerns(watched: &[PathBuf], changed: &Path) -> bool {
    watched
        .iter()
        .any(|w| w.starts_with(changed) || changed.parent() == Some(w.as_path()))
}

type Scopes = Arc<Mutex<HashMap<ScopeKey, Scope>>>;

fn mark_dirty(scopes: &Scopes, paths: &[PathBuf]) {
    if let Ok(mut g) = scopes.lock() {
        for s in g.values_mut() {
            if paths.iter().any(|p| concerns(&s.watched, p)) {
                s.dirty = true;
            }
        }
    }
}

impl Watches {
    fn add(&mut self, dir: &Path, tx: &mpsc::UnboundedSender<PathBuf>, scopes: &Scopes) {
        if let Some(n) = self.dirs.get_mut(dir) {
            *n += 1;
            return;
        }
        if self.watcher.is_none() {
            let tx = tx.clone();
            let scopes = scopes.clone();
            self.watcher =
                notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
                    if let Ok(ev) = res {
                        mark_dirty(&scopes, &ev.paths);
                        for p in ev.paths {
                            let _ = tx.send(p);
                        }
                    }
                })
                .ok();
        }
        if let Some(w) = self.watcher.as_mut() {
            if w.watch(dir, RecursiveMode::NonRecursive).is_ok() {
                self.dirs.insert(dir.to_path_buf(), 1);
            }
        }
    }

    fn remove(&mut self, dir: &Path) {
        if let Some(n) = self.dirs.get_mut(dir) {
            *n -= 1;
            if *n == 0 {
                self.dirs.remove(dir);
                if let Some(w) = self.watcher.as_mut() {
                    let _ = w.unwatch(dir);
                }
            }
        }
    }
}

impl Contexts {
    /// Contexts kept now.
    pub fn len(&self) -> usize {
        self.scopes.lock().map(|s| s.len()).unwrap_or(0)
    }

    /// None kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Directories watched now (by every user's watcher; a watcher busy adding one is
    /// not waited for).
    pub fn watched_dirs(&self) -> usize {
        let all: Vec<Arc<Mutex<Watches>>> = self
            .watches
            .lock()
            .map(|g| g.values().cloned().collect())
            .unwrap_or_default();
        all.iter()
            .map(|w| w.try_lock().map(|w| w.dirs.len()).unwrap_or(0))
            .sum()
    }

    /// Contexts kept now for `uid`.
    pub fn len_for(&self, uid: u32) -> usize {
        self.scopes
            .lock()
            .map(|g| g.values().filter(|s| s.uid == uid).count())
            .unwrap_or(0)
    }

    fn watches_of(&self, uid: u32) -> Arc<Mutex<Watches>> {
        let mut g = self.watches.lock().unwrap_or_else(|e| e.into_inner());
        g.entry(uid).or_default().clone()
    }

    /// The cached entry of `key` in this context, reading the provider first when the
    /// context is new. `scope` is [`super::scope_id`]'s.
    #[allow(clippy::too_many_arguments)]
    pub async fn get(
        self: &Arc<Self>,
        h: &Arc<Hub>,
        p: &'static Provider,
        key: &str,
        scope: &str,
        path: Option<&str>,
        env: &Env,
        client: Option<&Client>,
        rights: &Rights,
    ) -> Option<Arc<Entry>> {
        let (known, dirty) = {
            let mut g = self.scopes.lock().ok()?;
            match g.get_mut(&(p.name, Arc::from(scope))) {
                Some(s) => {
                    s.last_asked = Instant::now();
                    (true, s.dirty)
                }
                None => (false, false),
            }
        };
        // A per-client answer (sudo's credentials) is read afresh every time: a file
        // of a few hundred bytes, and no window in which `sudo -k` has not been seen yet.
        if dirty || (known && p.per_client) {
            if let Err(why) = self.refresh(h, (p.name, Arc::from(scope)), true).await {
                return h
                    .cache
                    .get(key, Some(scope))
                    .or(Some(Arc::new(Entry::failed(&why))));
            }
        }
        if known {
            if let Some(e) = h.cache.get(key, Some(scope)) {
                return Some(e);
            }
            // Still being read for someone else, or a field this context lacks.
            let unread = self
                .scopes
                .lock()
                .ok()
                .and_then(|g| {
                    g.get(&(p.name, Arc::from(scope)))
                        .map(|s| s.last.is_none() && s.failures == 0)
                })
                .unwrap_or(false);
            if unread {
                if let Err(why) = self.refresh(h, (p.name, Arc::from(scope)), true).await {
                    return Some(Arc::new(Entry::failed(&why)));
                }
            }
            return h.cache.get(key, Some(scope));
        }
        let now = Instant::now();
        let key_of_scope: ScopeKey = (p.name, Arc::from(scope));
        let uid = rights
            .uid()
            .unwrap_or_else(|| rustix::process::geteuid().as_raw());
        let evicted = {
            let Ok(mut g) = self.scopes.lock() else {
                return None;
            };
            // Room for one more of this user's: its least recently asked goes.
            let mut evicted = Vec::new();
            loop {
                let mine: Vec<(&ScopeKey, &Scope)> =
                    g.iter().filter(|(_, s)| s.uid == uid).collect();
                if mine.len() < MAX_PER_USER {
                    break;
                }
                let Some(oldest) = mine
                    .iter()
                    .min_by_key(|(_, s)| s.last_asked)
                    .map(|(k, _)| (*k).clone())
                else {
                    break;
                };
                if let Some(s) = g.remove(&oldest) {
                    evicted.push((oldest, s));
                }
            }
            g.entry(key_of_scope.clone()).or_insert_with(|| Scope {
                provider: p,
                path: path.map(PathBuf::from),
                env: env.clone(),
                client: client.copied(),
                rights: rights.clone(),
                uid,
                watched: Vec::new(),
                dirs: Vec::new(),
                keys: Vec::new(),
                last: None,
                failures: 0,
                next_read: now,
                last_asked: now,
                reading: None,
                dirty: false,
            });
            evicted
        };
        for (k, s) in evicted {
            self.drop_scope(h, &k, s);
        }
        if let Err(why) = self.refresh(h, key_of_scope, true).await {
            return Some(Arc::new(Entry::failed(&why)));
        }
        h.cache.get(key, Some(scope))
    }

    /// Reads the context again (a job in its user's slots) and publishes what
    /// changed; one read at a time per context. With `wait`, waits for it (bounded):
    /// Err says why there is no fresh answer.
    async fn refresh(
        self: &Arc<Self>,
        h: &Arc<Hub>,
        key: ScopeKey,
        wait: bool,
    ) -> Result<(), String> {
        let notify = {
            let Ok(mut g) = self.scopes.lock() else {
                return Ok(());
            };
            let Some(s) = g.get_mut(&key) else {
                return Ok(());
            };
            match &s.reading {
                Some(n) => n.clone(),
                None => {
                    let n = Arc::new(tokio::sync::Notify::new());
                    s.reading = Some(n.clone());
                    s.dirty = false;
                    let (p, path, env, client, rights, uid) = (
                        s.provider,
                        s.path.clone(),
                        s.env.clone(),
                        s.client,
                        s.rights.clone(),
                        s.uid,
                    );
                    let (h2, me, key2, done) = (h.clone(), self.clone(), key.clone(), n.clone());
                    tokio::spawn(async move {
                        let out = h2
                            .jobs
                            .spawn(uid, move || {
                                let reading = (p.read)(&Ctx {
                                    path: path.as_deref(),
                                    env: &env,
                                    client: client.as_ref(),
                                    rights: &rights,
                                });
                                let mut dirs = Vec::new();
                                for w in &reading.watched {
                                    dirs_for(w, &mut dirs);
                                }
                                dirs.sort();
                                dirs.dedup();
                                (reading, dirs)
                            })
                            .await
                            .unwrap_or_else(|| {
                                (
                                    Reading {
                                        error: Some("the provider panicked".into()),
                                        ..Reading::default()
                                    },
                                    Vec::new(),
                                )
                            });
                        me.publish(&h2, &key2, out.0, out.1);
                        done.notify_waiters();
                    });
                    n
                }
            }
        };
        if !wait {
            return Ok(());
        }
        let notified = notify.notified();
        let pending = self
            .scopes
            .lock()
            .map(|g| g.get(&key).is_some_and(|s| s.reading.is_some()))
            .unwrap_or(false);
        if !pending {
            return Ok(());
        }
        tokio::time::timeout(READ_WAIT, notified)
            .await
            .map_err(|_| {
                format!("reading took more than {READ_WAIT:?} (a slow or hung file system?)")
            })
    }

    fn publish(
        self: &Arc<Self>,
        h: &Arc<Hub>,
        key: &ScopeKey,
        reading: Reading,
        dirs: Vec<PathBuf>,
    ) {
        let now = Instant::now();
        let scope: &str = &key.1;
        let mut changed = false;
        let (old_dirs, new_dirs, uid) = {
            let Ok(mut g) = self.scopes.lock() else {
                return;
            };
            let Some(s) = g.get_mut(key) else { return };
            s.reading = None;
            let p = s.provider;
            if let Some(why) = &reading.error {
                // Back off 2 s, 4 s ... up to a minute; every key says why.
                s.failures += 1;
                s.next_read = now + Duration::from_secs(1u64 << s.failures.min(6));
                let failed: Vec<String> = p
                    .fields
                    .iter()
                    .map(|(f, _)| format!("{}.{f}", p.name))
                    .chain([p.name.to_string()])
                    .collect();
                for k in &failed {
                    h.cache.put_failed(k, Some(scope), why);
                }
                // Remembered like a value's keys, so that forgetting the context removes
                // them (they were left behind: 3,400 failing contexts kept 604 MB after
                // they expired, shared/security M6). A dynamic field of an earlier
                // success goes now.
                for old in &s.keys {
                    if !failed.contains(old) {
                        h.cache.remove(old, Some(scope));
                    }
                }
                s.keys = failed;
                s.last = None;
                changed = true;
            } else {
                s.failures = 0;
                let poll = h.settings().interval(p.name).unwrap_or(POLL);
                s.next_read = now + reading.expires.map_or(poll, |e| e.min(poll));
                let vals = values(p, &reading);
                let whole = vals.last().map(|(_, v)| v.clone());
                if whole != s.last {
                    let keys: Vec<String> = vals.iter().map(|(k, _)| k.clone()).collect();
                    for old in &s.keys {
                        if !keys.contains(old) {
                            h.cache.remove(old, Some(scope));
                        }
                    }
                    for (k, v) in vals {
                        h.cache.put(&k, Some(scope), v);
                    }
                    s.keys = keys;
                    s.last = whole;
                    changed = true;
                }
            }
            s.watched = reading.watched;
            (std::mem::replace(&mut s.dirs, dirs.clone()), dirs, s.uid)
        };
        if old_dirs != new_dirs {
            self.rewatch(h, uid, new_dirs, old_dirs);
        }
        if changed {
            h.notify(Event::Path(key.1.clone()));
        }
    }

    /// Adds watches on `add` and removes those on `remove` in `uid`'s watcher, on a
    /// blocking thread in that user's slots (nobody waits for it).
    fn rewatch(self: &Arc<Self>, h: &Arc<Hub>, uid: u32, add: Vec<PathBuf>, remove: Vec<PathBuf>) {
        let watches = self.watches_of(uid);
        let (tx, scopes) = (self.changed.clone(), self.scopes.clone());
        let job = h.jobs.spawn(uid, move || {
            let mut w = watches.lock().unwrap_or_else(|e| e.into_inner());
            for dir in &add {
                w.add(dir, &tx, &scopes);
            }
            for dir in &remove {
                w.remove(dir);
            }
            drop(w);
            // The reading was published before these watches existed: a change made in
            // between raised no event (a file removed right after the first answer was
            // missed until the 30 s poll). Now that they exist, the contexts looking
            // there read once more, as if each new directory had just changed.
            let new: Vec<PathBuf> = add.into_iter().filter(|d| !remove.contains(d)).collect();
            mark_dirty(&scopes, &new);
            for d in new {
                let _ = tx.send(d);
            }
        });
        tokio::spawn(job);
    }

    fn forget(self: &Arc<Self>, h: &Arc<Hub>, key: &ScopeKey) {
        let Some(s) = self.scopes.lock().ok().and_then(|mut g| g.remove(key)) else {
            return;
        };
        self.drop_scope(h, key, s);
    }

    fn drop_scope(self: &Arc<Self>, h: &Arc<Hub>, key: &ScopeKey, s: Scope) {
        for k in &s.keys {
            h.cache.remove(k, Some(&key.1));
        }
        if !s.dirs.is_empty() {
            self.rewatch(h, s.uid, Vec::new(), s.dirs);
        }
    }

    /// Background work: file events (coalesced), expiry and the poll, forgetting idle
    /// contexts. Runs until the runtime stops; a second call returns at once.
    pub async fn run(self: Arc<Self>, h: Arc<Hub>) {
        let Some(mut changes) = self.changes.lock().ok().and_then(|mut c| c.take()) else {
            return;
        };
        let mut tick = tokio::time::interval(Duration::from_secs(1).min(h.timing().poll_every));
        loop {
            tokio::select! {
                Some(first) = changes.recv() => {
                    // (Requests already read afresh: the callback marked the contexts
                    // dirty.) The background read waits for the rest of the burst:
                    // tools write several files per change.
                    let mut paths = vec![first];
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    while let Ok(p) = changes.try_recv() {
                        paths.push(p);
                    }
                    let due: Vec<ScopeKey> = self.scopes.lock().map(|g| {
                        g.iter()
                            .filter(|(_, s)| paths.iter().any(|p| concerns(&s.watched, p)))
                            .map(|(k, _)| k.clone())
                            .collect()
                    }).unwrap_or_default();
                    for k in due {
                        let _ = self.refresh(&h, k, false).await;
                    }
                }
                _ = tick.tick() => self.poll(&h).await,
            }
        }
    }

    async fn poll(self: &Arc<Self>, h: &Arc<Hub>) {
        let now = Instant::now();
        let idle_after = h.timing().idle_after;
        let (idle, due): (Vec<ScopeKey>, Vec<ScopeKey>) = {
            let Ok(g) = self.scopes.lock() else { return };
            let idle = g
                .iter()
                .filter(|(_, s)| now.duration_since(s.last_asked) >= idle_after)
                .map(|(k, _)| k.clone())
                .collect();
            let due = g
                .iter()
                .filter(|(_, s)| {
                    now.duration_since(s.last_asked) < idle_after && s.next_read <= now
                })
                .map(|(k, _)| k.clone())
                .collect();
            (idle, due)
        };
        let forgot = !idle.is_empty();
        for k in idle {
            self.forget(h, &k);
        }
        if forgot {
            crate::memory::trim();
        }
        for k in due {
            let _ = self.refresh(h, k, false).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_concern_what_was_looked_at() {
        let w = vec![
            PathBuf::from("/h/.kube/config"),
            PathBuf::from("/h/p/.venv"),
        ];
        assert!(concerns(&w, Path::new("/h/.kube/config")));
        assert!(
            concerns(&w, Path::new("/h/.kube")),
            "the directory appearing"
        );
        assert!(
            concerns(&w, Path::new("/h/p/.venv/pyvenv.cfg")),
            "inside a watched directory"
        );
        assert!(!concerns(&w, Path::new("/h/.zsh_history")));
        assert!(!concerns(&w, Path::new("/h/.kube/cache")));
    }
}
