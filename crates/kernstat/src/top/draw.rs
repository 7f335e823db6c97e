//! Rendering of `top` with ratatui: header, run-queue and write-size panels, table,
//! footer and the dialogs. Only the rows that fit are turned into cells (a 10,000-process
//! table costs the same to draw as a 50-process one).
//!
//! Colour only marks levels (bars, the selection is reverse video), so the view reads the
//! same with `NO_COLOR`.

use std::fmt::Write as _;

use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Cell, Clear, Paragraph, Row, Table};
use ratatui::Frame;

use kernstat_render::table::write_cputime;

use super::view::{tree_prefix, SortKey};
use super::{App, Mode, SIGNALS};

/// A table column: header, width, sort key, right-aligned.
struct Col {
    title: &'static str,
    width: u16,
    key: SortKey,
    right: bool,
}

const COLS: [Col; 16] = [
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

/// Bytes as the bar writes them (0B, 812K, 3.1G).
fn human_bytes(out: &mut String, n: f64) {
    let _ = kernstat_render::human::bytes(out, n);
}

fn level_color(app: &App, percent: f64) -> Style {
    if !app.color {
        return Style::default();
    }
    Style::default().fg(if percent >= 90.0 {
        Color::Red
    } else if percent >= 60.0 {
        Color::Yellow
    } else {
        Color::Green
    })
}

/// `label[|||||     42.0%]` in `width` cells.
fn bar<'a>(app: &App, label: &str, percent: f64, text: &str, width: u16) -> Line<'a> {
    let inner = (width as usize).saturating_sub(label.len() + 2);
    let filled = ((percent.clamp(0.0, 100.0) / 100.0) * inner as f64).round() as usize;
    let filled = filled.min(inner.saturating_sub(text.len()));
    let gap = inner.saturating_sub(filled + text.len());
    Line::from(vec![
        Span::raw(format!("{label}[")),
        Span::styled("|".repeat(filled), level_color(app, percent)),
        Span::raw(" ".repeat(gap)),
        Span::raw(text.to_string()),
        Span::raw("]"),
    ])
}

fn header_lines(app: &App, width: u16, max_core_rows: usize) -> Vec<Line<'static>> {
    let m = &app.machine;
    let mut lines = Vec::new();
    let n = m.core_busy.len().max(1);
    let rows = n.min(max_core_rows.max(1));
    let per_row = n.div_ceil(rows);
    let cell = (width / per_row as u16).max(12);
    for r in 0..rows {
        let mut spans: Vec<Span> = Vec::new();
        for c in 0..per_row {
            let i = c * rows + r;
            let Some(&busy) = m.core_busy.get(i) else {
                continue;
            };
            let label = format!("{i:>3}");
            let b = bar(
                app,
                &label,
                busy,
                &format!("{busy:.1}%"),
                cell.saturating_sub(1),
            );
            spans.extend(b.spans);
            spans.push(Span::raw(" "));
        }
        lines.push(Line::from(spans));
    }
    let mem = &m.mem;
    let used = mem.total.saturating_sub(mem.available);
    let mut t = String::new();
    human_bytes(&mut t, used as f64);
    t.push('/');
    human_bytes(&mut t, mem.total as f64);
    let half = width / 2;
    let mem_pct = if mem.total > 0 {
        used as f64 / mem.total as f64 * 100.0
    } else {
        0.0
    };
    let mut spans = bar(app, "Mem", mem_pct, &t, half.saturating_sub(1)).spans;
    let swap_used = mem.swap_total.saturating_sub(mem.swap_free);
    let mut s = String::new();
    human_bytes(&mut s, swap_used as f64);
    s.push('/');
    human_bytes(&mut s, mem.swap_total as f64);
    let swap_pct = if mem.swap_total > 0 {
        swap_used as f64 / mem.swap_total as f64 * 100.0
    } else {
        0.0
    };
    spans.push(Span::raw(" "));
    spans.extend(bar(app, "Swp", swap_pct, &s, width - half).spans);
    lines.push(Line::from(spans));

    let mut l = format!(
        "Load {:.2} {:.2} {:.2}  Tasks {} ({} running)",
        m.load[0], m.load[1], m.load[2], m.tasks, m.running
    );
    let psi = &m.psi;
    let avg = |p: Option<kernstat_model::PsiLine>| p.map(|p| p.avg10);
    if psi.cpu_some.is_some() || psi.memory_some.is_some() || psi.io_some.is_some() {
        let f = |v: Option<f32>| v.map(|v| format!("{v:.1}")).unwrap_or_else(|| "-".into());
        let _ = write!(
            l,
            "  PSI avg10 cpu {} mem {}/{} io {}/{} (some/full %)",
            f(avg(psi.cpu_some)),
            f(avg(psi.memory_some)),
            f(avg(psi.memory_full)),
            f(avg(psi.io_some)),
            f(avg(psi.io_full)),
        );
    }
    lines.push(Line::raw(l));
    lines.push(Line::raw(network_line(m)));

    let hw = &m.hw;
    let mut h = String::new();
    if let Some(t) = hw.temp_c {
        let _ = write!(h, "Temp {t:.0}°C  ");
    }
    if let Some(f) = hw.cpu_freq_mhz {
        let _ = write!(h, "Freq {:.2} GHz  ", f / 1000.0);
    }
    if let Some(g) = &hw.gpu {
        if let Some(b) = g.busy_percent {
            let _ = write!(h, "GPU {b:.0}%  ");
        }
    }
    if let Some(b) = &hw.battery {
        let _ = write!(h, "Bat {:.0}% {}  ", b.percent, b.status.as_str());
    }
    if !h.is_empty() {
        lines.push(Line::raw(h.trim_end().to_string()));
    }

    let mut c = format!("Source {}", m.source);
    if m.source == "procfs" {
        c.push_str(" (no BPF)");
    }
    if let Some(r) = &app.replay {
        let _ = write!(
            c,
            "  RECORDED {}  over {:.1} s  (t: next sample, T: previous, b: jump)",
            r.stamp(),
            r.frame.model.interval_s
        );
    } else {
        let _ = write!(
            c,
            "  every {:.2} s  #{}",
            app.delay.as_secs_f64(),
            app.refreshes
        );
        match app.cost_percent {
            Some(p) => {
                let _ = write!(c, "  kernstat {p:.2}% of a core");
            }
            None => c.push_str("  kernstat cost: next refresh"),
        }
    }
    if let Some(rq) = &app.runq {
        if let Some(p) = rq.cost_percent {
            let _ = write!(c, " + runqlat probe {p:.3}%");
        }
    }
    if let Some(w) = &app.writes {
        if let Some(p) = w.cost_percent {
            let _ = write!(c, " + writes probe {p:.3}%");
        }
    }
    lines.push(Line::styled(
        c,
        Style::default().add_modifier(Modifier::DIM),
    ));
    lines
}

/// "Net eth0 rx 1.2M/s tx 40K/s  lo rx ...  sockets rx ... tx ... (by caller)": the
/// default route's link and the other busy ones, then all processes' socket bytes.
fn network_line(m: &super::sample::Machine) -> String {
    let mut n = String::from("Net");
    let rate = |out: &mut String, v: f64| {
        human_bytes(out, v);
        out.push_str("/s");
    };
    let mut shown = 0;
    for l in &m.links {
        // The default route's link always; others while they move (at most three).
        if !l.is_default && l.rx_bps + l.tx_bps < 1.0 || shown == 3 {
            continue;
        }
        shown += 1;
        let _ = write!(n, " {} rx ", l.name);
        rate(&mut n, l.rx_bps);
        n.push_str(" tx ");
        rate(&mut n, l.tx_bps);
        n.push(' ');
    }
    if shown == 0 {
        n.push_str(" no traffic on any link ");
    }
    match (&m.net, &m.net_unavailable) {
        (Some(k), _) => {
            n.push_str(" sockets rx ");
            rate(&mut n, k.rx_bps);
            n.push_str(" tx ");
            rate(&mut n, k.tx_bps);
            n.push_str(" (by caller)");
        }
        (None, Some(why)) => {
            let _ = write!(n, " per process: unavailable ({why})");
        }
        (None, None) => n.push_str(" per process: unavailable"),
    }
    n
}

fn runq_panel(app: &App, f: &mut Frame, area: Rect) {
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
fn writes_panel(app: &App, f: &mut Frame, area: Rect) {
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
    let [head, panel, wpanel, table_area, footer] = Layout::vertical([
        Constraint::Length(header.len() as u16),
        Constraint::Length(runq_h),
        Constraint::Length(writes_h),
        Constraint::Min(3),
        Constraint::Length(1),
    ])
    .areas(area);
    f.render_widget(Paragraph::new(header), head);
    if app.runq.is_some() {
        runq_panel(app, f, panel);
    }
    if app.writes.is_some() {
        writes_panel(app, f, wpanel);
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

fn draw_table(f: &mut Frame, app: &mut App, area: Rect) {
    let cols = shown_columns(area.width, super::shown_columns(app));
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

/// The cgroup view: a tree of groups with their figures over the interval.
fn draw_cgroups(f: &mut Frame, app: &mut App, area: Rect) {
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
    let mut titles: Vec<Cell> = super::cgroups::COLUMNS
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
        for (i, (_, _, w)) in super::cgroups::COLUMNS.iter().enumerate() {
            let mut buf = String::new();
            match super::cgroups::CgroupPanel::value(g, i) {
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
            crate::top::draw::printable(name)
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
    let mut widths: Vec<Constraint> = super::cgroups::COLUMNS
        .iter()
        .map(|(_, _, w)| Constraint::Length(*w))
        .collect();
    widths.push(Constraint::Fill(1));
    f.render_widget(
        Table::new(rows, widths).header(header).column_spacing(1),
        area,
    );
}

/// Text from the system (group names) with control characters made visible.
pub(crate) fn printable(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { '?' } else { c })
        .collect()
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
                    "?:help  /:filter  t:tree  P/M/T:sort  k:signal  C:cgroups  r:run-queue latency  w:write sizes  q:quit",
                ),
            }
            s
        }
    };
    f.render_widget(Paragraph::new(text), area);
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
