//! The cache: every key's latest value, already serialised, and when it was made.
//!
//! Reads are the hot path (every request is one): a read lock, one hash lookup with the
//! borrowed key (no allocation), an Arc clone. Path-scoped keys (git.*) live in a second
//! level keyed by path, so they too are found without building a composite key. Writers
//! (the sampler, providers) replace whole entries. Every entry also records when it was
//! last read, so that providers nobody asks for can stop refreshing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Instant;

/// One cached value.
#[derive(Debug)]
pub struct Entry {
    /// The value as JSON.
    pub json: Box<[u8]>,
    /// When it was computed.
    pub updated: Instant,
    /// Why the provider failed (then `json` is null).
    pub error: Option<Box<str>>,
    /// Milliseconds after the cache's epoch when it was last read.
    last_read_ms: AtomicU64,
}

impl Entry {
    /// A value made now that is not in the cache (a whole provider's fields gathered
    /// into one object).
    pub fn made(json: Vec<u8>) -> Entry {
        Entry {
            json: json.into_boxed_slice(),
            updated: Instant::now(),
            error: None,
            last_read_ms: AtomicU64::new(0),
        }
    }

    /// A value computed from a sample taken at `updated`, not kept in the cache (an
    /// answer made for one asker).
    pub fn made_at(json: Vec<u8>, updated: Instant) -> Entry {
        Entry {
            updated,
            ..Entry::made(json)
        }
    }

    /// A failure made now that is not in the cache (a read that timed out).
    pub fn failed(why: &str) -> Entry {
        Entry {
            json: Box::new([]),
            updated: Instant::now(),
            error: Some(why.into()),
            last_read_ms: AtomicU64::new(0),
        }
    }

    /// Age in milliseconds.
    pub fn age_ms(&self) -> u64 {
        self.updated.elapsed().as_millis() as u64
    }
}

/// Keys to entries.
type Entries = HashMap<Box<str>, Arc<Entry>>;

/// The cache.
#[derive(Debug)]
pub struct Cache {
    epoch: Instant,
    global: RwLock<Entries>,
    /// key -> path -> entry.
    scoped: RwLock<HashMap<Box<str>, Entries>>,
}

impl Default for Cache {
    fn default() -> Self {
        Cache {
            epoch: Instant::now(),
            global: RwLock::new(HashMap::new()),
            scoped: RwLock::new(HashMap::new()),
        }
    }
}

impl Cache {
    /// A new, empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    fn touch(&self, e: &Entry) {
        e.last_read_ms
            .store(self.epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    /// The entry for `key` (and `path`, for path-scoped keys).
    pub fn get(&self, key: &str, path: Option<&str>) -> Option<Arc<Entry>> {
        let e = match path {
            None => self.global.read().ok()?.get(key).cloned(),
            Some(p) => self.scoped.read().ok()?.get(key)?.get(p).cloned(),
        }?;
        self.touch(&e);
        Some(e)
    }

    /// Replaces the value of `key` (and `path`) with `json`.
    pub fn put(&self, key: &str, path: Option<&str>, json: Vec<u8>) {
        self.put_entry(key, path, json, None)
    }

    /// Records that the provider of `key` (and `path`) failed, and why.
    pub fn put_failed(&self, key: &str, path: Option<&str>, why: &str) {
        self.put_entry(key, path, b"null".to_vec(), Some(why.into()))
    }

    /// Removes `key` (and `path`).
    pub fn remove(&self, key: &str, path: Option<&str>) {
        match path {
            None => {
                if let Ok(mut g) = self.global.write() {
                    g.remove(key);
                }
            }
            Some(p) => {
                if let Ok(mut s) = self.scoped.write() {
                    if let Some(m) = s.get_mut(key) {
                        m.remove(p);
                        if m.is_empty() {
                            s.remove(key);
                        }
                    }
                }
            }
        }
    }

    fn put_entry(&self, key: &str, path: Option<&str>, json: Vec<u8>, error: Option<Box<str>>) {
        let entry = Arc::new(Entry {
            json: json.into_boxed_slice(),
            updated: Instant::now(),
            error,
            last_read_ms: AtomicU64::new(self.epoch.elapsed().as_millis() as u64),
        });
        match path {
            None => {
                if let Ok(mut g) = self.global.write() {
                    // Keep the read time of the entry we replace.
                    if let Some(old) = g.get(key) {
                        entry
                            .last_read_ms
                            .store(old.last_read_ms.load(Ordering::Relaxed), Ordering::Relaxed);
                    }
                    g.insert(key.into(), entry);
                }
            }
            Some(p) => {
                if let Ok(mut s) = self.scoped.write() {
                    let m = s.entry(key.into()).or_default();
                    if let Some(old) = m.get(p) {
                        entry
                            .last_read_ms
                            .store(old.last_read_ms.load(Ordering::Relaxed), Ordering::Relaxed);
                    }
                    m.insert(p.into(), entry);
                }
            }
        }
    }

    /// Milliseconds since `key`/`path` was last read (None if absent).
    pub fn idle_ms(&self, key: &str, path: Option<&str>) -> Option<u64> {
        let last = match path {
            None => self
                .global
                .read()
                .ok()?
                .get(key)?
                .last_read_ms
                .load(Ordering::Relaxed),
            Some(p) => self
                .scoped
                .read()
                .ok()?
                .get(key)?
                .get(p)?
                .last_read_ms
                .load(Ordering::Relaxed),
        };
        Some((self.epoch.elapsed().as_millis() as u64).saturating_sub(last))
    }

    /// Removes path-scoped entries of `path` (all keys).
    pub fn forget_path(&self, path: &str) {
        if let Ok(mut s) = self.scoped.write() {
            for m in s.values_mut() {
                m.remove(path);
            }
            s.retain(|_, m| !m.is_empty());
        }
    }

    /// Every global key, sorted, and every path-scoped key name.
    pub fn keys(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .global
            .read()
            .map(|g| g.keys().map(|k| k.to_string()).collect())
            .unwrap_or_default();
        if let Ok(s) = self.scoped.read() {
            v.extend(s.keys().map(|k| k.to_string()));
        }
        v.sort();
        v.dedup();
        v
    }

    /// Calls `f` with every entry: its key, its path or scope (None for global keys).
    pub fn visit(&self, mut f: impl FnMut(&str, Option<&str>, &Arc<Entry>)) {
        if let Ok(g) = self.global.read() {
            for (k, e) in g.iter() {
                f(k, None, e);
            }
        }
        if let Ok(s) = self.scoped.read() {
            for (k, m) in s.iter() {
                for (p, e) in m.iter() {
                    f(k, Some(p), e);
                }
            }
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        let g = self.global.read().map(|g| g.len()).unwrap_or(0);
        let s = self
            .scoped
            .read()
            .map(|s| s.values().map(HashMap::len).sum())
            .unwrap_or(0);
        g + s
    }

    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn global_and_scoped() {
        let c = Cache::new();
        assert!(c.get("load.one", None).is_none());
        c.put("load.one", None, b"0.5".to_vec());
        c.put("git.branch", Some("/a"), b"\"main\"".to_vec());
        c.put("git.branch", Some("/b"), b"\"dev\"".to_vec());
        assert_eq!(&*c.get("load.one", None).unwrap().json, b"0.5");
        assert_eq!(&*c.get("git.branch", Some("/b")).unwrap().json, b"\"dev\"");
        assert!(c.get("git.branch", None).is_none());
        assert!(c.get("git.branch", Some("/c")).is_none());
        assert_eq!(c.keys(), vec!["git.branch", "load.one"]);
        assert_eq!(c.len(), 3);
        c.forget_path("/a");
        assert!(c.get("git.branch", Some("/a")).is_none());
    }

    #[test]
    fn idle_time_tracks_reads() {
        let c = Cache::new();
        c.put("k", None, b"1".to_vec());
        std::thread::sleep(std::time::Duration::from_millis(30));
        assert!(c.idle_ms("k", None).unwrap() >= 25);
        c.get("k", None);
        assert!(c.idle_ms("k", None).unwrap() < 25);
    }
}
