//! Text written straight into the frame's buffer. Nearly every cell `top` draws is
//! printable ASCII, a byte a cell; ratatui's general path (`Paragraph`, `set_stringn`)
//! segments every string into graphemes and looks up each one's width. In `perf record
//! --call-graph dwarf` of `top -d 0.1` (160×40, 73 processes) that path was ~6 % of a
//! refresh in the table and ~10 % in the header and footer (`LineTruncator`,
//! `Graphemes::next`, `cell_width`). Anything not printable ASCII still goes that way.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Line;

/// True when every byte of `text` takes one cell as itself (no control, no UTF-8).
fn one_cell_a_byte(text: &str) -> bool {
    text.bytes().all(|b| b.is_ascii_graphic() || b == b' ')
}

/// Writes `text` at (x, y), at most `width` cells of it, right-aligned in them when
/// `right`; the cells keep the row's style.
pub(super) fn put(buffer: &mut Buffer, x: u16, y: u16, width: u16, text: &str, right: bool) {
    if one_cell_a_byte(text) {
        let shown = text.len().min(width as usize) as u16;
        let start = if right { x + (width - shown) } else { x };
        for (i, b) in text.bytes().take(shown as usize).enumerate() {
            if let Some(cell) = buffer.cell_mut((start + i as u16, y)) {
                cell.set_char(b as char);
            }
        }
        return;
    }
    put_graphemes(buffer, x, y, width, text, right);
}

/// `put` for any text: grapheme by grapheme, as wide as each is.
fn put_graphemes(buffer: &mut Buffer, x: u16, y: u16, width: u16, text: &str, right: bool) {
    if !right {
        buffer.set_stringn(x, y, text, width as usize, Style::default());
        return;
    }
    let shown = display_width(text).min(width as usize) as u16;
    buffer.set_stringn(
        x + (width - shown),
        y,
        text,
        shown as usize,
        Style::default(),
    );
}

/// Terminal cells `text` takes (ASCII: its length, without a width lookup per char).
fn display_width(text: &str) -> usize {
    if text.is_ascii() {
        text.len()
    } else {
        unicode_width::UnicodeWidthStr::width(text)
    }
}

/// Writes `lines` into `area`, one a row from its top, each left-aligned and cut at the
/// area's right edge, in its spans' styles: what `Paragraph::new(lines)` draws for
/// printable ASCII, and `Buffer::set_line` for the rest.
pub(super) fn put_lines(buffer: &mut Buffer, area: Rect, lines: &[Line<'_>]) {
    for (line, y) in lines.iter().zip(area.top()..area.bottom()) {
        put_line(buffer, area.x, y, area.width, line);
    }
}

/// One line of [`put_lines`], at most `width` cells from (x, y).
fn put_line(buffer: &mut Buffer, x: u16, y: u16, width: u16, line: &Line<'_>) {
    let end = x.saturating_add(width).min(buffer.area.right());
    let mut x = x;
    for span in line {
        if x >= end {
            break;
        }
        let style = line.style.patch(span.style);
        if one_cell_a_byte(&span.content) {
            for b in span.content.bytes() {
                if x >= end {
                    break;
                }
                buffer[(x, y)].set_char(b as char).set_style(style);
                x += 1;
            }
        } else {
            x = buffer
                .set_stringn(x, y, &span.content, (end - x) as usize, style)
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::style::{Color, Modifier};
    use ratatui::text::Span;
    use ratatui::widgets::{Paragraph, Widget};

    #[test]
    fn ascii_cells_are_written_as_graphemes_would_be() {
        let area = Rect::new(0, 0, 12, 1);
        for text in [
            "",
            "7",
            "12.5",
            "a b",
            "kworker/0:1-events",
            "long name here",
        ] {
            for width in [0, 1, 4, 12] {
                for right in [false, true] {
                    let (mut fast, mut slow) = (Buffer::empty(area), Buffer::empty(area));
                    put(&mut fast, 0, 0, width, text, right);
                    put_graphemes(&mut slow, 0, 0, width, text, right);
                    assert_eq!(fast, slow, "{text:?} in {width}, right {right}");
                }
            }
        }
        // Anything else goes the graphemes' way (a control byte is not written).
        let mut b = Buffer::empty(area);
        put(&mut b, 0, 0, 12, "a\x1b[2Jb", false);
        assert_eq!(b[(0, 0)].symbol(), "a");
        assert_eq!(b[(1, 0)].symbol(), "[");
    }

    fn header_like_lines() -> Vec<Line<'static>> {
        let green = Style::default().fg(Color::Green);
        vec![
            Line::from(vec![
                Span::raw("  0["),
                Span::styled("|||||", green),
                Span::raw("      12.5%]"),
                Span::raw(" "),
                Span::raw("  1["),
                Span::styled("||", Style::default().fg(Color::Red)),
                Span::raw("       3.0%]"),
            ]),
            Line::raw("Load 0.12 0.30 0.25  Tasks 73 (1 running)"),
            Line::raw(""),
            Line::styled(
                "OOM 3 min ago: a line longer than the area is wide, cut at its edge",
                Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
            ),
            Line::raw("Temp 41°C  Freq 2.10 GHz"),
            Line::raw("eth0\x1b[2J name"),
            Line::from(vec![Span::raw("wide 漢字 "), Span::styled("x", green)]),
            Line::styled(
                "Source bpf  every 1.00 s",
                Style::default().add_modifier(Modifier::DIM),
            ),
        ]
    }

    #[test]
    fn lines_are_drawn_as_ratatui_draws_them() {
        let lines = header_like_lines();
        for (w, h) in [(40, 10), (7, 3), (1, 1), (80, 8)] {
            // Inside a larger buffer, off its origin, as the header is.
            let whole = Rect::new(0, 0, 90, 12);
            let area = Rect::new(2, 1, w, h);
            let (mut ours, mut lined) = (Buffer::empty(whole), Buffer::empty(whole));
            put_lines(&mut ours, area, &lines);
            for (line, y) in lines.iter().zip(area.top()..area.bottom()) {
                lined.set_line(area.x, y, line, area.width);
            }
            assert_eq!(ours, lined, "{w}×{h}");
            // And for the lines that are printable ASCII, cell for cell what the
            // Paragraph drew before.
            let ascii: Vec<Line> = lines
                .iter()
                .filter(|l| l.spans.iter().all(|s| one_cell_a_byte(&s.content)))
                .cloned()
                .collect();
            let (mut ours, mut para) = (Buffer::empty(whole), Buffer::empty(whole));
            put_lines(&mut ours, area, &ascii);
            Paragraph::new(ascii.clone()).render(area, &mut para);
            assert_eq!(ours, para, "{w}×{h}");
        }
    }
}
