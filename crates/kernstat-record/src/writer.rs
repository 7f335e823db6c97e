//! Appending to an archive: one writer per directory (a lock held for the writer's
//! life: a second recorder is refused with one sentence naming the holder), one file
//! per hour and another within the hour when the current one passed its share of the
//! size budget or could not be appended to, and retention that never costs a frame.
//!
//! A crash can leave a torn last frame or a tail of zeros: the writer cuts the file
//! back to its last whole frame when it opens it again. A failed write (a full disk)
//! leaves nothing partial, and the next frame is a key frame. Retention runs after a
//! frame is written and never fails one: files whose hour ended longer ago than the age
//! limit go, then the oldest while the archive is over its size, but never the last
//! `floor` of history (a user cannot erase it by making the current hour large:
//! shared/security N2); when only that floor is left and the archive is still over its
//! size, the writer says so ([`Appended::over_budget`]) and the recorder stops adding to
//! it until it fits again.

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::Duration;

use rustix::fs::{FlockOperation, Mode, OFlags};

use crate::codec::{self, FileReader, FrameHead, FILE_HEADER};
use crate::frame::Frame;
use crate::names::{self, Place};

/// Format version written; a reader reads this and every older one.
pub const VERSION: u16 = 3;

/// A key frame at least this often (in frames): 5 minutes at the default 5 s.
pub const KEY_EVERY: u32 = 60;

/// How much the archive keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Retention {
    /// Files whose hour ended longer ago than this are deleted.
    pub max_age: Duration,
    /// Oldest files are deleted while the archive is larger than this, bytes.
    pub max_bytes: u64,
}

impl Retention {
    /// History never deleted for size: the last 24 hours (or all that is kept, if
    /// less).
    pub fn floor(&self) -> Duration {
        self.max_age.min(Duration::from_secs(24 * 3600))
    }

    /// The size one file may reach before the writer starts another within its hour:
    /// a 1/48 share of the budget, at least 1 MiB.
    pub fn part_bytes(&self) -> u64 {
        (self.max_bytes / 48).max(1 << 20)
    }
}

/// Why an archive cannot be written.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Another recorder holds the directory.
    #[error("{dir}: already recorded by {holder}; one recorder per archive (stop it, or record elsewhere)")]
    Locked {
        /// The archive.
        dir: PathBuf,
        /// Who holds it ("pid 123").
        holder: String,
    },
    /// I/O.
    #[error("{0}: {1}")]
    Io(PathBuf, io::Error),
}

/// What one append did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Appended {
    /// Bytes written (frame header and payload).
    pub bytes: u64,
    /// A key frame.
    pub key: bool,
    /// Files deleted by retention.
    pub deleted: u32,
    /// The archive is over its size with nothing left to delete but its floor.
    pub over_budget: bool,
}

/// Appends samples to an archive directory.
pub struct Writer {
    dir: PathBuf,
    dir_fd: OwnedFd,
    _lock: File,
    retention: Retention,
    file_mode: u32,
    /// The open file, its place and its length after the last whole frame.
    file: Option<(File, Place, u64)>,
    /// The previous sample's encoded bytes (the next delta's prefix) and the sample
    /// itself (its counters are what the next delta stores differences from); None: a
    /// key next.
    prev: Option<Vec<u8>>,
    prev_frame: Option<Frame>,
    since_key: u32,
    /// Bytes of the archive's files.
    total_bytes: u64,
    /// A note for the recorder's log (a file cut back, one started beside another).
    pub notes: Vec<String>,
}

impl Writer {
    /// Opens the archive directory (made if needed) and takes its lock.
    pub fn open(dir: &Path, retention: Retention, file_mode: u32) -> Result<Writer, OpenError> {
        let io = |e: io::Error| OpenError::Io(dir.to_path_buf(), e);
        std::fs::create_dir_all(dir).map_err(io)?;
        let dir_fd = rustix::fs::open(
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| io(e.into()))?;
        let lock_fd = rustix::fs::openat(
            &dir_fd,
            names::LOCK,
            OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(file_mode),
        )
        .map_err(|e| io(e.into()))?;
        if let Err(e) = rustix::fs::flock(&lock_fd, FlockOperation::NonBlockingLockExclusive) {
            if e == rustix::io::Errno::WOULDBLOCK {
                let mut buf = [0u8; 64];
                let n = rustix::io::pread(&lock_fd, &mut buf, 0).unwrap_or(0);
                let text = String::from_utf8_lossy(&buf[..n]).trim().to_string();
                let holder = if text.is_empty() {
                    "another process".to_string()
                } else {
                    format!("pid {text}")
                };
                return Err(OpenError::Locked {
                    dir: dir.to_path_buf(),
                    holder,
                });
            }
            return Err(io(e.into()));
        }
        let mut lock = File::from(lock_fd);
        let _ = lock.set_len(0);
        let _ = writeln!(lock, "{}", std::process::id());
        let mut w = Writer {
            dir: dir.to_path_buf(),
            dir_fd,
            _lock: lock,
            retention,
            file_mode,
            file: None,
            prev: None,
            prev_frame: None,
            since_key: 0,
            total_bytes: 0,
            notes: Vec::new(),
        };
        w.total_bytes = w.files().map_err(io)?.iter().map(|f| f.2).sum();
        Ok(w)
    }

    /// The archive's files, oldest first: (name, place, length).
    fn files(&self) -> io::Result<Vec<(String, Place, u64)>> {
        let mut v = Vec::new();
        for e in std::fs::read_dir(&self.dir)? {
            let e = e?;
            let Some(name) = e.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let Some(place) = names::parse(&name) else {
                continue;
            };
            // lstat: a link is counted as itself and removed as itself.
            let len = e.metadata().map(|m| m.len()).unwrap_or(0);
            v.push((name, place, len));
        }
        v.sort_by_key(|f| f.1);
        Ok(v)
    }

    fn create(&mut self, place: Place) -> io::Result<File> {
        let fd = rustix::fs::openat(
            &self.dir_fd,
            place.name().as_str(),
            OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_raw_mode(self.file_mode),
        )?;
        // The mode whatever the umask (a unit's UMask=0077 would leave a group out).
        rustix::fs::fchmod(&fd, Mode::from_raw_mode(self.file_mode))?;
        let mut f = File::from(fd);
        let mut h = [0u8; FILE_HEADER as usize];
        h[..6].copy_from_slice(codec::MAGIC);
        h[6..].copy_from_slice(&VERSION.to_le_bytes());
        f.write_all(&h)?;
        self.total_bytes += FILE_HEADER;
        Ok(f)
    }

    /// Opens the file for `place` to append: the hour's latest part when it is a
    /// current-version file of ours under its share (cut back to its last whole frame), else a
    /// new part beside it.
    fn open_file(&mut self, mut place: Place) -> io::Result<()> {
        let parts: Vec<(String, Place, u64)> = self
            .files()?
            .into_iter()
            .filter(|f| f.1.hour == place.hour)
            .collect();
        if let Some((name, last, len)) = parts.last().cloned() {
            place = last;
            match self.reopen(&name, len) {
                Ok(Some((f, end))) => {
                    self.file = Some((f, place, end));
                    self.prev = None;
                    return Ok(());
                }
                Ok(None) => {}
                Err(e) => self.notes.push(format!("{name}: {e}; writing beside it")),
            }
            place.part += 1;
        }
        let f = self.create(place)?;
        self.file = Some((f, place, FILE_HEADER));
        self.prev = None;
        Ok(())
    }

    /// An existing file to append to, cut after its last whole frame; None when it is
    /// not ours to append to (another version, damage before its end, over its share).
    fn reopen(&mut self, name: &str, len: u64) -> io::Result<Option<(File, u64)>> {
        let shown = self.dir.join(name);
        let r = FileReader::open_at(&self.dir_fd, name)?;
        if r.version()? != Some(VERSION) {
            self.notes.push(format!(
                "{}: not a version-{VERSION} archive file; left for readers, writing beside it",
                shown.display()
            ));
            return Ok(None);
        }
        let (heads, stop) = r.scan()?;
        let end = heads.last().map_or(FILE_HEADER, FrameHead::end);
        match stop {
            Some((_, "padding"))
            | Some((_, "a torn frame"))
            | Some((_, "a torn frame header"))
            | None => {}
            Some((at, why)) => {
                self.notes.push(format!(
                    "{}: {why} at byte {at}; left for readers, writing beside it",
                    shown.display()
                ));
                return Ok(None);
            }
        }
        if end >= self.retention.part_bytes() {
            return Ok(None);
        }
        let fd = rustix::fs::openat(
            &self.dir_fd,
            name,
            OFlags::RDWR | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let mut f = File::from(fd);
        if end < len {
            f.set_len(end)?;
            self.total_bytes = self.total_bytes.saturating_sub(len - end);
            self.notes.push(format!(
                "{}: cut back to its last whole frame ({} bytes of a torn frame or zeros)",
                shown.display(),
                len - end
            ));
        }
        use std::io::Seek;
        f.seek(io::SeekFrom::Start(end))?;
        Ok(Some((f, end)))
    }

    /// Appends one sample. On an error (a full disk) nothing partial stays in the file,
    /// the next sample is written as a key frame, and earlier ones are untouched.
    pub fn append(&mut self, frame: &Frame) -> io::Result<Appended> {
        let place = names::place_of(frame.time_unix_ns);
        let rotate = self
            .file
            .as_ref()
            .is_some_and(|(_, p, end)| p.hour == place.hour && *end >= self.retention.part_bytes());
        if rotate {
            let next = Place {
                part: self.file.as_ref().map_or(0, |f| f.1.part) + 1,
                ..place
            };
            self.file = None;
            let f = self.create(next)?;
            self.file = Some((f, next, FILE_HEADER));
            self.prev = None;
        } else if self
            .file
            .as_ref()
            .is_none_or(|(_, p, _)| p.hour != place.hour)
        {
            self.file = None;
            self.open_file(place)?;
        }
        let key = self.prev.is_none() || self.since_key + 1 >= KEY_EVERY;
        let mut written = match (&self.prev_frame, key) {
            (Some(before), false) => crate::delta::encode(frame, before),
            _ => frame.clone(),
        };
        crate::delta::pack_ended(&mut written);
        let raw = postcard::to_stdvec(&written).map_err(io::Error::other)?;
        if raw.len() > codec::MAX_FRAME as usize {
            return Err(io::Error::other(format!(
                "a sample of {} bytes is over the largest one written ({})",
                raw.len(),
                codec::MAX_FRAME
            )));
        }
        let payload = codec::compress(&raw, if key { None } else { self.prev.as_deref() })?;
        let mut head = FrameHead {
            offset: 0,
            len: payload.len() as u32,
            crc: 0,
            key,
            raw_len: raw.len() as u32,
            time: frame.time_unix_ns,
        }
        .encode();
        let crc = codec::crc(&head, &payload);
        head[4..8].copy_from_slice(&crc.to_le_bytes());
        let (f, _, end) = self.file.as_mut().expect("opened above");
        let written = f.write_all(&head).and_then(|()| f.write_all(&payload));
        if let Err(e) = written {
            // Cut back to the last whole frame; if even that fails, the readers and the
            // next open stop at the torn frame.
            let _ = f.set_len(*end);
            use std::io::Seek;
            let _ = f.seek(io::SeekFrom::Start(*end));
            self.prev = None;
            return Err(e);
        }
        let bytes = (head.len() + payload.len()) as u64;
        *end += bytes;
        self.total_bytes += bytes;
        self.since_key = if key { 0 } else { self.since_key + 1 };
        // The next delta's prefix: this frame's bytes; after a key frame, the bytes of
        // the key frame's differences from itself (every counter zero), which is what
        // an idle process's record in the next delta looks like (crate::delta).
        self.prev = Some(if key {
            crate::delta::template(frame)
        } else {
            raw
        });
        self.prev_frame = Some(frame.clone());
        let (deleted, over_budget) = match self.prune(frame.time_unix_ns) {
            Ok(r) => r,
            Err(e) => {
                self.notes.push(format!("retention: {e}"));
                (0, false)
            }
        };
        Ok(Appended {
            bytes,
            key,
            deleted,
            over_budget,
        })
    }

    /// Gives the lock file to the daemon's user (made while root; through its descriptor,
    /// so that a link put in its place cannot redirect the change).
    pub fn give_lock_to(&self, uid: u32, gid: u32) -> io::Result<()> {
        rustix::fs::fchown(
            &self._lock,
            Some(rustix::fs::Uid::from_raw(uid)),
            Some(rustix::fs::Gid::from_raw(gid)),
        )
        .map_err(io::Error::from)
    }

    /// The archive's size, bytes.
    pub fn total_bytes(&self) -> u64 {
        self.total_bytes
    }

    /// Deletes whole files: those whose hour ended longer ago than the age limit, then
    /// the oldest while the archive is over its size, never the file being written nor
    /// one of the last `floor` hours. Returns (files deleted, still over the size).
    pub fn prune(&mut self, now_unix_ns: u64) -> io::Result<(u32, bool)> {
        let current = self.file.as_ref().map(|(_, p, _)| *p);
        let max_age = self.retention.max_age.as_nanos() as u64;
        let floor_from = now_unix_ns.saturating_sub(self.retention.floor().as_nanos() as u64);
        let mut files = self.files()?;
        self.total_bytes = files.iter().map(|f| f.2).sum();
        files.retain(|f| Some(f.1) != current);
        let mut deleted = 0;
        for (name, place, len) in files {
            let too_old = place.hour_end() + max_age <= now_unix_ns;
            let too_big = self.total_bytes > self.retention.max_bytes;
            let in_floor = place.hour_end() > floor_from;
            if !too_old && (!too_big || in_floor) {
                if too_big {
                    continue;
                }
                break;
            }
            rustix::fs::unlinkat(&self.dir_fd, name.as_str(), rustix::fs::AtFlags::empty())?;
            self.total_bytes = self.total_bytes.saturating_sub(len);
            deleted += 1;
        }
        Ok((deleted, self.total_bytes > self.retention.max_bytes))
    }
}

/// An archive's size limit as people write it: `1G`, `500M`, `64K`, `1048576` (bytes,
/// powers of 1024), at least 1 MiB (an hour's file must fit).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let (num, scale) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1 << 30),
        Some('T' | 't') => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    let n: u64 = num
        .parse()
        .map_err(|_| format!("{s:?}: a size is a number with K, M, G or T (e.g. 1G)"))?;
    match n.checked_mul(scale) {
        Some(b) if b >= 1 << 20 => Ok(b),
        Some(_) => Err(format!("{s:?}: at least 1M (an hour's file must fit)")),
        None => Err(format!("{s:?}: too large")),
    }
}
