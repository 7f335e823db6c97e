//! Rendering of `top` with ratatui: header, run-queue and write-size panels, table,
//! footer and the dialogs. Only the rows that fit are turned into cells (a 10,000-process
//! table costs the same to draw as a 50-process one).
//!
//! Colour only marks levels (bars, the selection is reverse video), so the view reads the
//! same with `NO_COLOR`.
//!
//! Split by what is drawn: `header` (cores, memory, pressure, network), `table` (the
//! process table), `panels` (run-queue and write-size panels, the cgroup view); this
//! module lays them out and draws the footer and the dialogs.

mod header;
mod panels;
mod table;
mod text;

use std::fmt::Write as _;

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::text::{Line, Text};
use ratatui::widgets::{Block, Borders, Clear, Paragraph};
use ratatui::Frame;

use crate::{App, Mode, SIGNALS};
use header::header_lines;
use panels::{disks_panel, draw_cgroups, runq_panel, writes_panel};
use table::draw_table;

/// Draws the whole screen and records where the table is (for the mouse).
pub(crate) fn draw(f: &mut Frame, app: &mut App) {
    let area = f.area();
    let max_core_rows = if area.height < 30 { 4 } else { 8 };
    let header = header_lines(app, area.width, max_core_rows);
    let runq_h = if app.runq.is_some() {
        (area.height / 4).clamp(4, 12)
    } else {
        0
    };
    let writes_h = if app.writes.is_some() {
        (area.height / 5).clamp(3, 8)
    } else {
        0
    };
    let disks_h = match &app.disks {
        Some(d) => (d.rows.len() as u16 + 2).clamp(3, (area.height / 5).max(3)),
        None => 0,
    };
    let [head, panel, wpanel, dpanel, table_area, footer] = Layout::vertical([
        Constraint::Length(header.len() as u16),
        Constraint::Length(runq_h),
        Constraint::Length(writes_h),
        Constraint::Length(disks_h),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(area);
    text::put_lines(f.buffer_mut(), head, &header);
    if app.runq.is_some() {
        runq_panel(app, f, panel);
    }
    if app.writes.is_some() {
        writes_panel(app, f, wpanel);
    }
    if app.disks.is_some() {
        disks_panel(app, f, dpanel);
    }
    if matches!(app.mode, Mode::Cgroups | Mode::CgroupFilter) && app.cgroups.is_some() {
        draw_cgroups(f, app, table_area);
    } else {
        draw_table(f, app, table_area);
    }
    draw_footer(f, app, footer);
    match app.mode.clone() {
        Mode::Help => draw_help(f, area),
        Mode::Signal(pid, comm, sig) => draw_signal(f, area, pid, &comm, sig),
        _ => {}
    }
}

/// Text from the system (group names) as the one rule has it (control characters as
/// spaces: kernstat-model's text::printable).
pub(crate) fn printable(s: &str) -> String {
    kernstat_model::text::printable(s).into_owned()
}

fn draw_footer(f: &mut Frame, app: &App, area: Rect) {
    let text = match &app.mode {
        Mode::Filter => format!("Filter: {}_   (Enter keep, Esc clear)", app.view.filter),
        Mode::Jump(typed) => {
            format!("Jump to: {typed}_   (03:12, -10m, 2026-11-25T03:12:00Z; Enter go, Esc cancel)")
        }
        Mode::CgroupFilter => format!(
            "Cgroup filter: {}_   (Enter keep, Esc clear)",
            app.cgroups.as_ref().map_or("", |p| p.filter.as_str())
        ),
        _ => {
            let mut s = String::new();
            if !app.view.filter.is_empty() {
                let _ = write!(s, "[filter: {}] ", app.view.filter);
            }
            if let Some(g) = &app.view.cgroup {
                let _ = write!(s, "[cgroup: {g}] ");
            }
            if app.threads {
                s.push_str("[threads] ");
            }
            if !app.view.kthreads {
                s.push_str("[no kernel threads] ");
            }
            match (&app.message, &app.replay) {
                (Some(m), _) => s.push_str(m),
                (None, Some(_)) => s.push_str(
                    "t:next sample  T:previous  b:jump to a time  ?:help  /:filter  F5:tree  P/M:sort  q:quit",
                ),
                (None, None) => s.push_str(
                    "?:help  /:filter  t:tree  P/M/T:sort  k:signal  C:cgroups  r:run-queue  w:writes  D:disks  q:quit",
                ),
            }
            s
        }
    };
    text::put_lines(f.buffer_mut(), area, &Text::from(text).lines);
}

fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    }
}

/// Every key, for the help screen (and docs/top.md).
pub(crate) const HELP: &[(&str, &str)] = &[
    (
        "Up/Down PgUp/PgDn Home/End",
        "move the selection (it follows the process)",
    ),
    (
        "mouse",
        "click a row to select, a column title to sort; wheel scrolls",
    ),
    ("P M T N", "sort by CPU, memory, time, pid"),
    ("< > (F6)", "previous / next sort column"),
    ("I", "invert the sort order"),
    (
        "/ (F3)",
        "filter by command, user, cgroup or pid (the panels too); Esc clears",
    ),
    ("t (F5)", "tree on/off"),
    (
        "C",
        "cgroup view: groups as a tree (Left/Right fold, < > sort, / filter); Enter shows the selected group's processes, Esc all again",
    ),
    ("H", "threads on/off"),
    ("K", "kernel threads on/off"),
    (
        "r",
        "run-queue latency panel and RQ p99 column (loads the BPF probe; off detaches it)",
    ),
    (
        "w",
        "write-size panel and WCALL/s, SMALL% columns (loads the BPF probe; off detaches it)",
    ),
    (
        "D",
        "disk latency panel: requests, p50 and p99 per device and operation (loads the BPF probe)",
    ),
    (
        "R",
        "RETR/s column: TCP segments each process's sockets retransmitted (loads the BPF probe; off detaches it)",
    ),
    (
        "k (F9)",
        "send a signal to the selected process (asks first)",
    ),
    ("] (F8) / [ (F7)", "nice +1 / -1 (lowering needs root)"),
    ("+ / -", "refresh slower / faster"),
    (
        "t / T / b (with --at)",
        "a recorded moment: next sample / previous / jump to a time (tree: F5)",
    ),
    ("? h (F1)", "this help"),
    ("q (F10) Ctrl-C", "quit"),
];

fn draw_help(f: &mut Frame, area: Rect) {
    let r = centered(area, 96, HELP.len() as u16 + 4);
    let lines: Vec<Line> = HELP
        .iter()
        .map(|(k, what)| Line::raw(format!(" {k:<28} {what}")))
        .collect();
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines).block(
            Block::default()
                .borders(Borders::ALL)
                .title(" kernstat top: keys (any key closes) "),
        ),
        r,
    );
}

fn draw_signal(f: &mut Frame, area: Rect, pid: u32, comm: &str, sig: usize) {
    let r = centered(area, 64, 6);
    let (_, _, name) = SIGNALS[sig];
    let choices: Vec<String> = SIGNALS.iter().map(|(k, _, n)| format!("{k}:{n}")).collect();
    let lines = vec![
        Line::raw(format!(" Send SIG{name} to {pid} ({comm})?")),
        Line::raw(" y/Enter: send   n/Esc: cancel"),
        Line::raw(format!(" other signal: {}", choices.join(" "))),
    ];
    f.render_widget(Clear, r);
    f.render_widget(
        Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(" signal ")),
        r,
    );
}
