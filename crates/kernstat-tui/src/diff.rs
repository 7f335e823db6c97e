//! Which cells of a frame differ from the one on screen: what ratatui's `BufferDiff`
//! yields, found at less cost. ratatui compares every cell in full (`Cell::eq`, whose
//! symbol comparison is a `memcmp` call) and takes every cell's display width first;
//! with ratatui's terminal writing the result, that was a third of a `top` refresh's
//! drawing in `perf record --call-graph dwarf` (160×40, 73 processes: the diff 12.6 %
//! of the whole refresh, `Cell::eq` 6.9 %, `cell_width` 2.5 %). Here a row whose cells
//! are all one byte in both frames (nearly every row of `top`) is compared byte and
//! style only; any other row takes ratatui's rules cell by cell (wide characters,
//! emoji with VS16, a wide character's styled trailing cells, forced widths, skipped
//! cells), and a test checks both give what `Buffer::diff` gives. Rows are compared one
//! at a time: where ratatui walks one flat index, a cell covering cells past its row's
//! end would carry over into the next row. No text does (`set_stringn` stops at the
//! edge); only a `ForcedWidth` set by hand in the last columns could, and top sets none.

use ratatui::buffer::{Buffer, Cell, CellDiffOption, CellWidth};
use ratatui::style::{Color, Modifier};

/// Modifiers a blank cell shows (a wide character's trailing cells carry them).
const VISIBLE_ON_BLANK: Modifier = Modifier::REVERSED
    .union(Modifier::UNDERLINED)
    .union(Modifier::SLOW_BLINK)
    .union(Modifier::RAPID_BLINK)
    .union(Modifier::CROSSED_OUT);

/// Appends to `out` the index in `next.content` of every cell to write so that a screen
/// showing `prev` shows `next`, in order. Both buffers have the same area.
pub(crate) fn changed_cells(prev: &Buffer, next: &Buffer, out: &mut Vec<usize>) {
    debug_assert_eq!(prev.area, next.area);
    let width = next.area.width as usize;
    if width == 0 {
        return;
    }
    let len = prev.content.len().min(next.content.len());
    for start in (0..len).step_by(width) {
        let end = (start + width).min(len);
        let (p, n) = (&prev.content[start..end], &next.content[start..end]);
        if !plain_row(p, n, start, out) {
            any_row(p, n, start, out);
        }
    }
}

/// A row whose cells are one-byte symbols with no diff option in both frames: each cell
/// is its own width, so exactly the cells that differ are written. False (and nothing
/// appended) for any other row.
fn plain_row(prev: &[Cell], next: &[Cell], start: usize, out: &mut Vec<usize>) -> bool {
    let mark = out.len();
    for (i, (p, n)) in prev.iter().zip(next).enumerate() {
        let (ps, ns) = (p.symbol().as_bytes(), n.symbol().as_bytes());
        if ps.len() != 1
            || ns.len() != 1
            || p.diff_option != CellDiffOption::None
            || n.diff_option != CellDiffOption::None
        {
            out.truncate(mark);
            return false;
        }
        #[allow(deprecated)]
        let skips = (p.skip, n.skip);
        let differs = ps[0] != ns[0] || p.style() != n.style() || skips.0 != skips.1;
        if differs && !skips.1 {
            out.push(start + i);
        }
    }
    true
}

/// A cell ratatui never writes.
#[allow(deprecated)]
fn skipped(cell: &Cell) -> bool {
    matches!(cell.diff_option, CellDiffOption::Skip)
        || (cell.skip && matches!(cell.diff_option, CellDiffOption::None))
}

/// Cells a cell's symbol covers (a forced width wins).
fn cells_wide(cell: &Cell) -> usize {
    match cell.diff_option {
        CellDiffOption::ForcedWidth(w) => w.get() as usize,
        _ => cell.symbol().cell_width() as usize,
    }
}

/// Any row, cell by cell, by ratatui's rules.
fn any_row(prev: &[Cell], next: &[Cell], start: usize, out: &mut Vec<usize>) {
    let len = next.len();
    let mut i = 0;
    while i < len {
        let (p, n) = (&prev[i], &next[i]);
        if skipped(n) {
            i += 1;
            continue;
        }
        let wide = cells_wide(n);
        match n.diff_option {
            CellDiffOption::ForcedWidth(_) => {
                if n != p {
                    out.push(start + i);
                }
                i += wide.max(1);
                continue;
            }
            CellDiffOption::None if n == p => {
                i += wide.max(1);
                continue;
            }
            _ => {}
        }
        out.push(start + i);
        if wide > 1 && n.symbol().contains('\u{FE0F}') {
            // An emoji with VS16: some terminals leave its second cell stale, so a
            // covered cell whose symbol changed is written too.
            i = trailing(prev, next, i + 1, (i + wide).min(len), false, start, out);
        } else if wide > 1 {
            i += wide;
        } else if cells_wide(p) > wide
            && (p.bg != Color::Reset || p.modifier.intersects(VISIBLE_ON_BLANK))
        {
            // A wide character replaced by a narrow one: its styled trailing cells may
            // still show, so all are written.
            i = trailing(prev, next, i + 1, i + cells_wide(p), true, start, out);
        } else {
            i += 1;
        }
    }
}

/// The cells from `from` to `to` after a cell just written (see `any_row`); returns where
/// the row continues.
fn trailing(
    prev: &[Cell],
    next: &[Cell],
    from: usize,
    to: usize,
    all: bool,
    start: usize,
    out: &mut Vec<usize>,
) -> usize {
    let len = next.len();
    let (mut j, mut to) = (from, to.min(len));
    while j < to {
        let at = j;
        j += cells_wide(&next[at]).max(1);
        to = to.max(j).min(len);
        if !skipped(&next[at]) && (all || prev[at].symbol() != next[at].symbol()) {
            out.push(start + at);
        }
    }
    to
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::layout::Rect;
    use ratatui::style::Style;

    /// A small deterministic generator (no dependency for one test).
    struct Rng(u64);
    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    fn random_frame(rng: &mut Rng, area: Rect, plain_only: bool) -> Buffer {
        let mut b = Buffer::empty(area);
        let texts = [
            "a",
            "b",
            "12.5",
            "x y",
            "▼",
            "漢字",
            "°C",
            "👍\u{FE0F}",
            "é",
            "ｶﾞ",
            "\t",
        ];
        let styles = [
            Style::default(),
            Style::default().fg(Color::Green),
            Style::default().bg(Color::Cyan).fg(Color::Black),
            Style::default().add_modifier(Modifier::REVERSED),
            Style::default().add_modifier(Modifier::DIM),
        ];
        for _ in 0..rng.below(40) {
            let x = rng.below(area.width as u64) as u16;
            let y = rng.below(area.height as u64) as u16;
            let text = texts[rng.below(if plain_only { 4 } else { texts.len() as u64 }) as usize];
            let style = styles[rng.below(styles.len() as u64) as usize];
            b.set_stringn(x, y, text, (area.width - x) as usize, style);
            if plain_only || rng.below(8) != 0 {
                continue;
            }
            let cell = &mut b[(x, y)];
            match rng.below(4) {
                0 => {
                    cell.set_diff_option(CellDiffOption::Skip);
                }
                1 => {
                    cell.set_diff_option(CellDiffOption::AlwaysUpdate);
                }
                // Covering cells of its row only (see the module's header).
                2 if x + 2 <= area.width => {
                    let w = 1 + rng.below(2) as u16;
                    cell.set_diff_option(CellDiffOption::ForcedWidth(
                        std::num::NonZeroU16::new(w).unwrap(),
                    ));
                }
                _ => {
                    #[allow(deprecated)]
                    cell.set_skip(true);
                }
            }
        }
        b
    }

    #[test]
    fn the_cells_written_are_ratatuis() {
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let area = Rect::new(0, 0, 23, 7);
        let mut out = Vec::new();
        for round in 0..4000 {
            let plain_only = round % 2 == 0;
            let prev = random_frame(&mut rng, area, plain_only);
            let next = if rng.below(4) == 0 {
                prev.clone()
            } else {
                random_frame(&mut rng, area, plain_only)
            };
            out.clear();
            changed_cells(&prev, &next, &mut out);
            let ours: Vec<(u16, u16)> = out
                .iter()
                .map(|&i| {
                    let p = next.pos_of(i);
                    (p.0, p.1)
                })
                .collect();
            let theirs: Vec<(u16, u16)> =
                prev.diff(&next).iter().map(|&(x, y, _)| (x, y)).collect();
            assert_eq!(ours, theirs, "round {round}");
        }
    }
}
