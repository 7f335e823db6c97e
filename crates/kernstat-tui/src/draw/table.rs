//! The process table: its columns (shown as the width allows), the rows that fit.

use std::fmt::Write as _;

use ratatui::layout::{Constraint, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::widgets::{Cell, Row, Table};
use ratatui::Frame;

use kernstat_render::table::write_cputime;
use kernstat_top::view::{tree_prefix, SortKey};

use super::header::human_bytes;
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

pub(super) fn draw_table(f: &mut Frame, app: &mut App, area: Rect) {
    let cols = shown_columns(area.width, crate::keys::shown_columns(app));
    let height = area.height.saturating_sub(1) as usize;
    app.page = height;
    app.table_top = area.y;
    app.view.scroll_into_view(height);
    // Header, with the sort column marked, and where each title is on screen.
    app.header_hits.clear();
    let mut x = area.x;
    let mut titles: Vec<Cell> = Vec::with_capacity(cols.len() + 1);
    let arrow = if app.view.descending { "▼" } else { "▲" };
    for c in &cols {
        app.header_hits.push((x, x + c.width + 1, c.key));
        x += c.width + 1;
        let t = if c.key == app.view.sort {
            format!("{}{arrow}", c.title)
        } else {
            c.title.to_string()
        };
        let t = if c.right {
            format!("{t:>w$}", w = c.width as usize)
        } else {
            t
        };
        titles.push(Cell::from(t));
    }
    app.header_hits.push((x, area.x + area.width, SortKey::Cmd));
    let mut cmd_title = String::from("COMMAND");
    if app.view.sort == SortKey::Cmd {
        cmd_title.push_str(arrow);
    }
    if app.view.tree {
        cmd_title.push_str(" (tree)");
    }
    titles.push(Cell::from(cmd_title));
    let head_style = if app.color {
        Style::default().bg(Color::Green).fg(Color::Black)
    } else {
        Style::default().add_modifier(Modifier::REVERSED)
    };
    let header = Row::new(titles).style(head_style);

    let cursor = app.view.cursor();
    let mut rows: Vec<Row> = Vec::with_capacity(height);
    let mut prefix = String::new();
    let mut buf = String::new();
    for (n, line) in app
        .view
        .lines()
        .iter()
        .enumerate()
        .skip(app.view.offset)
        .take(height)
    {
        let p = &app.view.procs[line.index];
        let mut cells: Vec<Cell> = Vec::with_capacity(cols.len() + 1);
        for c in &cols {
            buf.clear();
            match c.key {
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
                SortKey::Mem => human_bytes(&mut buf, p.rss_bytes as f64),
                SortKey::Read => human_bytes(&mut buf, p.read_bps),
                SortKey::Write => human_bytes(&mut buf, p.write_bps),
                SortKey::NetRx | SortKey::NetTx => {
                    let v = if c.key == SortKey::NetRx {
                        p.net_rx_bps
                    } else {
                        p.net_tx_bps
                    };
                    match v {
                        Some(v) => human_bytes(&mut buf, v),
                        None => buf.push('-'),
                    }
                }
                SortKey::Time => {
                    let _ = write_cputime(&mut buf, p.cpu_ns);
                }
                SortKey::RunqP99 => match p.runq_p99_us {
                    Some(v) => {
                        let _ = write!(buf, "{v:.0}");
                    }
                    None => buf.push('-'),
                },
                SortKey::WriteCalls => match p.write_calls_per_s {
                    Some(v) => {
                        let _ = write!(buf, "{v:.0}");
                    }
                    None => buf.push('-'),
                },
                SortKey::SmallShare => match p.small_write_share {
                    Some(v) => {
                        let _ = write!(buf, "{:.0}", v * 100.0);
                    }
                    None => buf.push('-'),
                },
                SortKey::Retrans => match p.tcp_retrans_per_s {
                    Some(v) => {
                        let _ = write!(buf, "{v:.1}");
                    }
                    None => buf.push('-'),
                },
                SortKey::Cmd => {}
            }
            let w = c.width as usize;
            let text = if c.right {
                format!("{buf:>w$}")
            } else {
                buf.chars().take(w).collect()
            };
            cells.push(Cell::from(text));
        }
        tree_prefix(line, &mut prefix);
        let mut cmd = String::with_capacity(prefix.len() + p.cmd.len());
        cmd.push_str(&prefix);
        cmd.push_str(&p.cmd);
        cells.push(Cell::from(cmd));
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
        rows.push(Row::new(cells).style(style));
    }
    let mut widths: Vec<Constraint> = cols.iter().map(|c| Constraint::Length(c.width)).collect();
    widths.push(Constraint::Fill(1));
    let table = Table::new(rows, widths).header(header).column_spacing(1);
    f.render_widget(table, area);
}
