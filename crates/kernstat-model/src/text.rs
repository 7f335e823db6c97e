//! A small fixed-capacity string that lives inline (no heap), for command names, sysfs
//! words and the like: the sampling loop copies these every tick and must not allocate.

use std::fmt;

use serde::{Serialize, Serializer};

/// Up to `N` bytes of text, stored inline. Bytes that are not UTF-8 are kept as read and
/// shown up to the first invalid byte.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct ShortStr<const N: usize> {
    bytes: [u8; N],
    len: u8,
}

impl<const N: usize> Default for ShortStr<N> {
    fn default() -> Self {
        Self {
            bytes: [0; N],
            len: 0,
        }
    }
}

impl<const N: usize> ShortStr<N> {
    /// Copies `src` up to its first NUL or newline, truncated to `N` bytes (and 255),
    /// with surrounding ASCII whitespace removed.
    pub fn from_bytes(src: &[u8]) -> Self {
        let end = src
            .iter()
            .position(|&b| b == 0 || b == b'\n')
            .unwrap_or(src.len());
        let src = src[..end].trim_ascii();
        let n = src.len().min(N).min(u8::MAX as usize);
        let mut s = Self::default();
        s.bytes[..n].copy_from_slice(&src[..n]);
        s.len = n as u8;
        s
    }

    /// Copies a string (truncated to capacity).
    pub fn from_str_lossy(src: &str) -> Self {
        Self::from_bytes(src.as_bytes())
    }

    /// Appends `src` if it fits; returns false (and appends nothing) if it does not.
    pub fn push_str(&mut self, src: &str) -> bool {
        let len = self.len as usize;
        if len + src.len() > N.min(u8::MAX as usize) {
            return false;
        }
        self.bytes[len..len + src.len()].copy_from_slice(src.as_bytes());
        self.len += src.len() as u8;
        true
    }

    /// The raw bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len as usize]
    }

    /// The text, cut at the first byte that is not valid UTF-8.
    pub fn as_str(&self) -> &str {
        let b = self.as_bytes();
        match std::str::from_utf8(b) {
            Ok(s) => s,
            // SAFETY-free fallback: the prefix up to valid_up_to() is valid UTF-8.
            Err(e) => std::str::from_utf8(&b[..e.valid_up_to()]).unwrap_or(""),
        }
    }

    /// No text.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<const N: usize> fmt::Debug for ShortStr<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl<const N: usize> fmt::Display for ShortStr<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl<const N: usize> Serialize for ShortStr<N> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de, const N: usize> serde::Deserialize<'de> for ShortStr<N> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Ok(Self::from_str_lossy(&s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stops_at_nul_and_newline_and_trims() {
        assert_eq!(ShortStr::<16>::from_bytes(b"bash\0\0\0").as_str(), "bash");
        assert_eq!(
            ShortStr::<16>::from_bytes(b" balanced\n").as_str(),
            "balanced"
        );
    }

    #[test]
    fn truncates_to_capacity() {
        assert_eq!(ShortStr::<4>::from_bytes(b"abcdefgh").as_str(), "abcd");
    }

    #[test]
    fn invalid_utf8_shows_the_valid_prefix() {
        assert_eq!(ShortStr::<16>::from_bytes(b"ab\xffcd").as_str(), "ab");
    }

    #[test]
    fn push_str_refuses_overflow() {
        let mut s = ShortStr::<8>::from_bytes(b"abc");
        assert!(s.push_str(",de"));
        assert!(!s.push_str(",fgh"));
        assert_eq!(s.as_str(), "abc,de");
    }
}
