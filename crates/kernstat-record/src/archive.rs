//! Reading an archive: its files, its span, and a [`Cursor`] that stands on one frame
//! and steps to the next or the previous, keeping the frame before it (every rate a
//! replay shows is over the interval between the two). A step forward costs one
//! decompression; a step back is served from the decompressed frames the cursor keeps
//! of the file it is in (bounded), else decodes from the key frame before it. Memory is
//! a few frames, whatever the range: `dump` of a week and of ten seconds cost the same.
//!
//! Damage is reported (through the cursor's warnings) and skipped: a frame that fails
//! its checksum or does not decode costs the frames that depend on it, up to the next
//! key frame; a file that is not an archive's, or of a newer version, is skipped whole.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};

use crate::codec::{self, FileReader, FrameHead};
use crate::frame::Frame;
use crate::names::{self, Place};
use crate::writer::VERSION;

/// Decompressed frames a cursor keeps of the file it is in (those nearest the frame it
/// stands on), bytes at most: a step back then costs one or two decompressions instead
/// of a walk from the key frame. Fixed, whatever the files declare (a reader's memory
/// stays within ~64 MiB on a hostile archive: docs/security.md).
const KEEP_BYTES: usize = 16 << 20;

/// Why an archive cannot be read.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// I/O on the directory.
    #[error("{0}: {1}")]
    Io(PathBuf, io::Error),
    /// Not a directory.
    #[error("{0}: not a directory")]
    NotDirectory(PathBuf),
    /// Nothing recorded.
    #[error("{0}: no recorded samples")]
    Empty(PathBuf),
}

/// Why `--at` found no frame.
#[derive(Debug, thiserror::Error)]
pub enum SeekError {
    /// The archive holds nothing readable.
    #[error(transparent)]
    Read(#[from] ReadError),
    /// The time is outside what the archive holds, or too far from any frame.
    #[error("{asked}: {why}; the archive {dir} holds {first} to {last} (--nearest takes the closest sample anyway)")]
    Outside {
        /// The time asked, as shown.
        asked: String,
        /// Before, after, or in a gap.
        why: String,
        /// The archive.
        dir: String,
        /// Its first and last frames, as shown.
        first: String,
        /// See `first`.
        last: String,
    },
}

/// A readable archive directory.
pub struct Archive {
    dir: PathBuf,
    dir_fd: OwnedFd,
}

/// One file of the archive.
#[derive(Clone, Debug)]
struct FileEntry {
    name: String,
    place: Place,
}

/// A file's frames, once scanned.
struct Loaded {
    index: usize,
    reader: FileReader,
    version: u16,
    heads: Vec<FrameHead>,
    /// Frames kept (their bytes, the frame, what they cost), by index, and the cost.
    kept: BTreeMap<usize, (Vec<u8>, Frame, usize)>,
    kept_bytes: usize,
}

impl Archive {
    /// The archive in `dir` (which must be a directory).
    pub fn open(dir: &Path) -> Result<Archive, ReadError> {
        let dir_fd = rustix::fs::open(
            dir,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            rustix::io::Errno::NOTDIR => ReadError::NotDirectory(dir.to_path_buf()),
            e => ReadError::Io(dir.to_path_buf(), e.into()),
        })?;
        Ok(Archive {
            dir: dir.to_path_buf(),
            dir_fd,
        })
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn files(&self) -> Result<Vec<FileEntry>, ReadError> {
        let io = |e: io::Error| ReadError::Io(self.dir.clone(), e);
        let mut v = Vec::new();
        for e in std::fs::read_dir(&self.dir).map_err(io)? {
            let e = e.map_err(io)?;
            let Some(name) = e.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if let Some(place) = names::parse(&name) {
                v.push(FileEntry { name, place });
            }
        }
        v.sort_by_key(|f| f.place);
        Ok(v)
    }

    /// A cursor over the archive, on no frame yet (it holds the directory open itself).
    pub fn cursor(&self) -> Result<Cursor, ReadError> {
        let dir_fd = rustix::io::fcntl_dupfd_cloexec(&self.dir_fd, 0)
            .map_err(|e| ReadError::Io(self.dir.clone(), e.into()))?;
        Ok(Cursor {
            archive: Archive {
                dir: self.dir.clone(),
                dir_fd,
            },
            files: self.files()?,
            file: None,
            pos: None,
            raw: None,
            cur: None,
            before: None,
            warnings: Vec::new(),
            said: std::collections::HashSet::new(),
            machine_only: false,
        })
    }

    /// The times of the first and the last readable frame (None: no frame).
    pub fn span(&self) -> Result<Option<(u64, u64)>, ReadError> {
        let mut c = self.cursor()?;
        let first = c.first_time();
        let last = c.last_time();
        Ok(first.zip(last))
    }

    /// The archive's size, bytes (its files).
    pub fn size(&self) -> u64 {
        self.files()
            .unwrap_or_default()
            .iter()
            .filter_map(|f| std::fs::symlink_metadata(self.dir.join(&f.name)).ok())
            .map(|m| m.len())
            .sum()
    }
}

/// Stands on one frame of an archive; steps forward and back.
pub struct Cursor {
    archive: Archive,
    files: Vec<FileEntry>,
    file: Option<Loaded>,
    /// (file index, frame index) of the current frame.
    pos: Option<(usize, usize)>,
    /// The current frame's decompressed payload (the next delta's prefix).
    raw: Option<Vec<u8>>,
    cur: Option<Frame>,
    before: Option<Frame>,
    /// What was found damaged or skipped, in words (taken by the caller to show); each
    /// thing once, however often the cursor passes it.
    pub warnings: Vec<String>,
    said: std::collections::HashSet<String>,
    /// Decode frames without their processes, ended processes and groups.
    machine_only: bool,
}

impl Cursor {
    /// The same cursor reading every frame without its processes, ended processes and
    /// control groups (their numbers in [`Frame::omitted`]): what a timeline needs, at a
    /// fraction of the cost (docs/measured.md, `## kernstat view`). A delta frame of this
    /// format is parsed past those lists without allocating for them; a key frame, or a
    /// frame of an older format, is decoded whole and then stripped (the first delta after
    /// a key is compressed against the key's processes).
    pub fn machine_only(mut self) -> Cursor {
        self.machine_only = true;
        self
    }

    /// The frame the cursor stands on.
    pub fn current(&self) -> Option<&Frame> {
        self.cur.as_ref()
    }

    fn warn(&mut self, what: String) {
        if self.said.insert(what.clone()) {
            self.warnings.push(what);
        }
    }

    /// The archive it reads.
    pub fn archive(&self) -> &Archive {
        &self.archive
    }

    /// The frame just before it (None: the first of the archive, or after damage): the
    /// start of the current frame's interval.
    pub fn before(&self) -> Option<&Frame> {
        self.before.as_ref()
    }

    /// Loads file `index` (its frame headers; files that cannot be read are reported
    /// and skipped: None).
    fn load(&mut self, index: usize) -> Option<()> {
        if self.file.as_ref().is_some_and(|l| l.index == index) {
            return Some(());
        }
        let f = self.files.get(index)?.clone();
        let shown = self.archive.dir.join(&f.name);
        let newest = index + 1 == self.files.len();
        let loaded = (|| -> io::Result<Result<Loaded, String>> {
            let reader = FileReader::open_at(&self.archive.dir_fd, &f.name)?;
            let version = match reader.version()? {
                None => {
                    return Ok(Err(format!(
                        "{}: not a kernstat archive file (no KSREC header)",
                        shown.display()
                    )))
                }
                Some(v) if v > VERSION => {
                    return Ok(Err(format!(
                        "{}: written by a newer kernstat (archive format {v}; this kernstat reads up to {VERSION}): upgrade kernstat to read it",
                        shown.display()
                    )))
                }
                Some(v) => v,
            };
            let (heads, stop) = reader.scan()?;
            if let Some((at, why)) = stop {
                // The newest file's torn end may be a frame being written; zeros are
                // what a crash leaves after an extension: neither is damage worth a
                // warning beyond one line.
                let quiet = (newest && why.starts_with("a torn")) || why == "padding";
                if !quiet {
                    self.warn(format!(
                        "{}: {why} at byte {at}; the samples before it are read, the rest of the file is skipped",
                        shown.display()
                    ));
                } else if why == "padding" {
                    self.warn(format!(
                        "{}: {} bytes of zeros after byte {at} (a crash's tail): ignored",
                        shown.display(),
                        reader.len - at
                    ));
                }
            }
            Ok(Ok(Loaded {
                index,
                reader,
                version,
                heads,
                kept: BTreeMap::new(),
                kept_bytes: 0,
            }))
        })();
        match loaded {
            Ok(Ok(l)) => {
                self.file = Some(l);
                Some(())
            }
            Ok(Err(why)) => {
                self.warn(why);
                None
            }
            Err(e) => {
                self.warn(format!("{}: {e}", shown.display()));
                None
            }
        }
    }

    /// Frame `j` of the loaded file, given the frame before it (the prefix of a delta,
    /// and its full counters, which a delta stores differences from): the prefix of the
    /// frame after it, and the full frame. None: damaged (said in the warnings).
    /// `keep`: keep both for later random access (stepping back then decodes one or two
    /// frames instead of walking from the key frame); a forward stream keeps nothing, so
    /// that its memory does not grow with the range it reads.
    fn frame_at(
        &mut self,
        j: usize,
        before: Option<(&[u8], &Frame)>,
        keep: bool,
    ) -> Option<(Vec<u8>, Frame)> {
        let l = self.file.as_mut()?;
        if let Some((raw, frame, _)) = l.kept.get(&j) {
            return Some((raw.clone(), frame.clone()));
        }
        let head = *l.heads.get(j)?;
        let version = l.version;
        let shown = self.archive.dir.join(&self.files[l.index].name);
        let payload = match l.reader.payload(&head) {
            Ok(Ok(p)) => p,
            Ok(Err(why)) => {
                self.warn(format!(
                    "{}: {why} at byte {}; skipped, with the samples that depend on it",
                    shown.display(),
                    head.offset
                ));
                return None;
            }
            Err(e) => {
                self.warn(format!("{}: {e}", shown.display()));
                return None;
            }
        };
        let before = match (head.key, before) {
            (true, _) => None,
            (false, Some(b)) => Some(b),
            // A delta without the frame before it (after damage): not readable.
            (false, None) => return None,
        };
        let raw = match codec::decompress(&payload, before.map(|b| b.0), head.raw_len) {
            Ok(raw) => raw,
            Err(e) => {
                self.warn(format!(
                    "{}: the sample at byte {} cannot be decompressed ({e}); skipped",
                    shown.display(),
                    head.offset
                ));
                return None;
            }
        };
        let parsed = if version == 1 {
            crate::v1::decode(&raw)
        } else if version == 2 {
            crate::v2::decode(&raw)
        } else if self.machine_only && !head.key {
            crate::frame::machine_only::decode(&raw)
        } else {
            postcard::from_bytes::<Frame>(&raw).map_err(|e| e.to_string())
        };
        let parsed = parsed.map(|mut f| {
            if version >= 2 {
                crate::delta::unpack_ended(&mut f);
            }
            f
        });
        let mut frame = match (parsed, before) {
            (Ok(f), Some((_, b))) if version >= 2 => crate::delta::decode(f, b),
            (Ok(f), _) => f,
            (Err(e), _) => {
                self.warn(format!(
                    "{}: a sample does not parse ({e}); skipped",
                    shown.display()
                ));
                return None;
            }
        };
        // The next delta's prefix, as the writer made it: after a key frame of format 2,
        // the key frame's differences from itself (taken before cleaning the text, as
        // the writer had it).
        let raw = if head.key && version == 2 {
            crate::v2::template(&frame)
        } else if head.key && version >= 3 {
            crate::delta::template(&frame)
        } else {
            raw
        };
        if self.machine_only {
            frame.strip();
        }
        frame.sanitize();
        if keep {
            // What a kept frame costs: its bytes, and its decoded form (about twice).
            let cost = raw.len() * 3;
            let l = self.file.as_mut().expect("loaded");
            if cost <= KEEP_BYTES {
                // Room made by dropping those farthest from this one.
                while l.kept_bytes + cost > KEEP_BYTES {
                    let far = *l
                        .kept
                        .keys()
                        .max_by_key(|&&k| k.abs_diff(j))
                        .expect("not empty");
                    let dropped = l.kept.remove(&far).expect("present");
                    l.kept_bytes -= dropped.2;
                }
                l.kept_bytes += cost;
                l.kept.insert(j, (raw.clone(), frame.clone(), cost));
            }
        }
        Some((raw, frame))
    }

    /// Stands on frame `j` of file `index`, decoding from the key frame before it (or
    /// the nearest frame kept); the frame before it becomes `before` when it decodes
    /// too. False: not readable.
    fn stand(&mut self, index: usize, j: usize) -> bool {
        if self.load(index).is_none() {
            return false;
        }
        let heads = self.file.as_ref().expect("loaded").heads.clone();
        if j >= heads.len() {
            return false;
        }
        // From the key frame of the frame before (its `before`), or of this one; or from
        // the latest frame kept between it and the frame before.
        let key_of = |x: usize| heads[..=x].iter().rposition(|h| h.key).unwrap_or(0);
        let mut start = if j > 0 { key_of(j - 1) } else { j };
        if j > 0 {
            let kept = self
                .file
                .as_ref()
                .expect("loaded")
                .kept
                .range(start..j)
                .next_back();
            if let Some((&k, _)) = kept {
                start = k;
            }
        }
        let mut prev: Option<(Vec<u8>, Frame)> = None;
        for k in start..=j {
            let got = self.frame_at(k, prev.as_ref().map(|(r, f)| (r.as_slice(), f)), true);
            if k == j {
                let Some((raw, frame)) = got else {
                    return false;
                };
                self.before = match prev.take() {
                    Some((_, f)) if j > 0 => Some(f),
                    _ => self.before_from_earlier(index, j),
                };
                self.cur = Some(frame);
                self.raw = Some(raw);
                self.pos = Some((index, j));
                return true;
            }
            prev = got;
        }
        false
    }

    /// The last frame of file `index` (decoded from its last key frame), or None.
    fn last_of(&mut self, index: usize) -> Option<Frame> {
        self.load(index)?;
        let heads = self.file.as_ref().expect("loaded").heads.clone();
        let key = heads.iter().rposition(|h| h.key)?;
        let mut prev: Option<(Vec<u8>, Frame)> = None;
        for k in key..heads.len() {
            prev = self.frame_at(k, prev.as_ref().map(|(r, f)| (r.as_slice(), f)), false);
            prev.as_ref()?;
        }
        prev.map(|(_, f)| f)
    }

    /// For the first frame of a file: the last frame of the file before, when it is the
    /// previous part or hour (its interval crosses the file boundary).
    fn before_from_earlier(&mut self, index: usize, j: usize) -> Option<Frame> {
        if j != 0 || index == 0 {
            return None;
        }
        let saved = self.file.take();
        let earlier = self.last_of(index - 1);
        self.file = saved;
        earlier
    }

    /// Moves to the next frame (false: none).
    pub fn forward(&mut self) -> bool {
        let Some((i, j)) = self.pos else {
            return self.first();
        };
        let n = self
            .file
            .as_ref()
            .filter(|l| l.index == i)
            .map(|l| l.heads.len());
        if let Some(n) = n {
            if j + 1 < n {
                let raw = self.raw.take();
                let cur = self.cur.take();
                let before = raw.as_deref().zip(cur.as_ref());
                match self.frame_at(j + 1, before, false) {
                    Some((raw, frame)) => {
                        self.before = cur;
                        self.cur = Some(frame);
                        self.raw = Some(raw);
                        self.pos = Some((i, j + 1));
                        return true;
                    }
                    None => {
                        self.raw = raw;
                        self.cur = cur;
                        // Damaged: on to the next key frame in this file, else the next file.
                        let heads = self.file.as_ref().expect("loaded").heads.clone();
                        if let Some(k) = (j + 2..heads.len()).find(|&k| heads[k].key) {
                            let standing = self.stand(i, k);
                            if standing {
                                self.before = None;
                            }
                            return standing;
                        }
                    }
                }
            }
        }
        for k in i + 1..self.files.len() {
            if self.load(k).is_none() {
                continue;
            }
            // The next file starts with a key frame; its interval starts at the frame
            // the cursor stands on (when that decoded).
            if let Some((raw, frame)) = self.frame_at(0, None, false) {
                self.before = self.cur.take();
                self.cur = Some(frame);
                self.raw = Some(raw);
                self.pos = Some((k, 0));
                return true;
            }
            if self.stand(k, 0) {
                return true;
            }
        }
        false
    }

    /// Moves to the previous frame (false: none).
    pub fn back(&mut self) -> bool {
        let Some((i, j)) = self.pos else {
            return false;
        };
        if j > 0 {
            return self.stand(i, j - 1);
        }
        for k in (0..i).rev() {
            if self.load(k).is_some() {
                let n = self.file.as_ref().map_or(0, |l| l.heads.len());
                if n > 0 && self.stand(k, n - 1) {
                    return true;
                }
            }
        }
        false
    }

    /// Moves to the first frame of the archive.
    pub fn first(&mut self) -> bool {
        for k in 0..self.files.len() {
            if self.load(k).is_some() && self.stand(k, 0) {
                self.before = None;
                return true;
            }
        }
        false
    }

    /// The time of the archive's first frame, reading headers only.
    fn first_time(&mut self) -> Option<u64> {
        for k in 0..self.files.len() {
            if self.load(k).is_some() {
                if let Some(h) = self.file.as_ref().and_then(|l| l.heads.first()) {
                    return Some(h.time);
                }
            }
        }
        None
    }

    /// The time of its last frame, reading headers only.
    fn last_time(&mut self) -> Option<u64> {
        for k in (0..self.files.len()).rev() {
            if self.load(k).is_some() {
                if let Some(h) = self.file.as_ref().and_then(|l| l.heads.last()) {
                    return Some(h.time);
                }
            }
        }
        None
    }

    /// Stands on the first frame at or after `t` (false: none).
    pub fn seek_from(&mut self, t: u64) -> bool {
        let start = self
            .files
            .iter()
            .rposition(|f| f.place.hour <= t)
            .unwrap_or(0);
        for k in start..self.files.len() {
            if self.load(k).is_none() {
                continue;
            }
            let heads = &self.file.as_ref().expect("loaded").heads;
            if let Some(j) = heads.iter().position(|h| h.time >= t) {
                if self.stand(k, j) {
                    return true;
                }
            }
        }
        false
    }

    /// The frame nearest to `t` (headers of the files around it compared), and how far
    /// it is from `t`, ns. None: no readable frame.
    pub fn seek_nearest(&mut self, t: u64) -> Option<u64> {
        let holding = self.files.iter().rposition(|f| f.place.hour <= t);
        let mut candidates: Vec<usize> = match holding {
            Some(h) => (h.saturating_sub(1)..(h + 2).min(self.files.len())).collect(),
            None => (0..self.files.len().min(2)).collect(),
        };
        // Nothing readable around t: every file, newest first.
        candidates.extend((0..self.files.len()).rev());
        let mut best: Option<(u64, usize, usize)> = None;
        let mut looked = std::collections::HashSet::new();
        for k in candidates {
            if !looked.insert(k) {
                continue;
            }
            if best.is_some() && looked.len() > 3 {
                break;
            }
            if self.load(k).is_none() {
                continue;
            }
            let heads = &self.file.as_ref().expect("loaded").heads;
            if let Some((j, h)) = heads
                .iter()
                .enumerate()
                .min_by_key(|(_, h)| h.time.abs_diff(t))
            {
                let d = h.time.abs_diff(t);
                if best.is_none_or(|b| d < b.0) {
                    best = Some((d, k, j));
                }
            }
        }
        let (d, k, j) = best?;
        if self.stand(k, j) {
            return Some(d);
        }
        // The nearest does not decode: the next readable one after it.
        self.forward()
            .then(|| self.cur.as_ref().map_or(0, |f| f.time_unix_ns.abs_diff(t)))
    }

    /// Stands on the frame at `t` as `--at` asks for it: refused with one sentence that
    /// names the archive's span when `t` is outside it, or farther than [`tolerance`]
    /// from any frame (a gap), unless `nearest`. Ok: how far the frame is from `t`, ns.
    pub fn seek_at(&mut self, t: u64, nearest: bool) -> Result<u64, SeekError> {
        let dir = self.archive.dir.display().to_string();
        let (Some(first), Some(last)) = (self.first_time(), self.last_time()) else {
            return Err(ReadError::Empty(self.archive.dir.clone()).into());
        };
        let Some(d) = self.seek_nearest(t) else {
            return Err(ReadError::Empty(self.archive.dir.clone()).into());
        };
        let spacing = match (&self.before, &self.cur) {
            (Some(b), Some(c)) => c.time_unix_ns.saturating_sub(b.time_unix_ns),
            _ => 0,
        };
        let allowed = tolerance(spacing);
        if nearest || d <= allowed {
            return Ok(d);
        }
        let why = if t < first {
            "before the archive begins".to_string()
        } else if t > last {
            "after its last sample".to_string()
        } else {
            format!(
                "no sample within {} of it (the recorder was not running)",
                crate::time::span_text(allowed)
            )
        };
        Err(SeekError::Outside {
            asked: crate::time::local_stamp(t),
            why,
            dir,
            first: crate::time::local_stamp(first),
            last: crate::time::local_stamp(last),
        })
    }
}

/// How far from any frame a time asked may be before `--at` refuses it: three of the
/// recorder's intervals (the spacing of the frames around it), at least 30 s.
pub fn tolerance(spacing_ns: u64) -> u64 {
    spacing_ns.saturating_mul(3).max(30_000_000_000)
}
