//! The bytes of an archive file, and reading them safely.
//!
//! A file: an 8-byte header (`KSREC`, a NUL, the format version as a little-endian
//! u16), then frames, appended. A frame: a 24-byte header, then its payload:
//!
//! ```text
//!  0 payload length u32 (compressed)     4 CRC-32 of bytes 8.. (header rest + payload)
//!  8 kind u8 (0 key, 1 delta)            9 three zero bytes
//! 12 decompressed length u32 (v2)       16 sample time u64 (ns since the Unix epoch)
//! ```
//!
//! The payload is one zstd frame: a *key* frame alone, a *delta* frame with the
//! previous sample's decompressed bytes as zstd's prefix (its long matches are what did
//! not change). A header of zeros is padding (what a crash after the file was extended
//! leaves on ext4 and XFS): the file's frames end there.
//!
//! Reading trusts nothing a file says (shared/security N6): files are opened without
//! following links, non-blocking, and only when they are regular files; frames are read
//! with `pread` one at a time (never the whole file); a frame may declare at most
//! [`MAX_FRAME`] decompressed bytes, and zstd must produce exactly what it declared,
//! with a bounded window. A reader's memory is a few frames, whatever the files hold.

use std::io;
use std::os::fd::OwnedFd;

use rustix::fs::{Mode, OFlags};

/// The file header's first six bytes.
pub const MAGIC: &[u8; 6] = b"KSREC\0";
/// Bytes before the first frame.
pub const FILE_HEADER: u64 = 8;
/// Bytes of a frame header.
pub const FRAME_HEADER: usize = 24;
/// The largest compressed payload a frame may have.
pub const MAX_PAYLOAD: u32 = 16 << 20;
/// The largest decompressed payload a frame may declare (a sample of ~100,000 processes).
pub const MAX_FRAME: u32 = 16 << 20;
/// zstd's window at most (what a delta needs: the previous sample and this one).
pub const MAX_WINDOW_LOG: u32 = 26;

/// A key frame.
pub const KIND_KEY: u8 = 0;
/// A delta frame.
pub const KIND_DELTA: u8 = 1;

/// One frame's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameHead {
    /// Where the frame starts in its file.
    pub offset: u64,
    /// Compressed payload length.
    pub len: u32,
    /// CRC-32 of the header's rest and the payload.
    pub crc: u32,
    /// Key or delta.
    pub key: bool,
    /// Decompressed length (0 in version-1 files: undeclared).
    pub raw_len: u32,
    /// Sample time, ns since the Unix epoch.
    pub time: u64,
}

impl FrameHead {
    /// The header's 24 bytes (CRC left to the caller).
    pub fn encode(&self) -> [u8; FRAME_HEADER] {
        let mut h = [0u8; FRAME_HEADER];
        h[0..4].copy_from_slice(&self.len.to_le_bytes());
        h[4..8].copy_from_slice(&self.crc.to_le_bytes());
        h[8] = if self.key { KIND_KEY } else { KIND_DELTA };
        h[12..16].copy_from_slice(&self.raw_len.to_le_bytes());
        h[16..24].copy_from_slice(&self.time.to_le_bytes());
        h
    }

    fn decode(offset: u64, h: &[u8; FRAME_HEADER]) -> Result<FrameHead, &'static str> {
        let u32_at = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().expect("4 bytes"));
        if h.iter().all(|&b| b == 0) {
            return Err("padding");
        }
        let kind = h[8];
        let len = u32_at(0);
        if len == 0 || len > MAX_PAYLOAD || kind > KIND_DELTA || h[9..12] != [0, 0, 0] {
            return Err("a damaged frame header");
        }
        let raw_len = u32_at(12);
        if raw_len > MAX_FRAME {
            return Err("a frame declaring more than the largest sample");
        }
        Ok(FrameHead {
            offset,
            len,
            crc: u32_at(4),
            key: kind == KIND_KEY,
            raw_len,
            time: u64::from_le_bytes(h[16..24].try_into().expect("8 bytes")),
        })
    }

    /// The file offset just past the frame.
    pub fn end(&self) -> u64 {
        self.offset + FRAME_HEADER as u64 + u64::from(self.len)
    }
}

/// A file's frame headers, and where and why they stop before its end (None: at it).
pub type Scan = (Vec<FrameHead>, Option<(u64, &'static str)>);

/// An archive file opened for reading.
#[derive(Debug)]
pub struct FileReader {
    fd: OwnedFd,
    /// Its length when opened.
    pub len: u64,
}

fn not_regular() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "not a regular file; not read")
}

impl FileReader {
    /// Opens `name` in the directory `dir` without following a link, without blocking
    /// (a FIFO), and only if it is a regular file (errors say why, not which: the
    /// caller names the file).
    pub fn open_at(dir: &OwnedFd, name: &str) -> io::Result<FileReader> {
        let fd = rustix::fs::openat(
            dir,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            rustix::io::Errno::LOOP => not_regular(),
            e => io::Error::from(e),
        })?;
        let st = rustix::fs::fstat(&fd)?;
        if st.st_mode & 0o170000 != 0o100000 {
            return Err(not_regular());
        }
        Ok(FileReader {
            fd,
            len: st.st_size as u64,
        })
    }

    /// `buf.len()` bytes at `offset` (fewer at the end of the file).
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<usize> {
        let mut done = 0;
        while done < buf.len() {
            match rustix::io::pread(&self.fd, &mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Ok(done)
    }

    /// The format version in the file header (None: not an archive file).
    pub fn version(&self) -> io::Result<Option<u16>> {
        let mut h = [0u8; FILE_HEADER as usize];
        if self.read_at(0, &mut h)? < h.len() || &h[..6] != MAGIC {
            return Ok(None);
        }
        Ok(Some(u16::from_le_bytes([h[6], h[7]])))
    }

    /// Every frame header, in order, and where and why the frames stop before the end
    /// of the file, if they do: (offset, "padding" / "a torn frame" / "a damaged frame
    /// header").
    pub fn scan(&self) -> io::Result<Scan> {
        let mut heads = Vec::new();
        let mut at = FILE_HEADER;
        while at < self.len {
            let mut h = [0u8; FRAME_HEADER];
            if self.read_at(at, &mut h)? < FRAME_HEADER {
                return Ok((heads, Some((at, "a torn frame header"))));
            }
            let head = match FrameHead::decode(at, &h) {
                Ok(head) => head,
                Err(why) => return Ok((heads, Some((at, why)))),
            };
            if head.end() > self.len {
                return Ok((heads, Some((at, "a torn frame"))));
            }
            at = head.end();
            heads.push(head);
        }
        Ok((heads, None))
    }

    /// A frame's payload, checked against its CRC (Err: the frame is damaged).
    pub fn payload(&self, head: &FrameHead) -> io::Result<Result<Vec<u8>, &'static str>> {
        let mut buf = vec![0u8; FRAME_HEADER + head.len as usize];
        if self.read_at(head.offset, &mut buf)? < buf.len() {
            return Ok(Err("a torn frame"));
        }
        if crc32fast::hash(&buf[8..]) != head.crc {
            return Ok(Err("a frame that fails its checksum"));
        }
        buf.drain(..FRAME_HEADER);
        Ok(Ok(buf))
    }
}

/// The CRC a frame header carries for `header` (its bytes 8..24) and `payload`.
pub fn crc(header: &[u8; FRAME_HEADER], payload: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&header[8..]);
    h.update(payload);
    h.finalize()
}

/// zstd level 1: on a 300-process sample delta it gave 373 bytes in 41 µs where level 3
/// (zstd's default) gave 467 bytes in 67 µs (measured here, fresh context each).
const LEVEL: i32 = 1;

fn zerr(code: usize) -> io::Error {
    io::Error::other(format!("zstd: {}", zstd::zstd_safe::get_error_name(code)))
}

/// Compresses `src` (with `prefix`, the previous sample's bytes, for a delta).
pub fn compress(src: &[u8], prefix: Option<&[u8]>) -> io::Result<Vec<u8>> {
    use zstd::zstd_safe::{CCtx, CParameter};
    let mut cctx = CCtx::create();
    cctx.set_parameter(CParameter::CompressionLevel(LEVEL))
        .map_err(zerr)?;
    if let Some(p) = prefix {
        // The same process sits one whole sample back in the prefix: at 10,000
        // processes that is beyond level 1's window. A window over prefix and sample
        // with long-distance matching finds it.
        let span = (p.len() + src.len()).next_power_of_two().trailing_zeros();
        cctx.set_parameter(CParameter::WindowLog(span.clamp(10, MAX_WINDOW_LOG)))
            .map_err(zerr)?;
        cctx.set_parameter(CParameter::EnableLongDistanceMatching(true))
            .map_err(zerr)?;
        cctx.ref_prefix(p).map_err(zerr)?;
    }
    let mut buf: Vec<u8> = Vec::with_capacity(zstd::zstd_safe::compress_bound(src.len()));
    cctx.compress2(&mut buf, src).map_err(zerr)?;
    Ok(buf)
}

/// Decompresses a payload that declared `declared` bytes (0: undeclared, version 1,
/// then zstd's own content size, within the same cap), with `prefix` for a delta.
/// Refuses anything larger than [`MAX_FRAME`] before allocating it, and anything that
/// does not come out at exactly the declared size.
pub fn decompress(src: &[u8], prefix: Option<&[u8]>, declared: u32) -> Result<Vec<u8>, String> {
    use zstd::zstd_safe::{DCtx, DParameter};
    let content = match zstd::zstd_safe::get_frame_content_size(src) {
        Ok(Some(n)) => n,
        _ => return Err("no content size".into()),
    };
    if content > u64::from(MAX_FRAME) || (declared != 0 && content != u64::from(declared)) {
        return Err(format!(
            "declares {content} bytes (at most {MAX_FRAME}, and as its header says)"
        ));
    }
    // One context per thread, kept: creating one (its tables allocated and cleared) was
    // 30 % of reading a day of frames for a timeline (16 µs a frame, `perf record` of
    // `kernstat view`, docs/measured.md). A delta's prefix is given as a raw-content
    // dictionary for this one call (what `ref_prefix` is, without tying the kept
    // context's lifetime to it); a real frame's bytes never start with the dictionary
    // magic, as a postcard sample starts with its time's varint; a forged one that does
    // is read with a context of its own and the prefix as raw content, as it was written.
    thread_local! {
        static DCTX: std::cell::RefCell<Option<DCtx<'static>>> = const { std::cell::RefCell::new(None) };
    }
    let name = |c| zstd::zstd_safe::get_error_name(c).to_string();
    let mut out = Vec::with_capacity(content as usize);
    DCTX.with(|cell| -> Result<(), String> {
        let mut slot = cell.borrow_mut();
        let dctx = match slot.as_mut() {
            Some(d) => d,
            None => {
                let mut d = DCtx::create();
                d.set_parameter(DParameter::WindowLogMax(MAX_WINDOW_LOG))
                    .map_err(name)?;
                slot.insert(d)
            }
        };
        let done = match prefix {
            Some(p) if p.starts_with(&[0x37, 0xa4, 0x30, 0xec]) => {
                let mut own = DCtx::create();
                own.ref_prefix(p)
                    .and_then(|_| own.decompress(&mut out, src))
            }
            Some(p) => dctx.decompress_using_dict(&mut out, src, p),
            None => dctx.decompress(&mut out, src),
        };
        if done.is_err() {
            // A failed frame leaves nothing behind for the next one.
            let _ = dctx.reset(zstd::zstd_safe::ResetDirective::SessionOnly);
        }
        done.map(|_| ()).map_err(name)
    })?;
    if out.len() as u64 != content {
        return Err("came out shorter than it declared".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delta_comes_back_whatever_its_prefix_starts_with() {
        let frame: Vec<u8> = (0..4000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        let mut next = frame.clone();
        next[100] ^= 0xff;
        // A prefix as a sample starts (a time varint) and one that starts with zstd's
        // dictionary magic (only a forged file's can).
        let mut magic = frame.clone();
        magic[..4].copy_from_slice(&[0x37, 0xa4, 0x30, 0xec]);
        for prefix in [&frame, &magic] {
            let z = compress(&next, Some(prefix)).unwrap();
            let back = decompress(&z, Some(prefix), next.len() as u32).unwrap();
            assert_eq!(back, next);
        }
        // A key frame after them, with the kept context.
        let z = compress(&next, None).unwrap();
        assert_eq!(decompress(&z, None, next.len() as u32).unwrap(), next);
        // A wrong prefix fails, and the next frame still reads.
        let z = compress(&next, Some(&frame)).unwrap();
        let wrong = vec![0u8; frame.len()];
        assert!(decompress(&z, Some(&wrong), next.len() as u32).map_or(true, |b| b != next));
        assert_eq!(
            decompress(&z, Some(&frame), next.len() as u32).unwrap(),
            next
        );
    }
}
