//! The bar's tooltip: the seed's sections (load and devices, CPU, memory, I/O) and a last
//! line that says what the sample cost. Lines for devices the machine lacks are left out.

use std::fmt::{self, Write};

use kernstat_model::{Model, TopEntry};

use crate::human::{self, markup_escaped};

/// What the tooltip shows beyond the model.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TooltipExtras {
    /// Wall time the sample took (read + model + render), microseconds.
    pub sample_us: f64,
    /// kernstat's own CPU (process + its BPF programs), percent of one core.
    pub self_cost_percent: Option<f64>,
    /// Escape for Pango markup (Waybar) or not (i3bar, text).
    pub markup: bool,
}

fn name(out: &mut String, e: &TopEntry, markup: bool) -> fmt::Result {
    let comm = e.comm.as_str();
    if markup {
        markup_escaped(out, comm)?;
    } else {
        out.push_str(comm);
    }
    let width = 16usize.saturating_sub(comm.chars().count());
    for _ in 0..width {
        out.push(' ');
    }
    Ok(())
}

/// A top-list line whose value is a sum of two rates, the second in `extra`:
/// "  name  R 1.0K/s W 2.0K/s" with `labels` ("R ", " W ").
fn split_rate(out: &mut String, e: &TopEntry, mk: bool, labels: (&str, &str)) -> fmt::Result {
    out.push_str("\n  ");
    name(out, e, mk)?;
    out.push_str(labels.0);
    human::rate(out, e.value - e.extra)?;
    out.push_str(labels.1);
    human::rate(out, e.extra)
}

/// The network section: the main link (and any other that moves), all processes'
/// socket bytes and the five busiest processes; nothing on a machine without links.
fn network(out: &mut String, m: &Model, mk: bool) -> fmt::Result {
    let Some(main) = kernstat_model::net::main_link(&m.links) else {
        return Ok(());
    };
    out.push_str("\n\nNetwork");
    for l in &m.links {
        let moving = l.rx_bps + l.tx_bps >= 1.0 && l.name.as_str() != "lo";
        if l.name != main.name && !moving {
            continue;
        }
        out.push_str(if l.name == main.name { " " } else { " · " });
        if mk {
            markup_escaped(out, l.name.as_str())?;
        } else {
            out.push_str(l.name.as_str());
        }
        out.push_str(" ↓ ");
        human::rate(out, l.rx_bps)?;
        out.push_str(" ↑ ");
        human::rate(out, l.tx_bps)?;
    }
    match &m.net {
        Some(n) => {
            out.push_str("\n  sockets ↓ ");
            human::rate(out, n.rx_bps)?;
            out.push_str(" ↑ ");
            human::rate(out, n.tx_bps)?;
            write!(out, " (by {})", n.attribution.as_str())?;
            if n.incomplete {
                write!(
                    out,
                    "\n  per process incomplete: {} user(s) past their share",
                    n.crowded_users
                )?;
            }
            for e in n.top.as_slice() {
                split_rate(out, e, mk, ("↓ ", " ↑ "))?;
            }
        }
        None => out.push_str("\n  per process: unavailable (needs BPF)"),
    }
    Ok(())
}

/// Writes the whole tooltip into `out` (appending). Lines are separated by '\n'.
pub fn write_tooltip(out: &mut String, m: &Model, x: &TooltipExtras) -> fmt::Result {
    let mk = x.markup;
    // Load, pressure, devices.
    write!(
        out,
        "Load {:.2} {:.2} {:.2}",
        m.load[0], m.load[1], m.load[2]
    )?;
    if let Some(c) = m.psi.cpu_some {
        write!(out, " · PSI cpu {:.1}%", c.avg10)?;
        if let Some(mem) = m.psi.memory_some {
            write!(out, " mem {:.1}%", mem.avg10)?;
        }
        if let Some(io) = m.psi.io_some {
            write!(out, " io {:.1}%", io.avg10)?;
        }
    }
    if let Some(g) = m.hw.gpu {
        out.push_str("\nGPU");
        if let Some(b) = m.gpu_busy_percent {
            write!(out, " {b:.0}%")?;
        }
        match (g.freq_mhz, g.max_freq_mhz) {
            (Some(f), Some(max)) => write!(out, " {f}/{max} MHz")?,
            (Some(f), None) => write!(out, " {f} MHz")?,
            _ => {}
        }
        if let (Some(u), Some(t)) = (g.vram_used, g.vram_total) {
            out.push_str(" · VRAM ");
            human::bytes(out, u as f64)?;
            out.push('/');
            human::bytes(out, t as f64)?;
        }
        if !g.throttle.is_empty() {
            write!(out, " · throttled: {}", g.throttle)?;
        }
    }
    if m.hw.power_profile.is_some() || m.hw.battery.is_some() {
        out.push('\n');
        if let Some(p) = m.hw.power_profile {
            write!(out, "Power profile {p}")?;
            if m.hw.battery.is_some() {
                out.push_str(" · ");
            }
        }
        if let Some(b) = m.hw.battery {
            write!(out, "Battery {:.0}% {}", b.percent, b.status)?;
            if let Some(w) = b.power_w {
                write!(out, " {w:.1} W")?;
            }
        }
    }

    // CPU.
    write!(out, "\n\nCPU {:.0}% ", m.cpu_percent)?;
    human::glyphs(out, &m.cores_percent)?;
    if let Some(t) = m.hw.temp_c {
        write!(out, " · {t:.0}°C")?;
    }
    match (m.hw.cpu_freq_mhz, m.hw.cpu_freq_max_mhz) {
        (Some(f), Some(max)) => write!(out, " · {:.0}/{:.0} MHz", f, max)?,
        (Some(f), None) => write!(out, " · {f:.0} MHz")?,
        _ => {}
    }
    write!(
        out,
        "\n  {} processes, {} tasks, {} running",
        m.process_count, m.task_count, m.running_tasks
    )?;
    if m.blocked_procs > 0 || m.zombie_procs > 0 {
        write!(out, "\n  D {} · Z {}", m.blocked_procs, m.zombie_procs)?;
        for e in m.blocked.as_slice().iter().chain(m.zombies.as_slice()) {
            out.push_str(" · ");
            if mk {
                markup_escaped(out, e.comm.as_str())?;
            } else {
                out.push_str(e.comm.as_str());
            }
            write!(out, " ({})", e.pid)?;
        }
    }
    for e in m.top_cpu.as_slice() {
        out.push_str("\n  ");
        name(out, e, mk)?;
        write!(out, "{:>6.1}%", e.value)?;
    }

    // Memory.
    out.push_str("\n\nMemory ");
    human::bytes(out, m.mem.used_bytes as f64)?;
    out.push_str(" / ");
    human::bytes(out, m.mem.total_bytes as f64)?;
    write!(out, " ({:.0}%) · avail ", m.mem.used_percent)?;
    human::bytes(out, m.mem.available_bytes as f64)?;
    if m.mem.swap_total_bytes > 0 {
        out.push_str(" · swap ");
        human::bytes(out, m.mem.swap_used_bytes as f64)?;
        out.push('/');
        human::bytes(out, m.mem.swap_total_bytes as f64)?;
        out.push_str(" in ");
        human::rate(out, m.swap_in_bps)?;
        out.push_str(" out ");
        human::rate(out, m.swap_out_bps)?;
    }
    if let Some(s) = m.psi.memory_some {
        write!(out, "\n  PSI some {:.2}%", s.avg10)?;
        if let Some(f) = m.psi.memory_full {
            write!(out, " full {:.2}%", f.avg10)?;
        }
    }
    for e in m.top_mem.as_slice() {
        out.push_str("\n  ");
        name(out, e, mk)?;
        out.push_str("  ");
        human::bytes(out, e.value)?;
    }

    // I/O.
    if !m.top_io.is_empty() {
        out.push_str("\n\nI/O");
        if let Some(s) = m.psi.io_some {
            write!(out, " · PSI some {:.2}%", s.avg10)?;
        }
        for e in m.top_io.as_slice() {
            split_rate(out, e, mk, ("R ", " W "))?;
        }
    }

    network(out, m, mk)?;

    // What this cost.
    write!(
        out,
        "\n\nsample {:.0} µs ({})",
        x.sample_us,
        m.source.as_str()
    )?;
    if let Some(c) = x.self_cost_percent {
        write!(out, " · kernstat {c:.3}% of a core")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernstat_model::{Comm, Hardware, Top};

    #[test]
    fn sections_and_escaping() {
        let mut top = Top::default();
        top.offer(TopEntry {
            pid: 7,
            comm: Comm::from_str_lossy("a<b>"),
            value: 42.0,
            extra: 0.0,
        });
        let m = Model {
            cpu_percent: 50.0,
            cores_percent: vec![100.0, 0.0],
            top_cpu: top,
            ..Default::default()
        };
        let mut s = String::new();
        write_tooltip(
            &mut s,
            &m,
            &TooltipExtras {
                sample_us: 42.0,
                self_cost_percent: Some(0.012),
                markup: true,
            },
        )
        .unwrap();
        assert!(s.contains("CPU 50% █▁"), "{s}");
        assert!(s.contains("a&lt;b&gt;"), "{s}");
        assert!(s.contains(" 42.0%"), "{s}");
        assert!(
            s.ends_with("sample 42 µs (bpf) · kernstat 0.012% of a core"),
            "{s}"
        );
        // No links: no network section.
        assert!(!s.contains("Network"), "{s}");
        // No GPU, battery or profile on this model: no such lines.
        assert!(!s.contains("GPU") && !s.contains("Battery") && !s.contains("profile"));
    }

    #[test]
    fn device_lines_when_present() {
        let m = Model {
            hw: Hardware {
                temp_c: Some(61.0),
                power_profile: Some(kernstat_model::ShortStr::from_str_lossy("balanced")),
                ..Default::default()
            },
            ..Default::default()
        };
        let mut s = String::new();
        write_tooltip(&mut s, &m, &TooltipExtras::default()).unwrap();
        assert!(s.contains("Power profile balanced"), "{s}");
        assert!(s.contains("· 61°C"), "{s}");
    }

    #[test]
    fn network_section_lists_the_busiest_or_says_unavailable() {
        use kernstat_model::net::{LinkRate, NetModel};
        use kernstat_model::text::ShortStr;
        let mut m = Model {
            links: vec![LinkRate {
                name: ShortStr::from_str_lossy("eth0"),
                is_default: true,
                rx_bps: 1024.0,
                ..Default::default()
            }],
            ..Default::default()
        };
        let tip = |m: &Model| {
            let mut s = String::new();
            write_tooltip(&mut s, m, &TooltipExtras::default()).unwrap();
            s
        };
        let s = tip(&m);
        assert!(s.contains("\n\nNetwork eth0 ↓ 1.0K/s ↑ 0B/s"), "{s}");
        assert!(s.contains("per process: unavailable (needs BPF)"), "{s}");
        let mut net = NetModel {
            rx_bps: 3072.0,
            ..Default::default()
        };
        net.top.offer(TopEntry {
            pid: 9,
            comm: Comm::from_str_lossy("curl"),
            value: 3072.0,
            extra: 1024.0,
        });
        m.net = Some(net);
        let s = tip(&m);
        assert!(s.contains("sockets ↓ 3.0K/s ↑ 0B/s (by caller)"), "{s}");
        assert!(s.contains("curl            ↓ 2.0K/s ↑ 1.0K/s"), "{s}");
    }
}
