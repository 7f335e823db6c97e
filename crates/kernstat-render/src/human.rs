//! Numbers for people: byte sizes, rates, per-core glyphs. All write into a caller's
//! buffer (`fmt::Write`) so that rendering a tick allocates nothing.

use std::fmt::{self, Write};

/// Writes a byte count with a binary unit and at most 3 significant digits: 0B, 812K,
/// 3.1G, 24G.
pub fn bytes(out: &mut impl Write, n: f64) -> fmt::Result {
    const UNITS: [&str; 6] = ["B", "K", "M", "G", "T", "P"];
    let mut v = n.max(0.0);
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 || v >= 10.0 {
        write!(out, "{:.0}{}", v, UNITS[u])
    } else {
        write!(out, "{:.1}{}", v, UNITS[u])
    }
}

/// [`bytes`] as a new string, where a kept buffer does not matter.
pub fn bytes_string(n: f64) -> String {
    let mut s = String::new();
    let _ = bytes(&mut s, n);
    s
}

/// Writes a rate: `bytes` followed by "/s".
pub fn rate(out: &mut impl Write, bytes_per_s: f64) -> fmt::Result {
    bytes(out, bytes_per_s)?;
    out.write_str("/s")
}

/// Eight levels, one glyph per CPU.
pub const GLYPHS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/// The glyph for a busy percentage: ▁ below 12.5 %, █ from 87.5 %.
pub fn glyph(percent: f64) -> char {
    let i = (percent.clamp(0.0, 100.0) / 12.5) as usize;
    GLYPHS[i.min(GLYPHS.len() - 1)]
}

/// Writes one glyph per CPU.
pub fn glyphs(out: &mut impl Write, percents: &[f64]) -> fmt::Result {
    for &p in percents {
        out.write_char(glyph(p))?;
    }
    Ok(())
}

/// Writes `s`, escaping the characters Pango markup (Waybar's format and tooltip)
/// treats specially.
pub fn markup_escaped(out: &mut impl Write, s: &str) -> fmt::Result {
    for c in s.chars() {
        match c {
            '&' => out.write_str("&amp;")?,
            '<' => out.write_str("&lt;")?,
            '>' => out.write_str("&gt;")?,
            c => out.write_char(c)?,
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b(n: f64) -> String {
        let mut s = String::new();
        bytes(&mut s, n).unwrap();
        s
    }

    #[test]
    fn byte_units() {
        assert_eq!(b(0.0), "0B");
        assert_eq!(b(1000.0), "1000B");
        assert_eq!(b(1536.0), "1.5K");
        assert_eq!(b(3.1 * 1024.0 * 1024.0 * 1024.0), "3.1G");
        assert_eq!(b(24.0 * 1024.0 * 1024.0 * 1024.0), "24G");
    }

    #[test]
    fn glyph_levels() {
        assert_eq!(glyph(0.0), '▁');
        assert_eq!(glyph(50.0), '▅');
        assert_eq!(glyph(100.0), '█');
        assert_eq!(glyph(250.0), '█');
        let mut s = String::new();
        glyphs(&mut s, &[0.0, 30.0, 100.0]).unwrap();
        assert_eq!(s, "▁▃█");
    }

    #[test]
    fn escaping() {
        let mut s = String::new();
        markup_escaped(&mut s, "a<b>&c").unwrap();
        assert_eq!(s, "a&lt;b&gt;&amp;c");
    }
}
