//! When git keys are computed: on first request, on inotify events from the repository
//! (coalesced), on a poll timer as a fallback; forgotten when nobody asked for a while;
//! backed off when they fail. The slow counts (ahead/behind, status) are kept fresh only
//! for paths whose counts someone asked for, and rate-limited by their own cost.
//!
//! Everything runs off the server's async threads (`spawn_blocking`); results go into
//! the daemon's cache and wake its watchers.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use notify::{RecursiveMode, Watcher};
use tokio::sync::mpsc;

use super::{count_values, counts, read, values, GitCounts, GitInfo, COUNT_KEYS, GIT_KEYS};
use crate::server::{Daemon, Event};

struct GitPath {
    _watcher: Option<notify::RecommendedWatcher>,
    failures: u32,
    retry_at: Instant,
    /// Someone asked for a count key: only then are the counts kept fresh (they cost
    /// CPU, and gix's code and buffers resident memory).
    wants_counts: bool,
    /// The counts (ahead/behind, status) are being computed.
    counts_busy: bool,
    /// Not before then: a count that took T waits 50 T before the next, so that a
    /// huge repository costs at most ~2 % of a core however often it changes.
    counts_next: Instant,
}

impl GitPath {
    fn new(watcher: Option<notify::RecommendedWatcher>, now: Instant) -> Self {
        GitPath {
            _watcher: watcher,
            failures: 0,
            retry_at: now,
            wants_counts: false,
            counts_busy: false,
            counts_next: now,
        }
    }
}

/// What a git refresh does about the slow keys (ahead/behind and status counts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counts {
    /// Start them in the background if they are due.
    Spawn,
    /// Compute them before returning (a client is waiting for one of them).
    Await,
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

impl GitPaths {
    /// Paths kept now.
    pub fn len(&self) -> usize {
        self.paths.lock().map(|g| g.len()).unwrap_or(0)
    }

    /// No path is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Recomputes the git keys of `path` (off the async threads), starts watching the
    /// repository the first time, and wakes watchers; the counts follow as `counts` says.
    pub async fn refresh(&self, d: &Arc<Daemon>, path: &str, counts: Counts) {
        let p = PathBuf::from(path);
        let result = tokio::task::spawn_blocking(move || read(&p)).await;
        let now = Instant::now();
        let mut count_now = None;
        match result {
            Ok(Ok(info)) => {
                for (k, v) in values(&info) {
                    d.cache.put(k, Some(path), v);
                }
                let mut g = self.paths.lock().expect("git lock");
                let entry = g
                    .entry(path.to_string())
                    .or_insert_with(|| GitPath::new(self.watch_repo(path, &info), now));
                entry.failures = 0;
                entry.retry_at = now;
                if counts == Counts::Await {
                    entry.wants_counts = true;
                }
                let due =
                    counts == Counts::Await || (entry.wants_counts && entry.counts_next <= now);
                if due && !entry.counts_busy {
                    entry.counts_busy = true;
                    count_now = Some(info);
                }
            }
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                // Not a repository: every key is null (a prompt asks again and again).
                for (k, _) in GIT_KEYS {
                    d.cache.put(k, Some(path), b"null".to_vec());
                }
                self.paths
                    .lock()
                    .expect("git lock")
                    .entry(path.to_string())
                    .or_insert_with(|| GitPath::new(None, now));
            }
            _ => {
                // Failing: back off 2 s, 4 s ... up to a minute.
                let mut g = self.paths.lock().expect("git lock");
                let e = g
                    .entry(path.to_string())
                    .or_insert_with(|| GitPath::new(None, now));
                e.failures += 1;
                e.retry_at = now + Duration::from_secs(1u64 << e.failures.min(6));
            }
        }
        d.notify(Event::Path(path.into()));
        if let Some(info) = count_now {
            match counts {
                Counts::Await => refresh_counts(d.clone(), path.to_string(), info).await,
                Counts::Spawn => {
                    tokio::spawn(refresh_counts(d.clone(), path.to_string(), info));
                }
            }
        }
    }

    fn counts_done(&self, path: &str, took: Duration) {
        if let Some(e) = self.paths.lock().expect("git lock").get_mut(path) {
            e.counts_busy = false;
            e.counts_next = Instant::now() + took * 50;
        }
    }

    fn watch_repo(&self, path: &str, info: &GitInfo) -> Option<notify::RecommendedWatcher> {
        let tx = self.changed.clone();
        let key = path.to_string();
        let mut w = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            if res.is_ok() {
                let _ = tx.send(key.clone());
            }
        })
        .ok()?;
        w.watch(&info.git_dir, RecursiveMode::NonRecursive).ok()?;
        for sub in ["refs", "logs"] {
            let dir = info.common_dir.join(sub);
            if dir.exists() {
                let _ = w.watch(&dir, RecursiveMode::Recursive);
            }
        }
        if info.common_dir != info.git_dir {
            let _ = w.watch(&info.common_dir, RecursiveMode::NonRecursive);
        }
        Some(w)
    }

    /// Background work: inotify-triggered refreshes (coalesced), the poll timer,
    /// dropping idle paths. Runs until the runtime stops; a second call returns at once.
    pub async fn run(d: Arc<Daemon>) {
        let Some(mut changes) = d.git.changes.lock().ok().and_then(|mut c| c.take()) else {
            return;
        };
        let mut tick = tokio::time::interval(d.config().poll_every);
        loop {
            tokio::select! {
                Some(path) = changes.recv() => {
                    // Coalesce a burst of events (git writes several files per operation).
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let mut paths = vec![path];
                    while let Ok(p) = changes.try_recv() {
                        paths.push(p);
                    }
                    paths.sort();
                    paths.dedup();
                    for p in paths {
                        d.git.refresh(&d, &p, Counts::Spawn).await;
                    }
                }
                _ = tick.tick() => d.git.poll(&d).await,
            }
        }
    }

    async fn poll(&self, d: &Arc<Daemon>) {
        let now = Instant::now();
        let paths: Vec<(String, bool)> = self
            .paths
            .lock()
            .map(|g| {
                g.iter()
                    .map(|(p, e)| (p.clone(), e.retry_at <= now))
                    .collect()
            })
            .unwrap_or_default();
        for (p, due) in paths {
            let idle = d.cache.idle_ms("git.branch", Some(&p)).unwrap_or(u64::MAX);
            if idle >= d.config().idle_after.as_millis() as u64 {
                if let Ok(mut g) = self.paths.lock() {
                    g.remove(&p);
                }
                d.cache.forget_path(&p);
            } else if due {
                self.refresh(d, &p, Counts::Spawn).await;
            }
        }
    }
}

/// Computes ahead/behind and the status counts with gix, off the async threads.
async fn refresh_counts(d: Arc<Daemon>, path: String, info: GitInfo) {
    let t0 = Instant::now();
    let result: Result<Result<GitCounts, String>, _> =
        tokio::task::spawn_blocking(move || counts(&info)).await;
    let took = t0.elapsed();
    match result {
        Ok(Ok(c)) => {
            for (k, v) in count_values(&c) {
                d.cache.put(k, Some(&path), v);
            }
        }
        _ => {
            // The file-only keys stand; the counts say they are unknown.
            for k in COUNT_KEYS {
                d.cache.put(k, Some(&path), b"null".to_vec());
            }
        }
    }
    d.git.counts_done(&path, took);
    d.notify(Event::Path(path.as_str().into()));
}
