//! The flight recorder's archive: what `kernstat daemon --record DIR` writes and every
//! `--at` view and `kernstat dump` reads. The format is in docs/recorder.md; in short:
//!
//! - one file per UTC hour, `YYYYMMDDTHH.ksr`, starting with an 8-byte header
//!   (`KSREC`, a NUL, the format version as a little-endian u16);
//! - then frames, appended: a 24-byte frame header (payload length u32, CRC-32 of
//!   everything after the checksum u32, kind u8, 7 bytes zero, sample time u64 in ns
//!   since the Unix epoch), then the payload: one sample ([`Frame`]) as JSON, zstd
//!   compressed; a *key* frame alone, a *delta* frame with the previous sample's JSON
//!   as zstd's prefix (its long matches are what did not change: the delta encoding);
//! - a key frame starts every file, follows any failed write, and comes every
//!   [`KEY_EVERY`] frames, so a damaged frame costs at most the frames up to the next
//!   key and replaying any moment decodes at most that many.
//!
//! A crash can leave only a torn last frame: the writer truncates it away when it opens
//! the file again; readers stop at it. Retention deletes whole files, oldest first.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use kernstat_model::record::Frame;

pub mod locate;
pub mod time;

/// Format version written; a reader reads this and every older one.
pub const VERSION: u16 = 1;
/// The file header's first six bytes.
pub const MAGIC: &[u8; 6] = b"KSREC\0";
/// Bytes before the first frame.
pub const FILE_HEADER: usize = 8;
/// Bytes of a frame header.
pub const FRAME_HEADER: usize = 24;
/// A key frame at least this often (in frames): 5 minutes at the default 5 s.
pub const KEY_EVERY: u32 = 60;
/// No sample is this large; a length beyond it is damage, not data.
const MAX_PAYLOAD: u32 = 256 << 20;
/// zstd level 1: on a 300-process sample delta it gave 373 bytes in 41 µs where level
/// 3 (zstd's default) gave 467 bytes in 67 µs (measured here, fresh context each).
const LEVEL: i32 = 1;

/// The largest zstd window a frame may need: what decoders accept by default (128 MiB).
const MAX_WINDOW_LOG: u32 = 27;

const KIND_KEY: u8 = 0;
const KIND_DELTA: u8 = 1;

/// What can go wrong reading an archive.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// I/O on a file.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// Not an archive file.
    #[error("{0}: not a kernstat archive file (no KSREC header)")]
    NotArchive(PathBuf),
    /// Written by a newer kernstat.
    #[error(
        "{path}: written by a newer kernstat (archive format {version}; this kernstat reads up to {VERSION}): upgrade kernstat to read it"
    )]
    Newer {
        /// The file.
        path: PathBuf,
        /// Its version.
        version: u16,
    },
}

/// The file a sample taken at `unix_ns` goes to.
pub fn file_name(unix_ns: u64) -> String {
    let ts =
        jiff::Timestamp::from_nanosecond(unix_ns as i128).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    ts.strftime("%Y%m%dT%H.ksr").to_string()
}

/// Whether a directory entry's name is one an archive holds (its hourly files and its
/// lock): what a recorder may take over with the directory.
pub fn is_archive_entry(name: &str) -> bool {
    file_hour(name).is_some() || name == "lock"
}

/// The hour a file holds, as Unix ns of its start (None: not an archive file name).
pub fn file_hour(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".ksr")?;
    if stem.len() != 11 {
        return None;
    }
    let dt = jiff::civil::DateTime::strptime("%Y%m%dT%H", stem).ok()?;
    let ts = dt.to_zoned(jiff::tz::TimeZone::UTC).ok()?.timestamp();
    u64::try_from(ts.as_nanosecond()).ok()
}

const HOUR_NS: u64 = 3_600_000_000_000;

/// How much the archive keeps.
#[derive(Clone, Copy, Debug)]
pub struct Retention {
    /// Files whose hour ended longer ago than this are deleted.
    pub max_age: Duration,
    /// Oldest files are deleted while the archive is larger than this, bytes.
    pub max_bytes: u64,
}

/// Appends samples to an archive directory.
pub struct Writer {
    dir: PathBuf,
    retention: Retention,
    /// Mode of new files (0600, or 0640 for an archive shared with a group).
    file_mode: u32,
    /// The open file, its name and its length after the last whole frame.
    file: Option<(File, String, u64)>,
    /// The previous sample's JSON (the next delta's prefix); None: next is a key.
    prev: Option<Vec<u8>>,
    since_key: u32,
    /// Bytes of the archive's files, kept up to date as frames are added.
    total_bytes: u64,
    json: Vec<u8>,
    out: Vec<u8>,
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
}

impl Writer {
    /// Opens (making it if needed) the archive directory.
    pub fn open(dir: &Path, retention: Retention, file_mode: u32) -> io::Result<Writer> {
        fs::create_dir_all(dir)?;
        let mut w = Writer {
            dir: dir.to_path_buf(),
            retention,
            file_mode,
            file: None,
            prev: None,
            since_key: 0,
            total_bytes: 0,
            json: Vec::with_capacity(1 << 16),
            out: Vec::with_capacity(1 << 16),
        };
        w.total_bytes = w.files()?.iter().map(|(_, _, len)| len).sum();
        Ok(w)
    }

    /// The archive's files, oldest first: (path, hour start, length).
    fn files(&self) -> io::Result<Vec<(PathBuf, u64, u64)>> {
        let mut v = Vec::new();
        for e in fs::read_dir(&self.dir)? {
            let e = e?;
            let name = e.file_name();
            let Some(hour) = name.to_str().and_then(file_hour) else {
                continue;
            };
            let len = e.metadata().map(|m| m.len()).unwrap_or(0);
            v.push((e.path(), hour, len));
        }
        v.sort_by_key(|f| f.1);
        Ok(v)
    }

    /// Opens `name` for appending: a new file gets the header; an existing one is cut
    /// after its last whole frame (a crash's torn frame goes).
    fn open_file(&mut self, name: &str) -> io::Result<()> {
        let path = self.dir.join(name);
        let mut f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode_bits(self.file_mode)
            .open(&path)?;
        let len = f.metadata()?.len();
        let end = if len == 0 {
            // The mode whatever the umask (a unit's UMask=0077 would leave a group out).
            use std::os::unix::fs::PermissionsExt;
            f.set_permissions(fs::Permissions::from_mode(self.file_mode))?;
            let mut h = [0u8; FILE_HEADER];
            h[..6].copy_from_slice(MAGIC);
            h[6..].copy_from_slice(&VERSION.to_le_bytes());
            f.write_all(&h)?;
            self.total_bytes += FILE_HEADER as u64;
            FILE_HEADER as u64
        } else {
            let mut bytes = Vec::with_capacity(len as usize);
            f.read_to_end(&mut bytes)?;
            match header_version(&bytes) {
                Some(VERSION) => {}
                _ => {
                    // Not ours to append to (another version, or damage): keep it for
                    // the readers and write beside it.
                    return Err(io::Error::other(format!(
                        "{}: not a version-{VERSION} archive file; not appending to it",
                        path.display()
                    )));
                }
            }
            let end = scan(&bytes).whole_end as u64;
            if end < len {
                f.set_len(end)?;
                self.total_bytes = self.total_bytes.saturating_sub(len - end);
            }
            end
        };
        f.seek(SeekFrom::Start(end))?;
        self.file = Some((f, name.to_string(), end));
        self.prev = None;
        Ok(())
    }

    /// Appends one sample. On an error (a full disk) nothing partial stays in the file,
    /// the next sample is written as a key frame, and earlier ones are untouched.
    pub fn append(&mut self, frame: &Frame) -> io::Result<Appended> {
        let name = file_name(frame.time_unix_ns);
        let mut deleted = 0;
        if self.file.as_ref().is_none_or(|(_, n, _)| *n != name) {
            self.file = None;
            self.open_file(&name)?;
            deleted += self.prune(frame.time_unix_ns)?;
        }
        self.json.clear();
        serde_json::to_writer(&mut self.json, frame).map_err(io::Error::other)?;
        let key = self.prev.is_none() || self.since_key + 1 >= KEY_EVERY;
        self.out.clear();
        self.out.resize(FRAME_HEADER, 0);
        compress(
            &self.json,
            if key { None } else { self.prev.as_deref() },
            &mut self.out,
        )?;
        let payload_len = (self.out.len() - FRAME_HEADER) as u32;
        self.out[0..4].copy_from_slice(&payload_len.to_le_bytes());
        self.out[8] = if key { KIND_KEY } else { KIND_DELTA };
        self.out[16..24].copy_from_slice(&frame.time_unix_ns.to_le_bytes());
        let crc = crc32fast::hash(&self.out[8..]);
        self.out[4..8].copy_from_slice(&crc.to_le_bytes());
        let (f, _, end) = self.file.as_mut().expect("opened above");
        if let Err(e) = f.write_all(&self.out) {
            // Cut back to the last whole frame; if even that fails, the readers and the
            // next open stop at the torn frame.
            let _ = f.set_len(*end);
            let _ = f.seek(SeekFrom::Start(*end));
            self.prev = None;
            return Err(e);
        }
        *end += self.out.len() as u64;
        self.total_bytes += self.out.len() as u64;
        self.since_key = if key { 0 } else { self.since_key + 1 };
        match self.prev.as_mut() {
            Some(p) => {
                p.clear();
                p.extend_from_slice(&self.json);
            }
            None => self.prev = Some(self.json.clone()),
        }
        if self.total_bytes > self.retention.max_bytes {
            deleted += self.prune(frame.time_unix_ns)?;
        }
        Ok(Appended {
            bytes: self.out.len() as u64,
            key,
            deleted,
        })
    }

    /// Deletes whole files: those older than the age limit, then the oldest while the
    /// archive is over its size (never the file being written).
    pub fn prune(&mut self, now_unix_ns: u64) -> io::Result<u32> {
        let current = self.file.as_ref().map(|(_, n, _)| self.dir.join(n));
        let max_age = self.retention.max_age.as_nanos() as u64;
        let mut files = self.files()?;
        self.total_bytes = files.iter().map(|f| f.2).sum();
        let mut deleted = 0;
        files.retain(|f| Some(&f.0) != current.as_ref());
        for (path, hour, len) in files {
            let too_old = hour + HOUR_NS + max_age <= now_unix_ns;
            let too_big = self.total_bytes > self.retention.max_bytes;
            if !too_old && !too_big {
                break;
            }
            fs::remove_file(&path)?;
            self.total_bytes -= len;
            deleted += 1;
        }
        Ok(deleted)
    }
}

/// Files made with the archive's mode: command lines and counters are sensitive.
trait ModeBits {
    fn mode_bits(&mut self, mode: u32) -> &mut Self;
}

impl ModeBits for OpenOptions {
    fn mode_bits(&mut self, mode: u32) -> &mut Self {
        use std::os::unix::fs::OpenOptionsExt;
        self.mode(mode)
    }
}

fn compress(src: &[u8], prefix: Option<&[u8]>, out: &mut Vec<u8>) -> io::Result<()> {
    use zstd::zstd_safe::{CCtx, CParameter};
    let zerr = |c: usize| io::Error::other(format!("zstd: {}", zstd::zstd_safe::get_error_name(c)));
    let mut cctx = CCtx::create();
    cctx.set_parameter(CParameter::CompressionLevel(LEVEL))
        .map_err(zerr)?;
    if let Some(p) = prefix {
        // The same process sits one whole sample back in the prefix: at 10,000
        // processes (3.6 MB of JSON) that is beyond level 1's window, and a delta came to
        // 104 KB. A window over prefix and sample with long-distance matching finds it:
        // 2.5 KB (and 45 bytes either way at 300 processes).
        let span = (p.len() + src.len()).next_power_of_two().trailing_zeros();
        cctx.set_parameter(CParameter::WindowLog(span.clamp(10, MAX_WINDOW_LOG)))
            .map_err(zerr)?;
        cctx.set_parameter(CParameter::EnableLongDistanceMatching(true))
            .map_err(zerr)?;
        cctx.ref_prefix(p).map_err(zerr)?;
    }
    // compress2 fills a Vec from its start, up to its capacity.
    let mut buf: Vec<u8> = Vec::with_capacity(zstd::zstd_safe::compress_bound(src.len()));
    cctx.compress2(&mut buf, src).map_err(zerr)?;
    out.extend_from_slice(&buf);
    Ok(())
}

fn decompress(src: &[u8], prefix: Option<&[u8]>) -> Result<Vec<u8>, String> {
    use zstd::zstd_safe::DCtx;
    let size = match zstd::zstd_safe::get_frame_content_size(src) {
        Ok(Some(n)) if n <= MAX_PAYLOAD as u64 * 8 => n as usize,
        _ => return Err("no content size".into()),
    };
    let mut dctx = DCtx::create();
    if let Some(p) = prefix {
        dctx.ref_prefix(p)
            .map_err(|c| zstd::zstd_safe::get_error_name(c).to_string())?;
    }
    let mut out = Vec::with_capacity(size);
    dctx.decompress(&mut out, src)
        .map_err(|c| zstd::zstd_safe::get_error_name(c).to_string())?;
    Ok(out)
}

fn header_version(bytes: &[u8]) -> Option<u16> {
    if bytes.len() < FILE_HEADER || &bytes[..6] != MAGIC {
        return None;
    }
    Some(u16::from_le_bytes([bytes[6], bytes[7]]))
}

/// One frame's place in a file.
#[derive(Clone, Copy, Debug)]
struct FrameAt {
    offset: usize,
    len: usize,
    key: bool,
    time: u64,
    /// The checksum matched.
    sound: bool,
}

struct Scan {
    frames: Vec<FrameAt>,
    /// End of the last whole frame (sound or not).
    whole_end: usize,
    /// Where the file stops making sense, if before its end: (offset, why).
    broken: Option<(usize, &'static str)>,
}

fn scan(bytes: &[u8]) -> Scan {
    let mut frames = Vec::new();
    let mut at = FILE_HEADER;
    let mut broken = None;
    while at < bytes.len() {
        if bytes.len() - at < FRAME_HEADER {
            broken = Some((at, "a torn frame header"));
            break;
        }
        let h = &bytes[at..at + FRAME_HEADER];
        let len = u32::from_le_bytes(h[0..4].try_into().unwrap());
        let kind = h[8];
        if len > MAX_PAYLOAD || kind > KIND_DELTA {
            broken = Some((at, "a damaged frame header"));
            break;
        }
        let end = at + FRAME_HEADER + len as usize;
        if end > bytes.len() {
            broken = Some((at, "a torn frame"));
            break;
        }
        let crc = u32::from_le_bytes(h[4..8].try_into().unwrap());
        frames.push(FrameAt {
            offset: at,
            len: len as usize,
            key: kind == KIND_KEY,
            time: u64::from_le_bytes(h[16..24].try_into().unwrap()),
            sound: crc32fast::hash(&bytes[at + 8..end]) == crc,
        });
        at = end;
    }
    Scan {
        frames,
        whole_end: at.min(bytes.len()),
        broken,
    }
}

/// A readable archive directory.
pub struct Archive {
    dir: PathBuf,
}

/// One file read whole, and where its frames are.
struct Loaded {
    path: PathBuf,
    bytes: Vec<u8>,
    frames: Vec<FrameAt>,
}

impl Archive {
    /// The archive in `dir` (which must exist).
    pub fn open(dir: &Path) -> io::Result<Archive> {
        let md = fs::metadata(dir)?;
        if !md.is_dir() {
            return Err(io::Error::other(format!(
                "{}: not a directory",
                dir.display()
            )));
        }
        Ok(Archive {
            dir: dir.to_path_buf(),
        })
    }

    /// Its files, oldest first, with the start of the hour each holds.
    pub fn files(&self) -> io::Result<Vec<(PathBuf, u64)>> {
        let mut v = Vec::new();
        for e in fs::read_dir(&self.dir)? {
            let e = e?;
            if let Some(hour) = e.file_name().to_str().and_then(file_hour) {
                v.push((e.path(), hour));
            }
        }
        v.sort_by_key(|f| f.1);
        Ok(v)
    }

    /// Reads a file and finds its frames. Damage that ends the file early is reported
    /// through `warn` (but not a torn end of the newest file: it may be being written).
    fn load(path: &Path, newest: bool, warn: &mut dyn FnMut(String)) -> Result<Loaded, ReadError> {
        let mut bytes = Vec::new();
        File::open(path)
            .and_then(|mut f| f.read_to_end(&mut bytes))
            .map_err(|source| ReadError::Io {
                path: path.to_path_buf(),
                source,
            })?;
        match header_version(&bytes) {
            None => return Err(ReadError::NotArchive(path.to_path_buf())),
            Some(v) if v > VERSION => {
                return Err(ReadError::Newer {
                    path: path.to_path_buf(),
                    version: v,
                })
            }
            Some(_) => {}
        }
        let s = scan(&bytes);
        if let Some((at, why)) = s.broken {
            if !(newest && why.starts_with("a torn")) {
                warn(format!(
                    "{}: {why} at byte {at}; the samples before it are read, the rest of the file is skipped",
                    path.display()
                ));
            }
        }
        Ok(Loaded {
            path: path.to_path_buf(),
            bytes,
            frames: s.frames,
        })
    }

    /// The JSON of frames `first..=last` of a loaded file, decompressing from the key
    /// frame before `first`. A frame that fails its checksum is reported and skipped
    /// with the deltas that depend on it, up to the next key frame.
    fn decode(
        l: &Loaded,
        first: usize,
        last: usize,
        warn: &mut dyn FnMut(String),
    ) -> Vec<(u64, Vec<u8>)> {
        let start = l.frames[..=first]
            .iter()
            .rposition(|f| f.key && f.sound)
            .unwrap_or(0);
        let mut out = Vec::new();
        let mut prev: Option<Vec<u8>> = None;
        for (i, f) in l.frames.iter().enumerate().take(last + 1).skip(start) {
            let payload = &l.bytes[f.offset + FRAME_HEADER..f.offset + FRAME_HEADER + f.len];
            if !f.sound {
                warn(format!(
                    "{}: the sample at byte {} fails its checksum; skipped, with the samples that depend on it",
                    l.path.display(),
                    f.offset
                ));
                prev = None;
                continue;
            }
            if !f.key && prev.is_none() {
                // A delta whose base was lost: wait for the next key frame.
                continue;
            }
            match decompress(payload, if f.key { None } else { prev.as_deref() }) {
                Ok(json) => {
                    if i >= first {
                        out.push((f.time, json.clone()));
                    }
                    prev = Some(json);
                }
                Err(e) => {
                    warn(format!(
                        "{}: the sample at byte {} cannot be decompressed ({e}); skipped",
                        l.path.display(),
                        f.offset
                    ));
                    prev = None;
                }
            }
        }
        out
    }

    fn parse(path: &Path, json: &[u8], warn: &mut dyn FnMut(String)) -> Option<Frame> {
        match serde_json::from_slice::<Frame>(json) {
            Ok(mut f) => {
                f.sanitize();
                Some(f)
            }
            Err(e) => {
                warn(format!(
                    "{}: a sample does not parse ({e}); skipped",
                    path.display()
                ));
                None
            }
        }
    }

    /// Every sample in `[from, to]` (Unix ns), oldest first. A file that cannot be read
    /// (written by a newer kernstat, not an archive, unreadable) is reported through
    /// `warn` and skipped, like damage inside a file.
    pub fn frames(
        &self,
        from: u64,
        to: u64,
        warn: &mut dyn FnMut(String),
    ) -> io::Result<Vec<Frame>> {
        let files = self.files()?;
        let newest = files.len().saturating_sub(1);
        let mut out = Vec::new();
        for (i, (path, hour)) in files.iter().enumerate() {
            if hour + HOUR_NS <= from || *hour > to {
                continue;
            }
            let l = match Self::load(path, i == newest, warn) {
                Ok(l) => l,
                Err(e) => {
                    warn(e.to_string());
                    continue;
                }
            };
            let (Some(first), Some(last)) = (
                l.frames.iter().position(|f| f.time >= from),
                l.frames.iter().rposition(|f| f.time <= to),
            ) else {
                continue;
            };
            if first > last {
                continue;
            }
            for (_, json) in Self::decode(&l, first, last, warn) {
                out.extend(Self::parse(path, &json, warn));
            }
        }
        Ok(out)
    }

    /// The sample just after `t` (`forward`) or just before it, for stepping through
    /// a replay; None at either end of the archive.
    pub fn step(&self, t: u64, forward: bool, warn: &mut dyn FnMut(String)) -> Option<Frame> {
        let files = self.files().ok()?;
        let newest = files.len().checked_sub(1)?;
        let holding = files.iter().rposition(|f| f.1 <= t);
        let order: Vec<usize> = match (forward, holding) {
            (true, Some(h)) => (h..files.len()).collect(),
            (true, None) => (0..files.len()).collect(),
            (false, Some(h)) => (0..=h).rev().collect(),
            (false, None) => Vec::new(),
        };
        for i in order {
            let Ok(l) = Self::load(&files[i].0, i == newest, warn) else {
                continue;
            };
            let j = if forward {
                l.frames.iter().position(|f| f.sound && f.time > t)
            } else {
                l.frames.iter().rposition(|f| f.sound && f.time < t)
            };
            if let Some(j) = j {
                return Self::decode(&l, j, j, warn)
                    .pop()
                    .and_then(|(_, json)| Self::parse(&l.path, &json, warn));
            }
        }
        None
    }

    /// The sample nearest to `t` (Unix ns). `Err` carries the one sentence to show
    /// when there is none. Reads frame headers of the file holding `t` and its
    /// neighbours, then decodes only the chain that leads to the chosen sample.
    pub fn at(&self, t: u64, warn: &mut dyn FnMut(String)) -> Result<Frame, String> {
        let files = self
            .files()
            .map_err(|e| format!("{}: {e}", self.dir.display()))?;
        if files.is_empty() {
            return Err(format!("{}: no recorded samples", self.dir.display()));
        }
        let newest = files.len() - 1;
        let holding = files.iter().rposition(|f| f.1 <= t);
        // The file holding t and the ones around it: the nearest sample may be across
        // an hour's boundary, or in an older file when the recorder was stopped.
        let mut candidates: Vec<usize> = match holding {
            Some(h) => (h.saturating_sub(1)..=(h + 1).min(newest)).collect(),
            None => vec![0],
        };
        let mut best: Option<(u64, Loaded, usize)> = None;
        let mut refused = None;
        let mut tried = 0;
        while let Some(i) = candidates.pop() {
            tried += 1;
            match Self::load(&files[i].0, i == newest, warn) {
                Ok(l) => {
                    let near = l
                        .frames
                        .iter()
                        .enumerate()
                        .filter(|(_, f)| f.sound)
                        .min_by_key(|(_, f)| f.time.abs_diff(t))
                        .map(|(j, f)| (f.time.abs_diff(t), j));
                    match near {
                        Some((d, j)) if best.as_ref().is_none_or(|b| d < b.0) => {
                            best = Some((d, l, j));
                        }
                        Some(_) => {}
                        // Nothing in it: look further back.
                        None if i > 0 && tried < files.len() => candidates.insert(0, i - 1),
                        None => {}
                    }
                }
                Err(e @ ReadError::Newer { .. }) => {
                    if Some(i) == holding {
                        return Err(e.to_string());
                    }
                    refused.get_or_insert(e.to_string());
                }
                Err(e) => warn(e.to_string()),
            }
        }
        let Some((_, l, j)) = best else {
            return Err(
                refused.unwrap_or_else(|| format!("{}: no readable sample", self.dir.display()))
            );
        };
        Self::decode(&l, j, j, warn)
            .pop()
            .and_then(|(_, json)| Self::parse(&l.path, &json, warn))
            .ok_or_else(|| {
                format!(
                    "{}: the sample nearest that time cannot be read",
                    l.path.display()
                )
            })
    }
}

#[cfg(test)]
mod tests;
