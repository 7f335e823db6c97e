//! The shared-memory snapshot: every cached value in a memory-mapped file beside the
//! socket (`snapshot`), so that a client reads a value without a socket round trip —
//! once mapped, a read is memory loads only. The layout is versioned and documented in
//! docs/protocol.md ("Shared memory"):
//!
//! ```text
//! header  0  magic [u8; 8] = "KSSNAP\0\x01"   8 version u32 = 1   12 count u32
//!         16 replaced u64 (1: a newer file has this name now; re-open)
//!         24 pid u32 (the daemon)   28 interval_ms u32 (its sampling interval)
//!         32 start u64 (the daemon's start time, /proc/PID/stat field 22)
//!         40 beat_ns u64 (CLOCK_MONOTONIC of its last publish)   48..64 reserved
//! index   64 + 64 i, sorted by key bytes:
//!         0 seq u64 (seqlock: odd while being written)   8 key_off u32  12 key_len u32
//!         16 val_off u32  20 val_cap u32  24 val_len u32  28 flags u32 (1: an error text)
//!         32 updated_ns u64 (CLOCK_MONOTONIC when computed)   40..64 reserved
//! keys    the keys: "load.one", or "git.branch" NUL scope for per-path and context keys
//! values  8-byte aligned slots, each `val_cap` bytes
//! ```
//!
//! One writer (the daemon) changes a value in place when it fits its slot: seq + 1 (odd),
//! the bytes, the length and time, seq + 1 (even), with release ordering. A new key or a
//! longer value makes a new file with room to grow, renamed over the old one, which is
//! then marked `replaced`. A reader copies a value with 8-byte atomic loads between two
//! acquire loads of seq and retries while seq is odd or moved: it sees a whole value of
//! one write, or retries — never a torn one (the stress test checks a million reads).

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

/// The file's first bytes.
pub const MAGIC: [u8; 8] = *b"KSSNAP\0\x01";
/// Layout version.
pub const VERSION: u32 = 1;
const HEADER: usize = 64;
const SLOT: usize = 64;

/// A mapping of a whole file.
struct Map {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain shared memory; every access to what other processes write
// goes through atomics (the seqlock), and the pointer is owned until drop.
unsafe impl Send for Map {}
// SAFETY: as above.
unsafe impl Sync for Map {}

impl Map {
    fn new(file: &File, len: usize, write: bool) -> io::Result<Map> {
        if len < HEADER {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "snapshot too short",
            ));
        }
        let prot = if write {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        // SAFETY: a shared mapping of `len` bytes of an open file; checked for failure.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                prot,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Map {
            ptr: ptr.cast(),
            len,
        })
    }

    fn u64(&self, off: usize) -> &AtomicU64 {
        assert!(off.is_multiple_of(8) && off + 8 <= self.len);
        // SAFETY: in bounds and aligned (the mapping is page-aligned), and only ever
        // accessed atomically.
        unsafe { &*(self.ptr.add(off) as *const AtomicU64) }
    }

    fn u32(&self, off: usize) -> &AtomicU32 {
        assert!(off.is_multiple_of(4) && off + 4 <= self.len);
        // SAFETY: as for `u64`.
        unsafe { &*(self.ptr.add(off) as *const AtomicU32) }
    }

    fn bytes(&self, off: usize, len: usize) -> Option<&[u8]> {
        // Immutable parts only (the magic, the keys): never written after the file is made.
        (off.checked_add(len)? <= self.len)
            // SAFETY: in bounds; these bytes are not written while mapped.
            .then(|| unsafe { std::slice::from_raw_parts(self.ptr.add(off), len) })
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once.
        unsafe { libc::munmap(self.ptr.cast(), self.len) };
    }
}

/// CLOCK_MONOTONIC in nanoseconds (the clock of `updated_ns` and `beat_ns`).
pub fn now_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// A process's start time as /proc/PID/stat field 22 (clock ticks since boot).
pub fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 2..]
        .split(' ')
        .nth(19)?
        .parse()
        .ok()
}

/// One value as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    /// Its JSON (or the failure's text when `error`).
    pub bytes: Vec<u8>,
    /// The provider failed: `bytes` says why.
    pub error: bool,
    /// CLOCK_MONOTONIC when it was computed.
    pub updated_ns: u64,
}

/// The key as stored: the key, and for per-path and context keys NUL and the scope.
pub fn stored_key(key: &str, scope: Option<&str>) -> String {
    match scope {
        Some(s) => format!("{key}\0{s}"),
        None => key.to_string(),
    }
}

struct Slot {
    seq: usize,
    val_off: usize,
    val_cap: usize,
}

fn slot_of(map: &Map, i: usize) -> Slot {
    let base = HEADER + i * SLOT;
    Slot {
        seq: base,
        val_off: map.u32(base + 16).load(Ordering::Relaxed) as usize,
        val_cap: map.u32(base + 20).load(Ordering::Relaxed) as usize,
    }
}

/// The daemon's side.
pub struct Writer {
    path: PathBuf,
    map: Map,
    /// Stored key -> index slot.
    index: std::collections::HashMap<String, usize>,
    pid: u32,
    start: u64,
    interval_ms: u32,
    mode: u32,
    rebuilds: u64,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("path", &self.path)
            .field("keys", &self.index.len())
            .finish()
    }
}

impl Writer {
    /// Makes an empty snapshot at `path` (mode `mode`), replacing whatever is there.
    pub fn create(path: &Path, mode: u32, interval_ms: u32) -> io::Result<Writer> {
        let pid = std::process::id();
        let start = start_time(pid).unwrap_or(0);
        Writer::build(path, mode, pid, start, interval_ms, &[], None)
    }

    fn build(
        path: &Path,
        mode: u32,
        pid: u32,
        start: u64,
        interval_ms: u32,
        entries: &[(String, Stored)],
        old: Option<&Map>,
    ) -> io::Result<Writer> {
        let mut sorted: Vec<&(String, Stored)> = entries.iter().collect();
        sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
        let n = sorted.len();
        let keys_off = HEADER + n * SLOT;
        let keys_len: usize = sorted.iter().map(|(k, _)| k.len()).sum();
        let mut vals_off = (keys_off + keys_len).next_multiple_of(8);
        let mut buf = vec![0u8; vals_off];
        buf[..8].copy_from_slice(&MAGIC);
        buf[8..12].copy_from_slice(&VERSION.to_ne_bytes());
        buf[12..16].copy_from_slice(&(n as u32).to_ne_bytes());
        buf[24..28].copy_from_slice(&pid.to_ne_bytes());
        buf[28..32].copy_from_slice(&interval_ms.to_ne_bytes());
        buf[32..40].copy_from_slice(&start.to_ne_bytes());
        buf[40..48].copy_from_slice(&now_ns().to_ne_bytes());
        buf[48..56].copy_from_slice(&(keys_off as u64).to_ne_bytes());
        let mut key_at = keys_off;
        let mut index = std::collections::HashMap::with_capacity(n);
        for (i, (k, v)) in sorted.iter().enumerate() {
            // Room to grow: twice the value, at least 32 bytes.
            let cap = (v.bytes.len() * 2).max(32).next_multiple_of(8);
            let b = HEADER + i * SLOT;
            buf[b + 8..b + 12].copy_from_slice(&(key_at as u32).to_ne_bytes());
            buf[b + 12..b + 16].copy_from_slice(&(k.len() as u32).to_ne_bytes());
            buf[b + 16..b + 20].copy_from_slice(&(vals_off as u32).to_ne_bytes());
            buf[b + 20..b + 24].copy_from_slice(&(cap as u32).to_ne_bytes());
            buf[b + 24..b + 28].copy_from_slice(&(v.bytes.len() as u32).to_ne_bytes());
            buf[b + 28..b + 32].copy_from_slice(&u32::from(v.error).to_ne_bytes());
            buf[b + 32..b + 40].copy_from_slice(&v.updated_ns.to_ne_bytes());
            buf[key_at..key_at + k.len()].copy_from_slice(k.as_bytes());
            key_at += k.len();
            buf.resize(vals_off + cap, 0);
            buf[vals_off..vals_off + v.bytes.len()].copy_from_slice(&v.bytes);
            vals_off += cap;
            index.insert(k.clone(), i);
        }
        if buf.len() > u32::MAX as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "snapshot over 4 GiB",
            ));
        }
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        let publish = || {
            use std::os::unix::fs::OpenOptionsExt;
            std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(mode)
                .open(&tmp)?
                .write_all(&buf)?;
            std::fs::rename(&tmp, path)
        };
        if let Err(e) = publish() {
            // Leave nothing behind: a daemon that could not rename (its seccomp list
            // once lacked rename) left one temporary file per start.
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        if let Some(old) = old {
            old.u64(16).store(1, Ordering::Release);
        }
        let f = File::options().read(true).write(true).open(path)?;
        let map = Map::new(&f, buf.len(), true)?;
        Ok(Writer {
            path: path.to_path_buf(),
            map,
            index,
            pid,
            start,
            interval_ms,
            mode,
            rebuilds: 0,
        })
    }

    /// Every stored value, read back (for a rebuild).
    fn entries(&self) -> Vec<(String, Stored)> {
        let mut out = Vec::with_capacity(self.index.len());
        let mut buf = Vec::new();
        for (k, &i) in &self.index {
            if let Some(v) = read_slot(&self.map, i, &mut buf) {
                out.push((k.clone(), v));
            }
        }
        out
    }

    /// Stores `bytes` under `key` (a stored key, see [`stored_key`]).
    pub fn set(&mut self, key: &str, bytes: &[u8], error: bool, updated_ns: u64) -> io::Result<()> {
        let v = Stored {
            bytes: bytes.to_vec(),
            error,
            updated_ns,
        };
        self.apply(vec![(key.to_string(), v)], &[])
    }

    /// Removes `key`.
    pub fn remove(&mut self, key: &str) -> io::Result<()> {
        self.apply(Vec::new(), &[key.to_string()])
    }

    /// Stores `changes` and removes `gone`: in place where a value fits its slot, and
    /// with one new file for all the rest (new keys, longer values, removals) — a daemon
    /// starting, or a new git path arriving with thirty keys, costs one rebuild.
    pub fn apply(&mut self, changes: Vec<(String, Stored)>, gone: &[String]) -> io::Result<()> {
        let mut rest = Vec::new();
        for (k, v) in changes {
            match self.index.get(&k) {
                Some(&i) if v.bytes.len() <= slot_of(&self.map, i).val_cap => {
                    self.write_in_place(i, &v)
                }
                _ => rest.push((k, v)),
            }
        }
        let gone: Vec<&String> = gone
            .iter()
            .filter(|k| self.index.contains_key(*k))
            .collect();
        if rest.is_empty() && gone.is_empty() {
            return Ok(());
        }
        let mut all = self.entries();
        all.retain(|(k, _)| !gone.contains(&k) && !rest.iter().any(|(r, _)| r == k));
        all.extend(rest);
        let rebuilds = self.rebuilds + 1;
        *self = Writer::build(
            &self.path,
            self.mode,
            self.pid,
            self.start,
            self.interval_ms,
            &all,
            Some(&self.map),
        )?;
        self.rebuilds = rebuilds;
        Ok(())
    }

    fn write_in_place(&self, i: usize, v: &Stored) {
        let s = slot_of(&self.map, i);
        let seq = self.map.u64(s.seq);
        let n = seq.load(Ordering::Relaxed);
        seq.store(n + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        write_words(&self.map, s.val_off, &v.bytes);
        let b = HEADER + i * SLOT;
        self.map
            .u32(b + 24)
            .store(v.bytes.len() as u32, Ordering::Relaxed);
        self.map
            .u32(b + 28)
            .store(u32::from(v.error), Ordering::Relaxed);
        self.map.u64(b + 32).store(v.updated_ns, Ordering::Relaxed);
        seq.store(n + 2, Ordering::Release);
    }

    /// New files made since this writer was created (for tests and counts).
    pub fn rebuilds(&self) -> u64 {
        self.rebuilds
    }

    /// Records that the daemon published just now.
    pub fn beat(&self) {
        self.map.u64(40).store(now_ns(), Ordering::Release);
    }

    /// Stored keys.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// No keys.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// Marks the file dead (the daemon is stopping) and removes it.
    pub fn close(self) {
        self.map.u64(16).store(1, Ordering::Release);
        let _ = std::fs::remove_file(&self.path);
    }
}

fn write_words(map: &Map, off: usize, bytes: &[u8]) {
    for (i, chunk) in bytes.chunks(8).enumerate() {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        map.u64(off + i * 8)
            .store(u64::from_ne_bytes(w), Ordering::Relaxed);
    }
}

/// Reads slot `i` under the seqlock into `buf` (None: it kept changing for 1,000 tries,
/// or the index points outside the file — a corrupt file is a missing value, never a
/// read out of bounds).
fn read_slot(map: &Map, i: usize, buf: &mut Vec<u8>) -> Option<Stored> {
    let b = HEADER + i * SLOT;
    let s = slot_of(map, i);
    if !s.val_off.is_multiple_of(8)
        || s.val_off < HEADER
        || s.val_off.checked_add(s.val_cap.next_multiple_of(8))? > map.len
    {
        return None;
    }
    for _ in 0..1000 {
        let before = map.u64(s.seq).load(Ordering::Acquire);
        if !before.is_multiple_of(2) {
            std::hint::spin_loop();
            continue;
        }
        let len = (map.u32(b + 24).load(Ordering::Relaxed) as usize).min(s.val_cap);
        let error = map.u32(b + 28).load(Ordering::Relaxed) == 1;
        let updated_ns = map.u64(b + 32).load(Ordering::Relaxed);
        buf.clear();
        for w in 0..len.div_ceil(8) {
            buf.extend_from_slice(
                &map.u64(s.val_off + w * 8)
                    .load(Ordering::Relaxed)
                    .to_ne_bytes(),
            );
        }
        buf.truncate(len);
        fence(Ordering::Acquire);
        if map.u64(s.seq).load(Ordering::Relaxed) == before {
            return Some(Stored {
                bytes: buf.clone(),
                error,
                updated_ns,
            });
        }
    }
    None
}

/// Why a snapshot cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum Unusable {
    /// No file, or not readable.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// Not a snapshot, or a truncated or corrupt one.
    #[error("not a kernstat snapshot (bad magic, or truncated)")]
    Format,
    /// A snapshot of a layout this kernstat does not know (a newer daemon).
    #[error("snapshot layout version {0}; this kernstat reads version {VERSION}")]
    Version(u32),
    /// The file is not owned by the daemon's user (the socket's owner).
    #[error("owned by uid {0}, not by the daemon's user (uid {1})")]
    Owner(u32, u32),
    /// Its daemon is gone (no process of that pid and start time).
    #[error("its daemon (pid {0}) is gone")]
    Dead(u32),
}

/// A client's side: maps the file, checks it, finds keys by binary search.
pub struct Reader {
    path: PathBuf,
    /// Kept open so that the owner check is of the file mapped, not of the name.
    file: File,
    /// The uid the file must belong to (`beside`), checked again on every re-map.
    owner: Option<u32>,
    map: Map,
    count: usize,
    buf: Vec<u8>,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader").field("path", &self.path).finish()
    }
}

impl Reader {
    /// Maps the snapshot beside `socket` if it belongs to the same user as the socket
    /// (a file planted by someone else is refused) and is a snapshot of a live daemon.
    pub fn beside(socket: &Path) -> Result<Reader, Unusable> {
        let owner = std::fs::metadata(socket)?.uid();
        let mut r = Reader::open(&socket.with_file_name("snapshot"))?;
        r.check_owner(owner)?;
        Ok(r)
    }

    fn check_owner(&mut self, owner: u32) -> Result<(), Unusable> {
        let uid = self.file.metadata()?.uid();
        if uid != owner {
            return Err(Unusable::Owner(uid, owner));
        }
        self.owner = Some(owner);
        Ok(())
    }

    /// Maps `path` if it is a snapshot of a daemon that is alive.
    pub fn open(path: &Path) -> Result<Reader, Unusable> {
        let file = File::open(path)?;
        let len = file.metadata()?.len() as usize;
        let map = Map::new(&file, len, false).map_err(|_| Unusable::Format)?;
        if map.bytes(0, 8) != Some(&MAGIC[..]) {
            return Err(Unusable::Format);
        }
        let version = map.u32(8).load(Ordering::Relaxed);
        if version != VERSION {
            return Err(Unusable::Version(version));
        }
        let count = map.u32(12).load(Ordering::Relaxed) as usize;
        if HEADER + count * SLOT > len {
            return Err(Unusable::Format);
        }
        let pid = map.u32(24).load(Ordering::Relaxed);
        let start = map.u64(32).load(Ordering::Relaxed);
        if start_time(pid) != Some(start) {
            return Err(Unusable::Dead(pid));
        }
        Ok(Reader {
            path: path.to_path_buf(),
            file,
            owner: None,
            map,
            count,
            buf: Vec::with_capacity(256),
        })
    }

    /// Whether the file mapped is still the one at its path and its daemon still runs
    /// (a stat and a read of /proc/PID/stat): a long-lived reader checks this now and
    /// then, since a daemon killed and started again writes a new file that the old
    /// one knows nothing of.
    pub fn is_current(&self) -> bool {
        let (Ok(now), Ok(mapped)) = (std::fs::metadata(&self.path), self.file.metadata()) else {
            return false;
        };
        let pid = self.map.u32(24).load(Ordering::Relaxed);
        (now.dev(), now.ino()) == (mapped.dev(), mapped.ino())
            && start_time(pid) == Some(self.map.u64(32).load(Ordering::Relaxed))
    }

    /// The daemon's sampling interval.
    pub fn interval_ms(&self) -> u32 {
        self.map.u32(28).load(Ordering::Relaxed)
    }

    fn key_at(&self, i: usize) -> Option<&[u8]> {
        let b = HEADER + i * SLOT;
        let off = self.map.u32(b + 8).load(Ordering::Relaxed) as usize;
        let len = self.map.u32(b + 12).load(Ordering::Relaxed) as usize;
        self.map.bytes(off, len)
    }

    /// The value of a stored key; re-maps first when the daemon replaced the file.
    pub fn get(&mut self, key: &str) -> Option<Stored> {
        let i = self.find(key)?;
        read_slot(&self.map, i, &mut self.buf)
    }

    /// When a stored key's value was computed (`updated_ns`), without copying the value:
    /// what a follower looks at between values (the bar's summary is kilobytes; copying
    /// it five times a second cost the bar 3.6× the CPU of a socket watch).
    pub fn updated_ns(&mut self, key: &str) -> Option<u64> {
        let i = self.find(key)?;
        Some(self.map.u64(HEADER + i * SLOT + 32).load(Ordering::Acquire))
    }

    /// The index slot of `key` (re-mapping first when the daemon replaced the file).
    fn find(&mut self, key: &str) -> Option<usize> {
        if self.map.u64(16).load(Ordering::Acquire) != 0 {
            let mut fresh = Reader::open(&self.path).ok()?;
            if let Some(uid) = self.owner {
                fresh.check_owner(uid).ok()?;
            }
            *self = fresh;
        }
        let (mut lo, mut hi) = (0, self.count);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.key_at(mid)?.cmp(key.as_bytes()) {
                std::cmp::Ordering::Less => lo = mid + 1,
                std::cmp::Ordering::Greater => hi = mid,
                std::cmp::Ordering::Equal => return Some(mid),
            }
        }
        None
    }
}

/// The daemon's publishing task: mirrors the cache into the snapshot at `path` after
/// every change it announces (a sample, a path's git keys, a context, a put, a script).
/// `scoped`: per-path and context keys too (a user daemon); a system daemon publishes
/// only the machine's keys, its file being readable by every local user.
pub async fn publish(d: std::sync::Arc<crate::Daemon>, path: PathBuf, mode: u32, scoped: bool) {
    let interval_ms = d.config().interval.as_millis().min(u128::from(u32::MAX)) as u32;
    let mut w = match Writer::create(&path, mode, interval_ms) {
        Ok(w) => w,
        Err(e) => {
            eprintln!(
                "kernstat daemon: snapshot {}: {e}; clients use the socket",
                path.display()
            );
            return;
        }
    };
    let mut rx = d.subscribe();
    // Stored key -> the entry's time when last copied.
    let mut copied: std::collections::HashMap<String, std::time::Instant> = Default::default();
    loop {
        let now = now_ns();
        let mut seen = std::collections::HashSet::with_capacity(copied.len());
        let mut changed: Vec<(String, std::sync::Arc<crate::cache::Entry>)> = Vec::new();
        d.cache.visit(|key, scope, e| {
            if scope.is_some() && !scoped {
                return;
            }
            let k = stored_key(key, scope);
            if copied.get(&k) != Some(&e.updated) {
                changed.push((k.clone(), e.clone()));
            }
            seen.insert(k);
        });
        let batch: Vec<(String, Stored)> = changed
            .into_iter()
            .map(|(k, e)| {
                let updated_ns = now.saturating_sub(e.updated.elapsed().as_nanos() as u64);
                copied.insert(k.clone(), e.updated);
                let v = match &e.error {
                    Some(why) => Stored {
                        bytes: why.as_bytes().to_vec(),
                        error: true,
                        updated_ns,
                    },
                    None => Stored {
                        bytes: e.json.to_vec(),
                        error: false,
                        updated_ns,
                    },
                };
                (k, v)
            })
            .collect();
        let gone: Vec<String> = copied
            .keys()
            .filter(|k| !seen.contains(*k))
            .cloned()
            .collect();
        for k in &gone {
            copied.remove(k);
        }
        let failed = w.apply(batch, &gone).is_err();
        if failed {
            eprintln!(
                "kernstat daemon: snapshot {}: a write failed; clients use the socket",
                path.display()
            );
            w.close();
            return;
        }
        w.beat();
        match rx.recv().await {
            Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_round_trip_grow_and_replace() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("snapshot");
        let mut w = Writer::create(&p, 0o600, 2000).unwrap();
        w.set("load.one", b"0.42", false, 5).unwrap();
        w.set(
            &stored_key("git.branch", Some("/repo")),
            b"\"main\"",
            false,
            6,
        )
        .unwrap();
        let mut r = Reader::open(&p).unwrap();
        assert_eq!(r.interval_ms(), 2000);
        assert_eq!(r.get("load.one").unwrap().bytes, b"0.42");
        assert_eq!(r.get("git.branch\0/repo").unwrap().bytes, b"\"main\"");
        assert!(r.get("git.branch").is_none());
        // In place (fits), then larger (a new file: the reader follows).
        w.set("load.one", b"0.5", false, 7).unwrap();
        assert_eq!(
            r.get("load.one").unwrap(),
            Stored {
                bytes: b"0.5".to_vec(),
                error: false,
                updated_ns: 7
            }
        );
        let long = vec![b'7'; 1000];
        w.set("load.one", &long, false, 8).unwrap();
        assert_eq!(r.get("load.one").unwrap().bytes, long);
        w.set("x", b"failed: why", true, 9).unwrap();
        assert!(r.get("x").unwrap().error);
        w.remove("x").unwrap();
        assert!(r.get("x").is_none());
        // A hundred new keys at once: one new file, not a hundred.
        let before = w.rebuilds();
        let batch = (0..100)
            .map(|i| {
                (
                    format!("new.{i}"),
                    Stored {
                        bytes: b"1".to_vec(),
                        error: false,
                        updated_ns: 1,
                    },
                )
            })
            .collect();
        w.apply(batch, &[]).unwrap();
        assert_eq!(w.rebuilds(), before + 1);
        assert_eq!(r.get("new.99").unwrap().bytes, b"1");
        assert_eq!(r.get("git.branch\0/repo").unwrap().bytes, b"\"main\"");
        // A file whose pid and start time name no live process is refused.
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[32..40].copy_from_slice(&1u64.to_ne_bytes());
        let dead = d.path().join("dead");
        std::fs::write(&dead, &bytes).unwrap();
        assert!(matches!(Reader::open(&dead), Err(Unusable::Dead(_))));
        std::fs::write(
            &dead,
            b"not a snapshot at all, but long enough to map 64 bytes....",
        )
        .unwrap();
        assert!(matches!(Reader::open(&dead), Err(Unusable::Format)));
    }

    /// Files a reader must refuse, each with its own reason, and a corrupt index that
    /// must read as a missing value rather than out of bounds.
    #[test]
    fn truncated_corrupt_newer_and_foreign_snapshots_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("snapshot");
        let mut w = Writer::create(&p, 0o600, 2000).unwrap();
        for i in 0..10 {
            w.set(&format!("k.{i}"), b"12345", false, 1).unwrap();
        }
        let good = std::fs::read(&p).unwrap();
        let bad = d.path().join("bad");
        // Truncated inside the index.
        std::fs::write(&bad, &good[..HEADER + 3 * SLOT]).unwrap();
        assert!(matches!(Reader::open(&bad), Err(Unusable::Format)));
        // Shorter than a header.
        std::fs::write(&bad, &good[..10]).unwrap();
        assert!(matches!(Reader::open(&bad), Err(Unusable::Format)));
        // A newer layout.
        let mut newer = good.clone();
        newer[8..12].copy_from_slice(&2u32.to_ne_bytes());
        std::fs::write(&bad, &newer).unwrap();
        let err = Reader::open(&bad).unwrap_err();
        assert!(matches!(err, Unusable::Version(2)));
        assert!(err.to_string().contains("version 2"), "{err}");
        // An index entry pointing past the end, or misaligned: that key has no value,
        // the others still read.
        let mut corrupt = good.clone();
        corrupt[HEADER + 16..HEADER + 20].copy_from_slice(&u32::MAX.to_ne_bytes());
        corrupt[HEADER + SLOT + 16..HEADER + SLOT + 20].copy_from_slice(&3u32.to_ne_bytes());
        corrupt[HEADER + 2 * SLOT + 20..HEADER + 2 * SLOT + 24]
            .copy_from_slice(&u32::MAX.to_ne_bytes());
        std::fs::write(&bad, &corrupt).unwrap();
        let mut r = Reader::open(&bad).unwrap();
        assert!(r.get("k.0").is_none());
        assert!(r.get("k.1").is_none());
        assert!(r.get("k.2").is_none());
        assert_eq!(r.get("k.3").unwrap().bytes, b"12345");
        // Beside a socket of another owner (as root: the file given to nobody).
        let sock = d.path().join("sock");
        std::fs::write(&sock, b"").unwrap();
        assert!(Reader::beside(&sock).is_ok());
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } == 0 {
            std::os::unix::fs::chown(&p, Some(65534), None).unwrap();
            let err = Reader::beside(&sock).unwrap_err();
            assert!(matches!(err, Unusable::Owner(65534, 0)), "{err}");
        }
    }

    /// One writer updating 1,000 keys as fast as it can, four readers checking that
    /// every value they read is whole and of one write: a million reads, no torn one.
    #[test]
    fn a_million_reads_beside_a_busy_writer_are_never_torn() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("snapshot");
        let mut w = Writer::create(&p, 0o600, 1000).unwrap();
        let keys: Vec<String> = (0..1000).map(|i| format!("k{i:04}")).collect();
        // Each value: a generation repeated, padded to a length that depends on it, so
        // a torn read shows as mixed generations or a wrong length.
        let value = |g: u64| -> Vec<u8> {
            let mut s = String::new();
            for _ in 0..(4 + g % 20) {
                s.push_str(&format!("{g:016x}"));
            }
            s.into_bytes()
        };
        for k in &keys {
            w.set(k, &value(0).repeat(2), false, 0).unwrap();
        }
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let readers: Vec<_> = (0..4)
            .map(|t| {
                let p = p.clone();
                let keys = keys.clone();
                let stop = stop.clone();
                std::thread::spawn(move || {
                    let mut r = Reader::open(&p).unwrap();
                    let (mut reads, mut torn) = (0u64, 0u64);
                    let mut i = t * 250;
                    while reads < 250_000 {
                        if let Some(v) = r.get(&keys[i % 1000]) {
                            reads += 1;
                            let s = std::str::from_utf8(&v.bytes).unwrap_or("");
                            let first = s.get(..16).unwrap_or("");
                            let whole = s.len().is_multiple_of(16)
                                && !s.is_empty()
                                && s.as_bytes().chunks(16).all(|c| c == first.as_bytes())
                                && u64::from_str_radix(first, 16).is_ok_and(|g| {
                                    g == 0 && s.len() == 2 * 16 * 4
                                        || s.len() as u64 == 16 * (4 + g % 20)
                                });
                            torn += u64::from(!whole);
                        }
                        i += 1;
                    }
                    let _ = stop;
                    (reads, torn)
                })
            })
            .collect();
        let writer = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut g = 1u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    for k in &keys {
                        w.set(k, &value(g), false, g).unwrap();
                    }
                    g += 1;
                }
                g
            })
        };
        let (mut reads, mut torn) = (0, 0);
        for r in readers {
            let (n, t) = r.join().unwrap();
            reads += n;
            torn += t;
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let generations = writer.join().unwrap();
        assert_eq!(reads, 1_000_000);
        assert_eq!(
            torn, 0,
            "torn reads among {reads} ({generations} writer passes)"
        );
        assert!(
            generations > 2,
            "the writer kept writing: {generations} passes"
        );
    }

    // --- Property tests: the reader against forged files -------------------------------
    // A snapshot is written by the daemon's user, but a reader must still never read out
    // of bounds or panic on whatever that file holds. Cases: proptest's default (256) in
    // `make test`; `make fuzz` raises PROPTEST_CASES.
    mod props {
        use super::*;
        use proptest::prelude::*;

        /// A good snapshot of this process (so the liveness check passes) with `n` keys
        /// of values of several lengths.
        /// A key and the value written for it.
        type Written = (String, Vec<u8>);

        fn good(n: usize) -> (tempfile::TempDir, Vec<u8>, Vec<Written>) {
            let d = tempfile::tempdir().unwrap();
            let p = d.path().join("snapshot");
            let mut w = Writer::create(&p, 0o600, 1000).unwrap();
            let values: Vec<Written> = (0..n)
                .map(|i| {
                    let key = stored_key(&format!("k.{i}"), (i % 3 == 0).then_some("/p"));
                    (key, vec![b'a' + (i % 26) as u8; 1 + i * 7 % 90])
                })
                .collect();
            let batch = values
                .iter()
                .map(|(k, v)| {
                    let stored = Stored {
                        bytes: v.clone(),
                        error: i_is_error(k),
                        updated_ns: 1,
                    };
                    (k.clone(), stored)
                })
                .collect();
            w.apply(batch, &[]).unwrap();
            let bytes = std::fs::read(&p).unwrap();
            (d, bytes, values)
        }

        fn i_is_error(key: &str) -> bool {
            key.ends_with('7')
        }

        /// One way a file can be wrong.
        #[derive(Debug, Clone)]
        enum Damage {
            /// XOR a byte anywhere.
            Flip(usize, u8),
            /// An aligned 32-bit field set to a chosen value (counts, offsets, lengths).
            Word(usize, u32),
            /// Cut the file short.
            Cut(usize),
            /// Bytes appended.
            Append(Vec<u8>),
        }

        fn damage() -> impl Strategy<Value = Damage> {
            let word = prop_oneof![
                Just(0u32),
                Just(1),
                Just(7),
                Just(64),
                Just(u32::MAX),
                Just(u32::MAX - 7),
                any::<u32>(),
            ];
            prop_oneof![
                (any::<usize>(), 1u8..=255).prop_map(|(at, x)| Damage::Flip(at, x)),
                (any::<usize>(), word).prop_map(|(at, v)| Damage::Word(at, v)),
                any::<usize>().prop_map(Damage::Cut),
                proptest::collection::vec(any::<u8>(), 1..200).prop_map(Damage::Append),
            ]
        }

        fn apply(bytes: &mut Vec<u8>, d: &Damage) {
            if bytes.is_empty() {
                return;
            }
            match d {
                Damage::Flip(at, x) => {
                    let at = at % bytes.len();
                    bytes[at] ^= x;
                }
                Damage::Word(at, v) => {
                    let at = (at % bytes.len()) & !3;
                    if at + 4 <= bytes.len() {
                        bytes[at..at + 4].copy_from_slice(&v.to_ne_bytes());
                    }
                }
                Damage::Cut(at) => bytes.truncate(at % bytes.len()),
                Damage::Append(more) => bytes.extend_from_slice(more),
            }
        }

        /// Everything a client can ask of a reader; panics if the reader does.
        fn read_all(r: &mut Reader, keys: &[String], file_len: usize) {
            let _ = r.interval_ms();
            let _ = r.is_current();
            for k in keys {
                let _ = r.updated_ns(k);
                if let Some(v) = r.get(k) {
                    assert!(
                        v.bytes.len() <= file_len,
                        "{} bytes read from a {file_len}-byte file",
                        v.bytes.len()
                    );
                }
            }
        }

        proptest! {
            /// A good file with damage anywhere: refused, or read without a panic or a
            /// read out of bounds; without damage every value reads back exactly.
            #[test]
            fn damaged_snapshots_are_refused_or_read_safely(
                n in 0usize..40,
                damages in proptest::collection::vec(damage(), 0..6),
                extra in proptest::collection::vec(".{0,12}", 0..4),
            ) {
                let (d, mut bytes, values) = good(n);
                for x in &damages {
                    apply(&mut bytes, x);
                }
                let bad = d.path().join("bad");
                std::fs::write(&bad, &bytes).unwrap();
                let mut keys: Vec<String> = values.iter().map(|(k, _)| k.clone()).collect();
                keys.extend(extra);
                match Reader::open(&bad) {
                    Ok(mut r) => {
                        read_all(&mut r, &keys, bytes.len());
                        if damages.is_empty() {
                            for (k, v) in &values {
                                let got = r.get(k).unwrap();
                                prop_assert_eq!(&got.bytes, v);
                                prop_assert_eq!(got.error, i_is_error(k));
                            }
                        }
                    }
                    Err(e) => {
                        prop_assert!(!damages.is_empty(), "a good file refused: {e}");
                        prop_assert!(!e.to_string().is_empty());
                    }
                }
            }

            /// A right header (magic, version, this live process) over arbitrary bytes:
            /// whatever the index says, a reader refuses or reads within the file.
            #[test]
            fn a_live_header_over_any_bytes_is_read_safely(
                count in prop_oneof![0u32..64, any::<u32>()],
                replaced in prop_oneof![Just(0u64), any::<u64>()],
                body in proptest::collection::vec(any::<u8>(), 0..4096),
                keys in proptest::collection::vec(prop_oneof![Just("k.1".to_string()), ".{0,12}".prop_map(String::from)], 1..6),
            ) {
                let d = tempfile::tempdir().unwrap();
                let p = d.path().join("snapshot");
                let pid = std::process::id();
                let mut bytes = vec![0u8; HEADER];
                bytes[..8].copy_from_slice(&MAGIC);
                bytes[8..12].copy_from_slice(&VERSION.to_ne_bytes());
                bytes[12..16].copy_from_slice(&count.to_ne_bytes());
                bytes[16..24].copy_from_slice(&replaced.to_ne_bytes());
                bytes[24..28].copy_from_slice(&pid.to_ne_bytes());
                bytes[32..40].copy_from_slice(&start_time(pid).unwrap().to_ne_bytes());
                bytes.extend_from_slice(&body);
                std::fs::write(&p, &bytes).unwrap();
                if let Ok(mut r) = Reader::open(&p) {
                    read_all(&mut r, &keys, bytes.len());
                }
            }
        }
    }
}
