//! Text another user controls, made safe once: a small fixed-capacity string that lives
//! inline (no heap), for command names, sysfs words and the like (the sampling loop copies
//! these every tick and must not allocate), and the one rule every output follows for
//! such text ([`printable`]: no control character reaches a terminal, a CSV cell or a
//! label) and for names that need not be UTF-8 ([`escape_name`], reversible).

use std::borrow::Cow;
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
    ///
    /// Control characters (C0, DEL, and C1 as UTF-8) become spaces: a process may name
    /// itself `\e]0;...\a` with prctl, and its name must not drive a terminal anywhere it
    /// is shown (the one rule of [`printable`], applied where the text is taken).
    pub fn from_bytes(src: &[u8]) -> Self {
        let end = src
            .iter()
            .position(|&b| b == 0 || b == b'\n')
            .unwrap_or(src.len());
        let src = src[..end].trim_ascii_start();
        let n = src.len().min(N).min(u8::MAX as usize);
        let mut s = Self::default();
        s.bytes[..n].copy_from_slice(&src[..n]);
        blank_controls(&mut s.bytes[..n]);
        let kept = s.bytes[..n].trim_ascii().len();
        let lead = n - s.bytes[..n].trim_ascii_start().len();
        s.bytes.copy_within(lead..lead + kept, 0);
        s.bytes[kept..].fill(0);
        s.len = kept as u8;
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

/// Whether a character may drive a terminal or break a line-based format: C0 controls
/// (newline and tab included), DEL and C1 controls.
pub fn is_control(c: char) -> bool {
    c.is_control()
}

/// Replaces control bytes in place by spaces: ASCII C0 and DEL, and C1 controls as
/// UTF-8 encodes them (0xC2 0x80..=0x9F, two spaces), keeping the length.
fn blank_controls(b: &mut [u8]) {
    let mut i = 0;
    while i < b.len() {
        if b[i] < 0x20 || b[i] == 0x7f {
            b[i] = b' ';
        } else if b[i] == 0xc2 && i + 1 < b.len() && (0x80..=0x9f).contains(&b[i + 1]) {
            b[i] = b' ';
            b[i + 1] = b' ';
            i += 1;
        }
        i += 1;
    }
}

/// The one rule for text from the system or another user in every output (terminal,
/// CSV, labels, JSON strings shown as text): each control character (C0, DEL, C1)
/// becomes a space. Borrowed when there is none (the common case).
pub fn printable(s: &str) -> Cow<'_, str> {
    // Printable ASCII is the common case and needs no character decoding (10 % of
    // `kernstat view`'s cold decode was this check, char by char).
    if s.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return Cow::Borrowed(s);
    }
    if s.chars().any(is_control) {
        Cow::Owned(
            s.chars()
                .map(|c| if is_control(c) { ' ' } else { c })
                .collect(),
        )
    } else {
        Cow::Borrowed(s)
    }
}

/// A file or group name (bytes, which need not be UTF-8) as text, reversibly: a name that
/// is UTF-8 without control characters is itself; in any other, each byte that is not
/// part of a printable UTF-8 character and each backslash is written `\xNN`
/// ([`unescape_name`] undoes it). Two different names never escape to the same text,
/// but for a UTF-8 name that itself contains `\xNN` (systemd's unit names do), shown as
/// it is: readers of a shown name try it as written first.
pub fn escape_name(name: &[u8]) -> Cow<'_, str> {
    if let Ok(s) = std::str::from_utf8(name) {
        if !s.chars().any(is_control) {
            return Cow::Borrowed(s);
        }
    }
    let mut out = String::with_capacity(name.len() + 8);
    let mut rest = name;
    while !rest.is_empty() {
        let (valid, bad) = match std::str::from_utf8(rest) {
            Ok(s) => (s, 0),
            Err(e) => (
                // SAFETY-free: valid_up_to() marks a valid prefix.
                std::str::from_utf8(&rest[..e.valid_up_to()]).unwrap_or(""),
                e.error_len().unwrap_or(rest.len() - e.valid_up_to()),
            ),
        };
        for c in valid.chars() {
            if is_control(c) || c == '\\' {
                let mut buf = [0u8; 4];
                for b in c.encode_utf8(&mut buf).bytes() {
                    out.push_str(&format!("\\x{b:02x}"));
                }
            } else {
                out.push(c);
            }
        }
        let at = valid.len();
        for b in &rest[at..at + bad] {
            out.push_str(&format!("\\x{b:02x}"));
        }
        rest = &rest[at + bad..];
    }
    Cow::Owned(out)
}

/// The bytes of a name shown by [`escape_name`]: every `\xNN` becomes the byte NN.
pub fn unescape_name(shown: &str) -> Vec<u8> {
    let b = shown.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\' && i + 3 < b.len() && b[i + 1] == b'x' {
            let hex = std::str::from_utf8(&b[i + 2..i + 4]).ok();
            if let Some(v) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(v);
                i += 4;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_never_survive() {
        let s = ShortStr::<16>::from_bytes(b"\x1b]0;OWN\x07\x1b[2J");
        assert!(!s.as_str().chars().any(is_control), "{:?}", s.as_str());
        assert_eq!(s.as_str(), "]0;OWN  [2J");
        // C1 CSI as UTF-8.
        let c1 = ShortStr::<16>::from_bytes("a\u{9b}31m".as_bytes());
        assert!(!c1.as_str().chars().any(is_control), "{:?}", c1.as_str());
        assert_eq!(printable("x\u{1b}[2J\ty"), "x [2J y");
        assert!(matches!(printable("plain"), Cow::Borrowed(_)));
    }

    #[test]
    fn names_escape_reversibly_and_stay_distinct() {
        for name in [
            &b"web.service"[..],
            b"bad\xffutf8",
            b"bad\xfeutf8",
            b"esc\x1b[2J",
            b"back\\slash\xff",
            b"\xc3\xa9t\xc3\xa9",
            b"\xe2\x82",
        ] {
            let shown = escape_name(name);
            assert!(!shown.chars().any(is_control), "{shown:?}");
            assert_eq!(unescape_name(&shown), name, "{shown:?}");
        }
        assert_eq!(escape_name(b"bad\xffutf8"), "bad\\xffutf8");
        assert_ne!(escape_name(b"bad\xffutf8"), escape_name(b"bad\xfeutf8"));
        assert_eq!(escape_name("été".as_bytes()), "été");
        // systemd's own escapes in a UTF-8 name are left as they are.
        assert_eq!(
            escape_name(b"system-serial\\x2dgetty.slice"),
            "system-serial\\x2dgetty.slice"
        );
    }

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
