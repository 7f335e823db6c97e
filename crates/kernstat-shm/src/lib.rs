//! The shared-memory snapshot (kernstat-shm): every cached value in a memory-mapped file beside the
//! socket (`snapshot`), so that a client reads a value without a socket round trip —
//! once mapped, a read is memory loads only. The layout is versioned and documented in
//! docs/protocol.md ("Shared memory"):
//!
//! ```text
//! header  0  magic [u8; 8] = "KSSNAP\0\x01"   8 version u32 = 2   12 count u32
//!         16 closed u64 (1: the daemon stopped; re-open)
//!         24 pid u32 (the daemon)   28 interval_ms u32 (its sampling interval)
//!         32 start u64 (the daemon's start time, /proc/PID/stat field 22)
//!         40 beat_ns u64 (CLOCK_MONOTONIC of its last publish)
//!         48 len u64 (bytes of the layout in use; the file may be longer)
//!         56 layout u64 (seqlock of the layout: odd while it is rewritten)
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
//! longer value rewrites the whole layout in place under the header's `layout` seqlock,
//! growing the file (never shrinking it) when it needs room — one file and one
//! descriptor for the daemon's life, so that a system daemon keeps a root-owned file it
//! opened before dropping privileges and can still write it (shared/security M2). A
//! reader copies a value with 8-byte atomic loads between two acquire loads of seq, all
//! inside a check of `layout`, and retries while either is odd or moved: it sees a
//! whole value of one write, or retries — never a torn one (the stress test checks a
//! million reads). A file that shrinks under a mapping reads as zeros (guard.rs) rather
//! than killing the process.

mod guard;
mod reader;
mod writer;

pub use reader::{Reader, Unusable};
pub use writer::Writer;

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::sync::atomic::{fence, AtomicU32, AtomicU64, AtomicU8, Ordering};

/// The file's first bytes.
pub const MAGIC: [u8; 8] = *b"KSSNAP\0\x01";
/// Layout version (2: rewritten in place under a layout seqlock; 1 made new files).
pub const VERSION: u32 = 2;
const HEADER: usize = 64;
const SLOT: usize = 64;
const OFF_COUNT: usize = 12;
const OFF_CLOSED: usize = 16;
const OFF_PID: usize = 24;
const OFF_INTERVAL: usize = 28;
const OFF_START: usize = 32;
const OFF_BEAT: usize = 40;
const OFF_LEN: usize = 48;
const OFF_LAYOUT: usize = 56;

/// A shared mapping of a file's first `len` bytes, watched by the SIGBUS guard.
struct Map {
    ptr: *mut u8,
    len: usize,
    guard: Option<usize>,
}

// SAFETY: the mapping is plain shared memory; every access to what other processes write
// goes through atomics (the seqlocks), and the pointer is owned until drop.
unsafe impl Send for Map {}
// SAFETY: as above.
unsafe impl Sync for Map {}

impl Map {
    fn new(fd: BorrowedFd<'_>, len: usize, write: bool) -> io::Result<Map> {
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
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let guard = guard::watch(ptr as usize, len);
        Ok(Map {
            ptr: ptr.cast(),
            len,
            guard,
        })
    }

    fn u64(&self, off: usize) -> Option<&AtomicU64> {
        (off.is_multiple_of(8) && off.checked_add(8)? <= self.len)
            // SAFETY: in bounds and aligned (the mapping is page-aligned), and only ever
            // accessed atomically.
            .then(|| unsafe { &*(self.ptr.add(off) as *const AtomicU64) })
    }

    fn u32(&self, off: usize) -> Option<&AtomicU32> {
        (off.is_multiple_of(4) && off.checked_add(4)? <= self.len)
            // SAFETY: as for `u64`.
            .then(|| unsafe { &*(self.ptr.add(off) as *const AtomicU32) })
    }

    fn u8(&self, off: usize) -> Option<&AtomicU8> {
        (off < self.len)
            // SAFETY: in bounds; accessed atomically.
            .then(|| unsafe { &*(self.ptr.add(off) as *const AtomicU8) })
    }

    /// A header field the writer laid out itself (always in bounds).
    fn head64(&self, off: usize) -> &AtomicU64 {
        self.u64(off).expect("header field")
    }

    fn head32(&self, off: usize) -> &AtomicU32 {
        self.u32(off).expect("header field")
    }

    /// How `len` bytes at `off` compare with `key` (None: outside the mapping).
    fn cmp_key(&self, off: usize, len: usize, key: &[u8]) -> Option<std::cmp::Ordering> {
        if off.checked_add(len)? > self.len {
            return None;
        }
        for (i, want) in key.iter().enumerate().take(len) {
            let b = self.u8(off + i)?.load(Ordering::Relaxed);
            match b.cmp(want) {
                std::cmp::Ordering::Equal => {}
                o => return Some(o),
            }
        }
        Some(len.cmp(&key.len()))
    }

    /// The `len` bytes at `off`, copied with atomic loads.
    fn copy(&self, off: usize, len: usize) -> Option<Vec<u8>> {
        if off.checked_add(len)? > self.len {
            return None;
        }
        (0..len)
            .map(|i| self.u8(off + i).map(|b| b.load(Ordering::Relaxed)))
            .collect()
    }
}

impl Drop for Map {
    fn drop(&mut self) {
        if let Some(slot) = self.guard {
            guard::forget(slot);
        }
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

/// Slot `i`'s value: (offset, capacity), None when the index points outside the
/// mapping or is misaligned (a corrupt file reads as a missing value).
fn slot_value(map: &Map, i: usize) -> Option<(usize, usize)> {
    let b = HEADER.checked_add(i.checked_mul(SLOT)?)?;
    let off = map.u32(b + 16)?.load(Ordering::Relaxed) as usize;
    let cap = map.u32(b + 20)?.load(Ordering::Relaxed) as usize;
    if !off.is_multiple_of(8) || off < HEADER || off.checked_add(cap.next_multiple_of(8))? > map.len
    {
        return None;
    }
    Some((off, cap))
}

/// Reads slot `i` under its seqlock into `buf` (None: it kept changing for 1,000 tries,
/// or the index points outside the mapping). The caller checks the layout around it.
fn read_slot(map: &Map, i: usize, buf: &mut Vec<u8>) -> Option<Stored> {
    let b = HEADER + i * SLOT;
    let (val_off, val_cap) = slot_value(map, i)?;
    let seq = map.u64(b)?;
    for _ in 0..1000 {
        let before = seq.load(Ordering::Acquire);
        if !before.is_multiple_of(2) {
            std::hint::spin_loop();
            continue;
        }
        let len = (map.u32(b + 24)?.load(Ordering::Relaxed) as usize).min(val_cap);
        let error = map.u32(b + 28)?.load(Ordering::Relaxed) == 1;
        let updated_ns = map.u64(b + 32)?.load(Ordering::Relaxed);
        buf.clear();
        for w in 0..len.div_ceil(8) {
            buf.extend_from_slice(
                &map.u64(val_off + w * 8)?
                    .load(Ordering::Relaxed)
                    .to_ne_bytes(),
            );
        }
        buf.truncate(len);
        fence(Ordering::Acquire);
        if seq.load(Ordering::Relaxed) == before {
            return Some(Stored {
                bytes: buf.clone(),
                error,
                updated_ns,
            });
        }
    }
    None
}

/// Writes `bytes` at `off` in 8-byte atomic stores (the last word zero-padded).
fn write_words(map: &Map, off: usize, bytes: &[u8]) {
    for (i, chunk) in bytes.chunks(8).enumerate() {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        if let Some(word) = map.u64(off + i * 8) {
            word.store(u64::from_ne_bytes(w), Ordering::Relaxed);
        }
    }
}

/// A whole layout of `entries` (sorted by key bytes) as the file's bytes: the header's
/// magic, version, count and len filled in (the caller adds its pid, times and seqs),
/// and for each stored key its index slot.
fn layout(
    entries: &[(String, Stored)],
) -> io::Result<(Vec<u8>, std::collections::HashMap<String, usize>)> {
    let mut sorted: Vec<&(String, Stored)> = entries.iter().collect();
    sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    sorted.dedup_by(|a, b| a.0 == b.0);
    let n = sorted.len();
    let keys_off = HEADER + n * SLOT;
    let keys_len: usize = sorted.iter().map(|(k, _)| k.len()).sum();
    let mut vals_off = (keys_off + keys_len).next_multiple_of(8);
    let mut buf = vec![0u8; vals_off];
    buf[..8].copy_from_slice(&MAGIC);
    buf[8..12].copy_from_slice(&VERSION.to_ne_bytes());
    buf[OFF_COUNT..OFF_COUNT + 4].copy_from_slice(&(n as u32).to_ne_bytes());
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
    let len = buf.len() as u64;
    buf[OFF_LEN..OFF_LEN + 8].copy_from_slice(&len.to_ne_bytes());
    Ok((buf, index))
}

#[cfg(test)]
mod tests;
