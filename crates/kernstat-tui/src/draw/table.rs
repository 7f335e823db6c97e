//! The process table: its columns (shown as the width allows), the rows that fit.

use std::fmt::Write as _;

use ratatui::layout::Rect;
use ratatui::style::{Color, Modifier, Style};
use ratatui::Frame;

use kernstat_render::table::write_cputime;
use kernstat_top::view::{tree_prefix, SortKey};

use super::header::human_bytes;
use super::text::put;
use crate::App;

/// A table column: header, width, sort key, right-aligned.
struct Col {
    title: &'static str,
    width: u16,
    key: SortKey,
    right: bool,
}

const COLS: [Col; 17] = [
    Col {
        title: "PID",
        width: 7,
        key: SortKey::Pid,
        right: true,
    },
    Col {
        title: "USER",
        width: 9,
        key: SortKey::User,
        right: false,
    },
    Col {
        title: "PRI",
        width: 3,
        key: SortKey::Pri,
        right: true,
    },
    Col {
        title: "NI",
        width: 3,
        key: SortKey::Nice,
        right: true,
    },
    Col {
        title: "THR",
        width: 4,
        key: SortKey::Threads,
        right: true,
    },
    Col {
        title: "S",
        width: 1,
        key: SortKey::State,
        right: false,
    },
    Col {
        title: "CPU%",
        width: 5,
        key: SortKey::Cpu,
        right: true,
    },
    Col {
        title: "RES",
        width: 6,
        key: SortKey::Mem,
        right: true,
    },
    Col {
        title: "READ/s",
        width: 7,
        key: SortKey::Read,
        right: true,
    },
    Col {
        title: "WRITE/s",
        width: 8,
        key: SortKey::Write,
        right: true,
    },
    Col {
        title: "NET_RX/s",
        width: 9,
        key: SortKey::NetRx,
        right: true,
    },
    Col {
        title: "NET_TX/s",
        width: 9,
        key: SortKey::NetTx,
        right: true,
    },
    Col {
        title: "TIME+",
        width: 9,
        key: SortKey::Time,
        right: true,
    },
    Col {
        title: "RQ p99",
        width: 7,
        key: SortKey::RunqP99,
        right: true,
    },
    Col {
        title: "WCALL/s",
        width: 8,
        key: SortKey::WriteCalls,
        right: true,
    },
    Col {
        title: "SMALL%",
        width: 7,
        key: SortKey::SmallShare,
        right: true,
    },
    Col {
        title: "RETR/s",
        width: 7,
        key: SortKey::Retrans,
        right: true,
    },
];

/// Width the command column keeps at least; narrower terminals drop the I/O columns
/// first, then TIME+.
const MIN_COMMAND: u16 = 20;

fn shown_columns(width: u16, shown: impl Fn(SortKey) -> bool) -> Vec<&'static Col> {
    let mut cols: Vec<&Col> = COLS.iter().filter(|c| shown(c.key)).collect();
    for drop in [
        SortKey::Read,
        SortKey::Write,
        SortKey::NetTx,
        SortKey::NetRx,
        SortKey::Time,
        SortKey::Pri,
        SortKey::Threads,
    ] {
        let used: u16 = cols.iter().map(|c| c.width + 1).sum();
        if used + MIN_COMMAND <= width {
            break;
        }
        cols.retain(|c| c.key != drop);
    }
    cols
}

/// The table, written straight into the frame's buffer: a row is its style over the
/// line, then each cell's text (no Row, Cell and Span per cell, and no layout solver:
/// `perf record` of a refresh found building those ~40 % of the draw).
pub(super) fn draw_table(f: &mut Frame, app: &mut App, area: Rect) {
    let cols = shown_columns(area.width, crate::keys::shown_columns(app));
    let height = area.height.saturating_sub(1) as usize;
    app.page = height;
    app.table_top = area.y;
    app.view.scroll_into_view(height);
    app.header_hits.clear();
    if area.height == 0 || area.width == 0 {
        return;
    }
    let buffer = f.buffer_mut();
    let right_edge = area.x + area.width;
    // Where each column starts, as many as fit.
    let mut starts: Vec<(u16, &Col)> = Vec::with_capacity(cols.len());
    let mut x = area.x;
    for c in &cols {
        if x >= right_edge {
            break;
        }
        starts.push((x, c));
        x = x.saturating_add(c.width + 1);
    }
    let cmd_x = x.min(right_edge);
    // Header, with the sort column marked, and where each title is on screen.
    let head_style = if app.color {
        Style::default().bg(Color::Green).fg(Color::Black)
    } else {
        Style::default().add_modifier(Modifier::REVERSED)
    };
    buffer.set_style(Rect::new(area.x, area.y, area.width, 1), head_style);
    let arrow = if app.view.descending { "▼" } else { "▲" };
    let mut buf = String::new();
    for &(x, c) in &starts {
        app.header_hits.push((x, x + c.width + 1, c.key));
        buf.clear();
        buf.push_str(c.title);
        if c.key == app.view.sort {
            buf.push_str(arrow);
        }
        let width = c.width.min(right_edge - x);
        put(buffer, x, area.y, width, &buf, c.right);
    }
    app.header_hits.push((cmd_x, right_edge, SortKey::Cmd));
    buf.clear();
    buf.push_str("COMMAND");
    if app.view.sort == SortKey::Cmd {
        buf.push_str(arrow);
    }
    if app.view.tree {
        buf.push_str(" (tree)");
    }
    put(buffer, cmd_x, area.y, right_edge - cmd_x, &buf, false);

    let cursor = app.view.cursor();
    let mut prefix = String::new();
    for (row, (n, line)) in app
        .view
        .lines()
        .iter()
        .enumerate()
        .skip(app.view.offset)
        .take(height)
        .enumerate()
    {
        let y = area.y + 1 + row as u16;
        let p = &app.view.procs[line.index];
        let mut style = Style::default();
        if p.kthread && app.color {
            style = style.fg(Color::DarkGray);
        }
        if Some(n) == cursor {
            style = if app.color {
                Style::default().bg(Color::Cyan).fg(Color::Black)
            } else {
                Style::default().add_modifier(Modifier::REVERSED)
            };
        }
        if style != Style::default() {
            buffer.set_style(Rect::new(area.x, y, area.width, 1), style);
        }
        for &(x, c) in &starts {
            buf.clear();
            cell_text(&mut buf, c.key, p);
            put(buffer, x, y, c.width.min(right_edge - x), &buf, c.right);
        }
        tree_prefix(line, &mut prefix);
        buf.clear();
        buf.push_str(&prefix);
        buf.push_str(&p.cmd);
        put(buffer, cmd_x, y, right_edge - cmd_x, &buf, false);
    }
}

/// One cell's text (the command is not one of them).
fn cell_text(buf: &mut String, key: SortKey, p: &kernstat_top::view::Proc) {
    match key {
        SortKey::Pid => {
            let _ = write!(buf, "{}", p.pid);
        }
        SortKey::User => buf.push_str(&p.user),
        SortKey::Pri => {
            let _ = write!(buf, "{}", p.prio);
        }
        SortKey::Nice => {
            let _ = write!(buf, "{}", p.nice);
        }
        SortKey::Threads => {
            let _ = write!(buf, "{}", p.threads);
        }
        SortKey::State => buf.push(p.state),
        SortKey::Cpu => {
            let _ = write!(buf, "{:.1}", p.cpu_percent);
        }
        SortKey::Mem => human_bytes(buf, p.rss_bytes as f64),
        SortKey::Read => human_bytes(buf, p.read_bps),
        SortKey::Write => human_bytes(buf, p.write_bps),
        SortKey::NetRx => measured(buf, p.net_rx_bps, human_bytes),
        SortKey::NetTx => measured(buf, p.net_tx_bps, human_bytes),
        SortKey::Time => {
            let _ = write_cputime(buf, p.cpu_ns);
        }
        SortKey::RunqP99 => measured(buf, p.runq_p99_us, |b, v| {
            let _ = write!(b, "{v:.0}");
        }),
        SortKey::WriteCalls => measured(buf, p.write_calls_per_s, |b, v| {
            let _ = write!(b, "{v:.0}");
        }),
        SortKey::SmallShare => measured(buf, p.small_write_share, |b, v| {
            let _ = write!(b, "{:.0}", v * 100.0);
        }),
        SortKey::Retrans => measured(buf, p.tcp_retrans_per_s, |b, v| {
            let _ = write!(b, "{v:.1}");
        }),
        SortKey::Cmd => {}
    }
}

/// A figure only some refreshes or machines have: `-` when it was not measured, never a
/// zero that was not.
fn measured(buf: &mut String, v: Option<f64>, write: impl FnOnce(&mut String, f64)) {
    match v {
        Some(v) => write(buf, v),
        None => buf.push('-'),
    }
}
