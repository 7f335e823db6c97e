//! Files opened once and read with one `pread` per sample, and the byte-level parsers
//! that read numbers out of them without building strings.
//!
//! /proc and /sys files are generated on each read from offset 0; keeping the descriptor
//! and using pread(fd, buf, len, 0) costs one syscall per read instead of open + read +
//! close (rstat measured the difference; DESIGN.md principle 1).

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

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
