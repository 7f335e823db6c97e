//! The daemon's side of the snapshot: one file, made once at start (as root, for a
//! system daemon, before it drops privileges) and written through its descriptor for the
//! daemon's life — values in place, a new layout in place under the layout seqlock, the
//! file grown with `ftruncate` when a layout needs room. Nothing is ever created or
//! renamed in the directory afterwards, so a system daemon's snapshot stays root's, and
//! nobody but root can change what every user's prompt reads from it.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{fence, Ordering};

use rustix::fs::{Mode, OFlags};

use super::{
    layout, now_ns, read_slot, slot_value, start_time, write_words, Map, Stored, HEADER, OFF_BEAT,
    OFF_CLOSED, OFF_COUNT, OFF_INTERVAL, OFF_LAYOUT, OFF_LEN, OFF_PID, OFF_START, SLOT,
};

/// The smallest file made (a daemon's machine keys fit; the layout grows from there).
const MIN_FILE: usize = 64 * 1024;

/// The daemon's side.
pub struct Writer {
    path: PathBuf,
    dir: OwnedFd,
    name: String,
    file: File,
    map: Map,
    /// Stored key -> index slot.
    index: HashMap<String, usize>,
    rebuilds: u64,
    closed: bool,
    /// SIGBUS faults absorbed when the mapping was made (more since: pages of it may
    /// be anonymous now, and it must be made again).
    faults: u64,
    interval_ms: u32,
    /// A rebuild found the file cut short (values may be lost: write them all again).
    was_cut: bool,
}

impl std::fmt::Debug for Writer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writer")
            .field("path", &self.path)
            .field("keys", &self.index.len())
            .finish()
    }
}

fn page(n: usize) -> usize {
    n.next_multiple_of(4096)
}

impl Writer {
    /// Makes an empty snapshot at `path` (mode `mode`), replacing whatever is there: a
    /// new file made beside it and renamed over the name, in a directory opened once.
    pub fn create(path: &Path, mode: u32, interval_ms: u32) -> io::Result<Writer> {
        let dir_path = path.parent().unwrap_or(Path::new("."));
        let dir_path = if dir_path.as_os_str().is_empty() {
            Path::new(".")
        } else {
            dir_path
        };
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "snapshot name"))?
            .to_string();
        let dir = rustix::fs::openat(
            rustix::fs::CWD,
            dir_path,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let pid = std::process::id();
        let tmp = format!("{name}.tmp{pid}");
        let _ = rustix::fs::unlinkat(&dir, tmp.as_str(), rustix::fs::AtFlags::empty());
        let fd = rustix::fs::openat(
            &dir,
            tmp.as_str(),
            OFlags::CREATE | OFlags::EXCL | OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(mode),
        )?;
        let made = (|| -> io::Result<(File, Map)> {
            // The mode asked for, whatever the umask.
            rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))?;
            let (mut image, _) = layout(&[])?;
            stamp_header(&mut image, pid, interval_ms);
            let size = page(image.len().max(MIN_FILE));
            image.resize(size, 0);
            let mut file = File::from(fd);
            file.write_all(&image)?;
            rustix::fs::renameat(&dir, tmp.as_str(), &dir, name.as_str())?;
            let map = Map::new(file.as_fd(), size, true)?;
            Ok((file, map))
        })();
        let (file, map) = match made {
            Ok(x) => x,
            Err(e) => {
                let _ = rustix::fs::unlinkat(&dir, tmp.as_str(), rustix::fs::AtFlags::empty());
                return Err(e);
            }
        };
        Ok(Writer {
            path: path.to_path_buf(),
            dir,
            name,
            file,
            map,
            index: HashMap::new(),
            rebuilds: 0,
            closed: false,
            faults: super::guard::faults(),
            interval_ms,
            was_cut: false,
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

    /// Stores `bytes` under `key` (a stored key, see [`super::stored_key`]).
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
    /// with one new layout for all the rest (new keys, longer values, removals) — a
    /// daemon starting, or a new git path arriving with thirty keys, costs one rebuild.
    pub fn apply(&mut self, changes: Vec<(String, Stored)>, gone: &[String]) -> io::Result<()> {
        let mut rest = Vec::new();
        for (k, v) in changes {
            match self.index.get(&k) {
                Some(&i)
                    if slot_value(&self.map, i).is_some_and(|(_, cap)| v.bytes.len() <= cap) =>
                {
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
        self.rebuild(&all)
    }

    /// Lays `entries` out anew in the same file, under the layout seqlock.
    fn rebuild(&mut self, entries: &[(String, Stored)]) -> io::Result<()> {
        let (image, index) = layout(entries)?;
        let size = self.file.metadata()?.len() as usize;
        let cut = self.map.len > size || super::guard::faults() != self.faults;
        self.was_cut |= cut;
        if image.len() > size || cut {
            // Room to grow by half again before the next growth (and a file someone
            // cut short made whole again).
            let want = page(
                (image.len() + image.len() / 2)
                    .max(MIN_FILE)
                    .max(self.map.len),
            );
            rustix::fs::ftruncate(&self.file, want as u64)?;
        }
        let size = self.file.metadata()?.len() as usize;
        if size != self.map.len || cut {
            self.faults = super::guard::faults();
            self.map = Map::new(self.file.as_fd(), size, true)?;
        }
        let layout_seq = self.map.head64(OFF_LAYOUT);
        let g = layout_seq.load(Ordering::Relaxed) | 1;
        layout_seq.store(g, Ordering::Relaxed);
        fence(Ordering::Release);
        write_words(&self.map, HEADER, &image[HEADER..]);
        self.map
            .head32(OFF_COUNT)
            .store(index.len() as u32, Ordering::Relaxed);
        self.map
            .head64(OFF_LEN)
            .store(image.len() as u64, Ordering::Relaxed);
        layout_seq.store(g + 1, Ordering::Release);
        self.index = index;
        self.rebuilds += 1;
        Ok(())
    }

    fn write_in_place(&self, i: usize, v: &Stored) {
        let Some((val_off, _)) = slot_value(&self.map, i) else {
            return;
        };
        let b = HEADER + i * SLOT;
        let seq = self.map.head64(b);
        let n = seq.load(Ordering::Relaxed);
        seq.store(n + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        write_words(&self.map, val_off, &v.bytes);
        self.map
            .head32(b + 24)
            .store(v.bytes.len() as u32, Ordering::Relaxed);
        self.map
            .head32(b + 28)
            .store(u32::from(v.error), Ordering::Relaxed);
        self.map
            .head64(b + 32)
            .store(v.updated_ns, Ordering::Relaxed);
        seq.store(n + 2, Ordering::Release);
    }

    /// Whether the file is no longer what this writer laid out (someone who may write
    /// it cut it short): then [`Writer::reset`] and write everything again.
    pub fn damaged(&self) -> bool {
        self.was_cut
            || super::guard::faults() != self.faults
            || self
                .file
                .metadata()
                .map_or(true, |m| (m.len() as usize) < self.map.len)
            || self.map.head64(OFF_LEN).load(Ordering::Relaxed) as usize > self.map.len
    }

    /// Makes the file whole and empty again (its values are to be written anew).
    pub fn reset(&mut self) -> io::Result<()> {
        let size = page(self.map.len.max(MIN_FILE));
        rustix::fs::ftruncate(&self.file, size as u64)?;
        self.faults = super::guard::faults();
        self.map = Map::new(self.file.as_fd(), size, true)?;
        let (mut image, index) = layout(&[])?;
        stamp_header(&mut image, std::process::id(), self.interval_ms);
        let layout_seq = self.map.head64(OFF_LAYOUT);
        let g = layout_seq.load(Ordering::Relaxed) | 1;
        layout_seq.store(g, Ordering::Relaxed);
        fence(Ordering::Release);
        write_words(&self.map, 0, &image[..OFF_LAYOUT]);
        write_words(&self.map, HEADER, &image[HEADER..]);
        layout_seq.store(g + 1, Ordering::Release);
        self.index = index;
        self.rebuilds += 1;
        self.was_cut = false;
        Ok(())
    }

    /// Layouts written since this writer was created (for tests and counts).
    pub fn rebuilds(&self) -> u64 {
        self.rebuilds
    }

    /// Records that the daemon published just now.
    pub fn beat(&self) {
        self.map.head64(OFF_BEAT).store(now_ns(), Ordering::Release);
    }

    /// Stored keys.
    pub fn len(&self) -> usize {
        self.index.len()
    }

    /// No keys.
    pub fn is_empty(&self) -> bool {
        self.index.is_empty()
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Marks the file dead (the daemon is stopping) and removes it where the daemon
    /// may (a system daemon's directory is root's: its file stays, marked closed).
    pub fn close(mut self) {
        self.close_now();
    }

    fn close_now(&mut self) {
        if self.closed {
            return;
        }
        self.closed = true;
        self.map.head64(OFF_CLOSED).store(1, Ordering::Release);
        // Only if the name is still ours.
        let mine = self.file.metadata().ok().map(|m| (m.dev(), m.ino()));
        let there = rustix::fs::statat(
            &self.dir,
            self.name.as_str(),
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )
        .ok()
        .map(|s| (s.st_dev, s.st_ino));
        if mine.is_some() && mine == there {
            let _ =
                rustix::fs::unlinkat(&self.dir, self.name.as_str(), rustix::fs::AtFlags::empty());
        }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.close_now();
    }
}

/// Fills in this daemon's pid, start time, interval and beat in a new image.
fn stamp_header(image: &mut [u8], pid: u32, interval_ms: u32) {
    let start = start_time(pid).unwrap_or(0);
    image[OFF_PID..OFF_PID + 4].copy_from_slice(&pid.to_ne_bytes());
    image[OFF_INTERVAL..OFF_INTERVAL + 4].copy_from_slice(&interval_ms.to_ne_bytes());
    image[OFF_START..OFF_START + 8].copy_from_slice(&start.to_ne_bytes());
    image[OFF_BEAT..OFF_BEAT + 8].copy_from_slice(&now_ns().to_ne_bytes());
}
