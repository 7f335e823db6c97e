//! The run-queue and write-size panels, and the cgroup view in the table's place.

use std::fmt::Write as _;

use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Paragraph, Row, Table};
use ratatui::Frame;

use super::header::human_bytes;
use crate::App;

pub(super) fn runq_panel(app: &App, f: &mut Frame, area: Rect) {
    let Some(rq) = &app.runq else { return };
    let h = &rq.machine;
    let count = h.count();
    let pct = |p: f64| {
        h.percentile(p)
            .map(|v| format!("{v:.0}"))
            .unwrap_or_else(|| "-".into())
    };
    let title = format!(
        " run-queue latency, all CPUs, last interval: {count} wake-ups  p50 {} µs  p99 {} µs  ({}) ",
        pct(0.5),
        pct(0.99),
        rq.attach
    );
    let block = Block::default().borders(Borders::TOP).title(title);
    let inner = block.inner(area);
    f.render_widget(block, area);
    let buckets = h.log2();
    let first = buckets.iter().position(|b| b.count > 0);
    let last = buckets.iter().rposition(|b| b.count > 0);
    let (Some(first), Some(last)) = (first, last) else {
        f.render_widget(Paragraph::new("no wake-ups in this interval"), inner);
        return;
    };
    let shown = &buckets[first..=last];
    let rows = inner.height.max(1) as usize;
    let columns = shown.len().div_ceil(rows).max(1);
    let col_w = (inner.width as usize / columns).max(20);
    let max = shown.iter().map(|b| b.count).max().unwrap_or(1).max(1);
    let mut lines: Vec<Line> = Vec::with_capacity(rows);
    for r in 0..rows.min(shown.len()) {
        let mut spans = Vec::new();
        for c in 0..columns {
            let Some(b) = shown.get(c * rows + r) else {
                continue;
            };
            let label = format!("{:>7}-{:<7} µs {:>8} ", b.lo, b.hi, b.count);
            let bar_w = col_w.saturating_sub(label.chars().count() + 1);
            let n = (b.count as f64 / max as f64 * bar_w as f64).round() as usize;
            spans.push(Span::raw(label));
            spans.push(Span::styled(
                format!("{:<bar_w$} ", "*".repeat(n)),
                if app.color {
                    Style::default().fg(Color::Cyan)
                } else {
                    Style::default()
                },
            ));
        }
        lines.push(Line::from(spans));
    }
    f.render_widget(Paragraph::new(lines), inner);
}

/// The busiest writers of the interval: calls/s, mean size, the small share, and what
/// to do when the thresholds say small-write syndrome.
pub(super) fn writes_panel(app: &App, f: &mut Frame, area: Rect) {
    let Some(w) = &app.writes else { return };
    let total: f64 = w.verdicts.iter().map(|v| v.calls_per_s).sum();
    let title = format!(
        " write calls, last interval: {total:.0}/s from {} process{}; small: under {} bytes  ({}) ",
        w.verdicts.len(),
        if w.verdicts.len() == 1 { "" } else { "es" },
        w.thresholds.small_bytes,
        w.attach
    );
    let block = Block::default().borders(Borders::TOP).title(title);
    let inner = block.inner(area);
    f.render_widget(block, area);
    let mut lines = vec![Line::styled(
        format!(
            "{:>7} {:<15} {:>9} {:>10} {:>6}  {}",
            "PID", "COMMAND", "CALLS/s", "MEAN B", "SMALL%", "VERDICT"
        ),
        Style::default().add_modifier(Modifier::BOLD),
    )];
    let shown = w.verdicts.iter().filter(|v| app.view.shows_process(v.pid));
    for v in shown.take(inner.height.saturating_sub(1) as usize) {
        let verdict = if v.small_writes {
            v.advice.as_str()
        } else {
            ""
        };
        let style = if v.small_writes && app.color {
            Style::default().fg(Color::Yellow)
        } else {
            Style::default()
        };
        lines.push(Line::styled(
            format!(
                "{:>7} {:<15} {:>9.0} {:>10.0} {:>6.0}  {verdict}",
                v.pid,
                v.comm,
                v.calls_per_s,
                v.mean_bytes,
                v.small_share * 100.0
            ),
            style,
        ));
    }
    f.render_widget(Paragraph::new(lines), inner);
}

/// Block I/O per device and operation: the last interval's requests per second, MB/s,
/// 50th and 99th percentile latency, errors, and the requests since the panel opened.
pub(super) fn disks_panel(app: &App, f: &mut Frame, area: Rect) {
    let Some(d) = &app.disks else { return };
    let total: u64 = d.rows.iter().map(|r| r.interval.count).sum();
    let per_s = |n: f64| if d.seconds > 0.0 { n / d.seconds } else { 0.0 };
    let title = format!(
        " disk latency, last interval: {:.0} requests/s, issue to completion  ({}) ",
        per_s(total as f64),
        d.attach
    );
    let block = Block::default().borders(Borders::TOP).title(title);
    let inner = block.inner(area);
    f.render_widget(block, area);
    let mut lines = vec![Line::styled(
        format!(
            "{:<14} {:<8} {:>9} {:>9} {:>10} {:>10} {:>6} {:>10}",
            "DISK", "OP", "REQ/s", "MB/s", "P50", "P99", "ERR", "SINCE ON"
        ),
        Style::default().add_modifier(Modifier::BOLD),
    )];
    let latency = |us: Option<f64>| match us {
        Some(v) if v >= 1000.0 => format!("{:.1} ms", v / 1000.0),
        Some(v) => format!("{v:.0} µs"),
        None => "-".into(),
    };
    for r in d.rows.iter().take(inner.height.saturating_sub(1) as usize) {
        let i = &r.interval;
        lines.push(Line::raw(format!(
            "{:<14} {:<8} {:>9.0} {:>9.2} {:>10} {:>10} {:>6} {:>10}",
            super::printable(&i.disk),
            i.op.name(),
            per_s(i.count as f64),
            per_s(i.bytes as f64) / 1e6,
            latency(i.percentile_us(0.50)),
            latency(i.percentile_us(0.99)),
            i.errors,
            r.total
        )));
    }
    f.render_widget(Paragraph::new(lines), inner);
}

/// The cgroup view: a tree of groups with their figures over the interval.
pub(super) fn draw_cgroups(f: &mut Frame, app: &mut App, area: Rect) {
    let height = area.height.saturating_sub(1) as usize;
    app.page = height;
    let color = app.color;
    let Some(panel) = app.cgroups.as_mut() else {
        return;
    };
    let cursor = panel.cursor_line();
    if cursor < panel.offset {
        panel.offset = cursor;
    } else if height > 0 && cursor >= panel.offset + height {
        panel.offset = cursor + 1 - height;
    }
    let arrow = if panel.descending { "▼" } else { "▲" };
    let mut titles: Vec<Cell> = kernstat_top::cgroups::COLUMNS
        .iter()
        .enumerate()
        .map(|(i, (_, t, w))| {
            let t = if panel.sort == Some(i) {
                format!("{t}{arrow}")
            } else {
                t.to_string()
            };
            Cell::from(format!("{t:>w$}", w = *w as usize))
        })
        .collect();
    let mut name_title = format!("CGROUP ({})", panel.layout);
    if panel.sort.is_none() {
        name_title.push('▲');
    }
    titles.push(Cell::from(name_title));
    let header = Row::new(titles).style(Style::default().add_modifier(Modifier::BOLD));
    let mut rows = Vec::with_capacity(height);
    for (n, line) in panel
        .lines()
        .iter()
        .enumerate()
        .skip(panel.offset)
        .take(height)
    {
        let g = &panel.rows[line.index];
        let mut cells: Vec<Cell> = Vec::with_capacity(10);
        for (i, (_, _, w)) in kernstat_top::cgroups::COLUMNS.iter().enumerate() {
            let mut buf = String::new();
            match kernstat_top::cgroups::CgroupPanel::value(g, i) {
                None => buf.push('-'),
                Some(v) => match i {
                    2..=4 => human_bytes(&mut buf, v),
                    8 => {
                        let _ = write!(buf, "{v:.0}");
                    }
                    _ => {
                        let _ = write!(buf, "{v:.1}");
                    }
                },
            }
            cells.push(Cell::from(format!("{buf:>w$}", w = *w as usize)));
        }
        let name = if g.path == "/" {
            "/"
        } else {
            g.path.rsplit('/').next().unwrap_or(&g.path)
        };
        let mark = match (line.parent, line.folded) {
            (true, true) => "▸ ",
            (true, false) => "▾ ",
            _ => "  ",
        };
        let indent = "  ".repeat((g.depth as usize).min(16));
        cells.push(Cell::from(format!(
            "{indent}{mark}{}",
            super::printable(name)
        )));
        let style = if n == cursor {
            if color {
                Style::default().bg(Color::Cyan).fg(Color::Black)
            } else {
                Style::default().add_modifier(Modifier::REVERSED)
            }
        } else {
            Style::default()
        };
        rows.push(Row::new(cells).style(style));
    }
    let mut widths: Vec<Constraint> = kernstat_top::cgroups::COLUMNS
        .iter()
        .map(|(_, _, w)| Constraint::Length(*w))
        .collect();
    widths.push(Constraint::Fill(1));
    f.render_widget(
        Table::new(rows, widths).header(header).column_spacing(1),
        area,
    );
}
