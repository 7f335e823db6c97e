//! The header: per-core bars, memory, load, pressure, hardware, the links and kernstat's own cost.

use std::fmt::Write as _;

use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};

use crate::App;

/// Bytes as the bar writes them (0B, 812K, 3.1G).
pub(super) fn human_bytes(out: &mut String, n: f64) {
    let _ = kernstat_render::human::bytes(out, n);
}

pub(super) fn level_color(app: &App, percent: f64) -> Style {
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
pub(super) fn bar<'a>(app: &App, label: &str, percent: f64, text: &str, width: u16) -> Line<'a> {
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

pub(super) fn header_lines(app: &App, width: u16, max_core_rows: usize) -> Vec<Line<'static>> {
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
    if let Some((ago, line)) = &m.oom {
        lines.push(Line::styled(
            format!("OOM {} min ago: {line}", ago.as_secs() / 60),
            Style::default().fg(Color::Red).add_modifier(Modifier::BOLD),
        ));
    }

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
            r.interval_s()
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
    if let Some(d) = &app.disks {
        if let Some(p) = d.cost_percent {
            let _ = write!(c, " + disk probe {p:.3}%");
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
fn network_line(m: &kernstat_top::sample::Machine) -> String {
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
            if k.incomplete {
                // Some processes had no entry of their own in the collector's table:
                // the totals hold them, the process rows do not.
                let _ = write!(
                    n,
                    " per process incomplete: {} user(s) past their share, ",
                    k.crowded_users
                );
                rate(&mut n, k.crowded_rx_bps + k.crowded_tx_bps);
                n.push_str(" not in rows");
            }
        }
        (None, Some(why)) => {
            let _ = write!(n, " per process: unavailable ({why})");
        }
        (None, None) => n.push_str(" per process: unavailable"),
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_network_line_says_when_rows_miss_processes() {
        let mut m = kernstat_top::sample::Machine {
            net: Some(kernstat_model::net::NetModel {
                tx_bps: 3000.0,
                ..Default::default()
            }),
            ..Default::default()
        };
        let whole = network_line(&m);
        assert!(whole.ends_with("(by caller)"), "{whole}");
        let n = m.net.as_mut().unwrap();
        (n.incomplete, n.crowded_users, n.crowded_tx_bps) = (true, 1, 2048.0);
        let short = network_line(&m);
        assert!(
            short.ends_with(
                "per process incomplete: 1 user(s) past their share, 2.0K/s not in rows"
            ),
            "{short}"
        );
    }
}
