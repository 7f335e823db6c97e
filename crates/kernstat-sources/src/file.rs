//! Files opened once and read with one `pread` per sample, and the byte-level parsers
//! that read numbers out of them without building strings.
//!
//! /proc and /sys files are generated on each read from offset 0; keeping the descriptor
//! and using pread(fd, buf, len, 0) costs one syscall per read instead of open + read +
//! close (rstat measured the difference; DESIGN.md principle 1).

use std::ffi::CStr;
use std::fs::File;
use std::io;
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use rustix::fs::{openat, Mode, OFlags, RawDir};
use rustix::io::Errno;

/// Nanoseconds per clock tick (the unit of /proc's utime and stime).
pub fn ns_per_tick() -> u64 {
    // SAFETY: sysconf has no preconditions.
    match unsafe { libc::sysconf(libc::_SC_CLK_TCK) } {
        hz if hz > 0 => 1_000_000_000 / hz as u64,
        _ => 10_000_000,
    }
}

/// The page size (the unit of /proc's RSS and swap counts).
pub fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    match unsafe { libc::sysconf(libc::_SC_PAGESIZE) } {
        p if p > 0 => p as u64,
        _ => 4096,
    }
}

/// Opens a directory (the /proc root) for `openat` and `getdents64`.
pub fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    Ok(openat(
        rustix::fs::CWD,
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Reads a per-process file ("PID/stat") relative to the open /proc: openat + one
/// pread. None when it is gone (the process exited) or unreadable.
pub fn read_at<'a>(dir: &OwnedFd, path: &CStr, buf: &'a mut [u8]) -> Option<&'a [u8]> {
    let fd = openat(dir, path, OFlags::RDONLY | OFlags::CLOEXEC, Mode::empty()).ok()?;
    let n = rustix::io::pread(&fd, &mut *buf, 0).ok()?;
    Some(&buf[..n])
}

/// "PID/..." paths built on the stack (no allocation per process), for `read_at`.
pub(crate) struct ProcPath {
    bytes: [u8; 96],
    len: usize,
}

impl ProcPath {
    pub(crate) fn new() -> Self {
        ProcPath {
            bytes: [0; 96],
            len: 0,
        }
    }
    pub(crate) fn num(&mut self, mut n: u32) -> &mut Self {
        let mut digits = [0u8; 10];
        let mut i = digits.len();
        loop {
            i -= 1;
            digits[i] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        self.push(&digits[i..])
    }
    pub(crate) fn push(&mut self, s: &[u8]) -> &mut Self {
        let n = s.len().min(self.bytes.len() - 1 - self.len);
        self.bytes[self.len..self.len + n].copy_from_slice(&s[..n]);
        self.len += n;
        self
    }
    pub(crate) fn cstr(&mut self) -> &CStr {
        self.bytes[self.len] = 0;
        CStr::from_bytes_with_nul(&self.bytes[..=self.len]).expect("one NUL at the end")
    }
    pub(crate) fn len(&self) -> usize {
        self.len
    }
    pub(crate) fn truncate(&mut self, len: usize) {
        self.len = len;
    }
}

/// Fills `ids` (cleared) with the numeric entries of the directory `fd` (pids in /proc,
/// tids in /proc/PID/task), with one kept getdents64 buffer.
pub fn numeric_entries(
    fd: &OwnedFd,
    buf: &mut [MaybeUninit<u8>],
    ids: &mut Vec<u32>,
) -> io::Result<()> {
    ids.clear();
    rustix::fs::seek(fd, rustix::fs::SeekFrom::Start(0))?;
    let mut dir = RawDir::new(fd.as_fd(), buf);
    while let Some(e) = dir.next() {
        match e {
            Ok(e) => {
                if let Some(n) = parse_u64(e.file_name().to_bytes()) {
                    ids.push(n as u32);
                }
            }
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// A file kept open for repeated whole-file reads.
#[derive(Debug)]
pub struct PreadFile {
    file: File,
    path: PathBuf,
}

impl PreadFile {
    /// Opens `path` read-only.
    pub fn open(path: impl AsRef<Path>) -> io::Result<Self> {
        let path = path.as_ref();
        Ok(Self {
            file: File::open(path)?,
            path: path.to_path_buf(),
        })
    }

    /// Opens `path`, or returns `None` if it cannot be opened (the machine lacks it).
    pub fn open_optional(path: impl AsRef<Path>) -> Option<Self> {
        Self::open(path).ok()
    }

    /// Reads the file from offset 0 into `buf` with one pread; returns the bytes read.
    /// A file larger than `buf` is cut short: size buffers for the largest expected file.
    pub fn read<'a>(&self, buf: &'a mut [u8]) -> io::Result<&'a [u8]> {
        let n = self.file.read_at(buf, 0)?;
        Ok(&buf[..n])
    }

    /// Reads and parses the file as one unsigned integer.
    pub fn read_u64(&self, buf: &mut [u8]) -> Option<u64> {
        self.read(buf).ok().and_then(|b| parse_u64(b.trim_ascii()))
    }

    /// The path it was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Parses a decimal unsigned integer that fills `s` exactly.
pub fn parse_u64(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    let mut v: u64 = 0;
    for &b in s {
        if !b.is_ascii_digit() {
            return None;
        }
        v = v.checked_mul(10)?.checked_add((b - b'0') as u64)?;
    }
    Some(v)
}

/// Parses a decimal integer that may have a leading minus sign.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    match s.split_first() {
        Some((b'-', rest)) => parse_u64(rest)
            .and_then(|v| i64::try_from(v).ok())
            .map(|v| -v),
        _ => parse_u64(s).and_then(|v| i64::try_from(v).ok()),
    }
}

/// Parses a non-negative decimal like "12.34" (as in PSI averages).
pub fn parse_f32(s: &[u8]) -> Option<f32> {
    let (int, frac) = match s.iter().position(|&b| b == b'.') {
        Some(i) => (&s[..i], &s[i + 1..]),
        None => (s, &b""[..]),
    };
    let mut v = parse_u64(int)? as f64;
    let mut scale = 0.1;
    for &b in frac {
        if !b.is_ascii_digit() {
            return None;
        }
        v += (b - b'0') as f64 * scale;
        scale /= 10.0;
    }
    Some(v as f32)
}

/// Splits on ASCII whitespace without allocating.
pub fn fields(line: &[u8]) -> impl Iterator<Item = &[u8]> {
    line.split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty())
}

/// The lines of a buffer.
pub fn lines(buf: &[u8]) -> impl Iterator<Item = &[u8]> {
    buf.split(|&b| b == b'\n').filter(|l| !l.is_empty())
}

/// For "Key:   123 kB" style files (/proc/meminfo): the first number after `key:`.
pub fn keyed_value(buf: &[u8], key: &[u8]) -> Option<u64> {
    for line in lines(buf) {
        if line.len() > key.len() && line.starts_with(key) && line[key.len()] == b':' {
            return fields(&line[key.len() + 1..]).next().and_then(parse_u64);
        }
    }
    None
}

/// For "key 123" style files (/proc/vmstat): the number after `key `.
pub fn spaced_value(buf: &[u8], key: &[u8]) -> Option<u64> {
    for line in lines(buf) {
        if line.len() > key.len() && line.starts_with(key) && line[key.len()] == b' ' {
            return parse_u64(line[key.len() + 1..].trim_ascii());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"12a"), None);
        assert_eq!(parse_i64(b"-42"), Some(-42));
        assert_eq!(parse_i64(b"42"), Some(42));
    }

    #[test]
    fn decimals() {
        assert!((parse_f32(b"12.34").unwrap() - 12.34).abs() < 1e-4);
        assert_eq!(parse_f32(b"7"), Some(7.0));
        assert_eq!(parse_f32(b"1.x"), None);
    }

    #[test]
    fn keyed_and_spaced() {
        let meminfo = b"MemTotal:       24684096 kB\nMemFree:        23000000 kB\nMemAvailable:   23500000 kB\n";
        assert_eq!(keyed_value(meminfo, b"MemTotal"), Some(24684096));
        assert_eq!(keyed_value(meminfo, b"MemAvailable"), Some(23500000));
        assert_eq!(keyed_value(meminfo, b"Mem"), None);
        let vmstat = b"pgpgin 10\npswpin 3\npswpout 4\n";
        assert_eq!(spaced_value(vmstat, b"pswpin"), Some(3));
        assert_eq!(spaced_value(vmstat, b"pswpout"), Some(4));
        assert_eq!(spaced_value(vmstat, b"pswp"), None);
    }
}
