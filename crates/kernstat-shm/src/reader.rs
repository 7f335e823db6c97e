//! A client's side of the snapshot: the directory opened once, the file opened in it
//! without following a link, and trusted only when it belongs to this user or root
//! (shared/security M2: trusting "the same owner as the socket" let another user's
//! file be read through `--socket`, and a name checked then opened let a directory
//! renamed in between feed a prompt). Lookups run inside the layout seqlock, every
//! offset checked against the mapping, so a file changed, forged or cut under a reader
//! yields a missing value or a re-open, never a wrong value or a crash.

use std::fs::File;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, Ordering};

use rustix::fs::{Mode, OFlags};

use super::{
    guard, read_slot, start_time, Map, Stored, HEADER, MAGIC, OFF_CLOSED, OFF_COUNT, OFF_INTERVAL,
    OFF_LAYOUT, OFF_LEN, OFF_PID, OFF_START, SLOT, VERSION,
};

/// Why a snapshot cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum Unusable {
    /// No file, or not readable.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// Not a snapshot, or a truncated or corrupt one.
    #[error("not a kernstat snapshot (bad magic, or truncated)")]
    Format,
    /// A snapshot of a layout this kernstat does not know (a newer daemon).
    #[error("snapshot layout version {0}; this kernstat reads version {VERSION}")]
    Version(u32),
    /// The file (or its directory) belongs to someone who is neither this user nor root.
    #[error("{0} belongs to uid {1}, neither you (uid {2}) nor root; refusing to read it")]
    Owner(String, u32, u32),
    /// Its daemon is gone (no process of that pid and start time).
    #[error("its daemon (pid {0}) is gone")]
    Dead(u32),
}

fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// A client's side: maps the file, checks it, finds keys by binary search.
pub struct Reader {
    path: PathBuf,
    dir: OwnedFd,
    name: String,
    file: File,
    map: Map,
    /// guard::faults() when mapped: more since, and the mapping may hold zero pages.
    faults: u64,
    buf: Vec<u8>,
}

impl std::fmt::Debug for Reader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reader").field("path", &self.path).finish()
    }
}

/// Who may own a snapshot or its directory for this reader: itself, or root.
fn trusted(uid: u32) -> bool {
    uid == euid() || uid == 0
}

impl Reader {
    /// Maps the snapshot beside `socket`: the directory must belong to this user or
    /// root, and so must the file, a regular file (not a link) of a live daemon.
    pub fn beside(socket: &Path) -> Result<Reader, Unusable> {
        Reader::open(&socket.with_file_name("snapshot"))
    }

    /// Maps the snapshot at `path` (the same checks as [`Reader::beside`]).
    pub fn open(path: &Path) -> Result<Reader, Unusable> {
        let dir_path = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or(Unusable::Format)?
            .to_string();
        let dir = rustix::fs::openat(
            rustix::fs::CWD,
            dir_path,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(std::io::Error::from)?;
        let st = rustix::fs::fstat(&dir).map_err(std::io::Error::from)?;
        if !trusted(st.st_uid) {
            return Err(Unusable::Owner(
                dir_path.display().to_string(),
                st.st_uid,
                euid(),
            ));
        }
        Reader::open_in(path.to_path_buf(), dir, name)
    }

    fn open_in(path: PathBuf, dir: OwnedFd, name: String) -> Result<Reader, Unusable> {
        let fd = rustix::fs::openat(
            &dir,
            name.as_str(),
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(std::io::Error::from)?;
        let file = File::from(fd);
        let meta = file.metadata()?;
        if !meta.file_type().is_file() {
            return Err(Unusable::Format);
        }
        if !trusted(meta.uid()) {
            return Err(Unusable::Owner(
                path.display().to_string(),
                meta.uid(),
                euid(),
            ));
        }
        let len = meta.len() as usize;
        let faults = guard::faults();
        let map = Map::new(file.as_fd(), len, false).map_err(|_| Unusable::Format)?;
        if map.copy(0, 8).as_deref() != Some(&MAGIC[..]) {
            return Err(Unusable::Format);
        }
        let version = map.head32(8).load(Ordering::Relaxed);
        if version != VERSION {
            return Err(Unusable::Version(version));
        }
        let pid = map.head32(OFF_PID).load(Ordering::Relaxed);
        let start = map.head64(OFF_START).load(Ordering::Relaxed);
        if start_time(pid) != Some(start) {
            return Err(Unusable::Dead(pid));
        }
        let mut r = Reader {
            path,
            dir,
            name,
            file,
            map,
            faults,
            buf: Vec::with_capacity(256),
        };
        // The header's layout must fit the file (a file cut short is refused here, not
        // found out key by key).
        let len = r.map.len;
        let fits = r.in_layout_once(|map, _, _| {
            (map.head64(OFF_LEN).load(Ordering::Relaxed) as usize <= len).then_some(())
        });
        fits.ok_or(Unusable::Format)?;
        Ok(r)
    }

    /// As [`Reader::in_layout`] without re-mapping or re-opening.
    fn in_layout_once<T>(
        &mut self,
        f: impl Fn(&Map, usize, &mut Vec<u8>) -> Option<T>,
    ) -> Option<T> {
        for _ in 0..10_000 {
            let g = self.map.head64(OFF_LAYOUT).load(Ordering::Acquire);
            if !g.is_multiple_of(2) {
                std::thread::yield_now();
                continue;
            }
            let len = self.map.head64(OFF_LEN).load(Ordering::Relaxed) as usize;
            let count = self.map.head32(OFF_COUNT).load(Ordering::Relaxed) as usize;
            let fits = len <= self.map.len
                && count
                    .checked_mul(SLOT)
                    .and_then(|b| b.checked_add(HEADER))
                    .is_some_and(|end| end <= len);
            let out = if fits {
                f(&self.map, count, &mut self.buf)
            } else {
                None
            };
            fence(Ordering::Acquire);
            if guard::faults() != self.faults {
                return None;
            }
            if self.map.head64(OFF_LAYOUT).load(Ordering::Relaxed) == g {
                return out;
            }
        }
        None
    }

    /// Whether the file mapped is still the one in its directory, not marked closed,
    /// and its daemon still runs (a stat and a read of /proc/PID/stat): a long-lived
    /// reader checks this now and then, since a daemon killed and started again writes
    /// a new file that the old one knows nothing of.
    pub fn is_current(&self) -> bool {
        let there = rustix::fs::statat(
            &self.dir,
            self.name.as_str(),
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        );
        let (Ok(now), Ok(mapped)) = (there, self.file.metadata()) else {
            return false;
        };
        let pid = self.map.head32(OFF_PID).load(Ordering::Relaxed);
        (now.st_dev, now.st_ino) == (mapped.dev(), mapped.ino())
            && mapped.len()
                >= self
                    .map
                    .head64(OFF_LEN)
                    .load(Ordering::Relaxed)
                    .max(HEADER as u64)
            && self.map.head64(OFF_CLOSED).load(Ordering::Acquire) == 0
            && guard::faults() == self.faults
            && start_time(pid) == Some(self.map.head64(OFF_START).load(Ordering::Relaxed))
    }

    /// The daemon's sampling interval.
    pub fn interval_ms(&self) -> u32 {
        self.map.head32(OFF_INTERVAL).load(Ordering::Relaxed)
    }

    /// Opens the file in the directory again (it was replaced, closed or cut).
    fn reopen(&mut self) -> Option<()> {
        let dir = self.dir.try_clone().ok()?;
        *self = Reader::open_in(self.path.clone(), dir, self.name.clone()).ok()?;
        Some(())
    }

    /// Maps the whole file again (it grew past this mapping).
    fn remap(&mut self) -> Option<()> {
        let len = self.file.metadata().ok()?.len() as usize;
        if len <= self.map.len {
            return None;
        }
        self.faults = guard::faults();
        self.map = Map::new(self.file.as_fd(), len, false).ok()?;
        Some(())
    }

    /// `f` over a stable layout: retried while the writer rewrites it, re-mapped when
    /// it grew, re-opened when the file was closed or cut.
    fn in_layout<T>(&mut self, f: impl Fn(&Map, usize, &mut Vec<u8>) -> Option<T>) -> Option<T> {
        let mut reopened = false;
        for _ in 0..10_000 {
            if guard::faults() != self.faults
                || self.map.head64(OFF_CLOSED).load(Ordering::Acquire) != 0
            {
                if reopened {
                    return None;
                }
                self.reopen()?;
                reopened = true;
                continue;
            }
            let seq = self.map.head64(OFF_LAYOUT);
            let g = seq.load(Ordering::Acquire);
            if !g.is_multiple_of(2) {
                std::hint::spin_loop();
                std::thread::yield_now();
                continue;
            }
            let len = self.map.head64(OFF_LEN).load(Ordering::Relaxed) as usize;
            if len > self.map.len {
                self.remap()?;
                continue;
            }
            let count = self.map.head32(OFF_COUNT).load(Ordering::Relaxed) as usize;
            let fits = count
                .checked_mul(SLOT)
                .and_then(|b| b.checked_add(HEADER))
                .is_some_and(|end| end <= len);
            let out = if fits {
                f(&self.map, count, &mut self.buf)
            } else {
                None
            };
            fence(Ordering::Acquire);
            // A page that vanished under the read (the file was cut) read as zeros:
            // what was read is not the file's.
            if guard::faults() != self.faults {
                continue;
            }
            if self.map.head64(OFF_LAYOUT).load(Ordering::Relaxed) == g {
                return out;
            }
        }
        None
    }

    /// The value of a stored key.
    pub fn get(&mut self, key: &str) -> Option<Stored> {
        self.in_layout(|map, count, buf| {
            let i = find(map, count, key.as_bytes())?;
            read_slot(map, i, buf)
        })
    }

    /// When a stored key's value was computed (`updated_ns`), without copying the value:
    /// what a follower looks at between values (the bar's summary is kilobytes; copying
    /// it five times a second cost the bar 3.6× the CPU of a socket watch).
    pub fn updated_ns(&mut self, key: &str) -> Option<u64> {
        self.in_layout(|map, count, _| {
            let i = find(map, count, key.as_bytes())?;
            Some(map.u64(HEADER + i * SLOT + 32)?.load(Ordering::Acquire))
        })
    }
}

/// The index slot of `key` by binary search over `count` sorted keys.
fn find(map: &Map, count: usize, key: &[u8]) -> Option<usize> {
    let (mut lo, mut hi) = (0, count);
    while lo < hi {
        let mid = (lo + hi) / 2;
        let b = HEADER + mid * SLOT;
        let off = map.u32(b + 8)?.load(Ordering::Relaxed) as usize;
        let len = map.u32(b + 12)?.load(Ordering::Relaxed) as usize;
        match map.cmp_key(off, len, key)? {
            std::cmp::Ordering::Less => lo = mid + 1,
            std::cmp::Ordering::Greater => hi = mid,
            std::cmp::Ordering::Equal => return Some(mid),
        }
    }
    None
}
