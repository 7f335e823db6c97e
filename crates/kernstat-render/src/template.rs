//! Text templates such as `--text '{cpu}% {mem_used}'`: parsed once at startup into
//! segments, rendered every tick into a reused buffer.
//!
//! A field whose source the machine lacks (no battery, no GPU...) renders as nothing.

use std::fmt::{self, Write};

use kernstat_model::net::main_link;
use kernstat_model::Model;

use crate::human;

/// A template field. `FIELDS` lists them with their meaning.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Field {
    /// Machine CPU busy percent.
    Cpu,
    /// One glyph per CPU (▁..█).
    Cores,
    /// Memory used (total - available).
    MemUsed,
    /// Memory total.
    MemTotal,
    /// Memory available.
    MemAvail,
    /// Memory used percent.
    MemPercent,
    /// Swap used.
    SwapUsed,
    /// Load averages.
    Load1,
    /// 5-minute load.
    Load5,
    /// 15-minute load.
    Load15,
    /// PSI cpu some avg10.
    PsiCpu,
    /// PSI memory some avg10.
    PsiMem,
    /// PSI io some avg10.
    PsiIo,
    /// CPU temperature.
    Temp,
    /// CPU frequency in GHz.
    Freq,
    /// GPU busy percent.
    Gpu,
    /// GPU frequency in MHz.
    GpuFreq,
    /// Platform power profile.
    Profile,
    /// Battery percent.
    Battery,
    /// Process count.
    Procs,
    /// Processes in D state.
    Blocked,
    /// Zombie processes.
    Zombies,
    /// Command name of the top CPU user.
    Top,
    /// Bytes received per second on the main link.
    NetRx,
    /// Bytes sent per second on the main link.
    NetTx,
    /// The main link's name.
    NetLink,
    /// kernstat's own cost, percent of one core (with --self-cost).
    SelfCost,
}

/// Every field: name, meaning.
pub const FIELDS: &[(&str, Field, &str)] = &[
    ("cpu", Field::Cpu, "CPU busy %, all cores (e.g. 12)"),
    ("cores", Field::Cores, "one glyph per core (e.g. ▁▃▅█)"),
    (
        "mem_used",
        Field::MemUsed,
        "memory used, total - available (e.g. 3.1G)",
    ),
    ("mem_total", Field::MemTotal, "memory total"),
    ("mem_avail", Field::MemAvail, "memory available"),
    ("mem_percent", Field::MemPercent, "memory used % (e.g. 13)"),
    ("swap_used", Field::SwapUsed, "swap used"),
    ("load1", Field::Load1, "1-minute load average"),
    ("load5", Field::Load5, "5-minute load average"),
    ("load15", Field::Load15, "15-minute load average"),
    ("psi_cpu", Field::PsiCpu, "CPU pressure, some avg10 %"),
    ("psi_mem", Field::PsiMem, "memory pressure, some avg10 %"),
    ("psi_io", Field::PsiIo, "I/O pressure, some avg10 %"),
    ("temp", Field::Temp, "CPU temperature, °C (e.g. 61)"),
    ("freq", Field::Freq, "CPU frequency, GHz (e.g. 2.4)"),
    ("gpu", Field::Gpu, "GPU busy %"),
    ("gpu_freq", Field::GpuFreq, "GPU frequency, MHz"),
    ("profile", Field::Profile, "platform power profile"),
    ("battery", Field::Battery, "battery %"),
    ("procs", Field::Procs, "process count"),
    ("blocked", Field::Blocked, "processes in D state"),
    ("zombies", Field::Zombies, "zombie processes"),
    ("top", Field::Top, "command name of the top CPU user"),
    (
        "net_rx",
        Field::NetRx,
        "received per second on the default route's interface (e.g. 1.2M/s)",
    ),
    (
        "net_tx",
        Field::NetTx,
        "sent per second on the default route's interface",
    ),
    (
        "net_link",
        Field::NetLink,
        "the interface {net_rx} and {net_tx} are about (e.g. eth0)",
    ),
    (
        "self_cost",
        Field::SelfCost,
        "kernstat's own CPU, % of one core (--self-cost)",
    ),
];

#[derive(Clone, Debug, PartialEq, Eq)]
enum Segment {
    Literal(String),
    Field(Field),
}

/// A parsed template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    segments: Vec<Segment>,
}

impl Template {
    /// Whether a field needs the processes (`{procs}`, `{blocked}`, `{zombies}`,
    /// `{top}`: the model counts them from the task table): a bar without one reads
    /// none.
    pub fn uses_processes(&self) -> bool {
        self.segments.iter().any(|s| {
            matches!(
                s,
                Segment::Field(Field::Procs | Field::Blocked | Field::Zombies | Field::Top)
            )
        })
    }

    /// Whether a field needs the interfaces' counters (`{net_rx}`, `{net_tx}`,
    /// `{net_link}`): a bar without one does not read /proc/net/dev.
    pub fn uses_links(&self) -> bool {
        self.segments.iter().any(|s| {
            matches!(
                s,
                Segment::Field(Field::NetRx | Field::NetTx | Field::NetLink)
            )
        })
    }
}

/// A template that could not be parsed.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TemplateError {
    /// `{name}` with a name that is not a field.
    #[error("unknown field {{{0}}} in the template; fields: {1}")]
    UnknownField(String, String),
    /// A `{` without its `}`.
    #[error("unclosed '{{' in the template (write '{{{{' for a literal brace)")]
    Unclosed,
    /// A `}` without its `{`.
    #[error("unmatched '}}' in the template (write '}}}}' for a literal brace)")]
    Unmatched,
}

/// Values the model does not hold but a template may show.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Extras {
    /// kernstat's own cost in percent of one core, when measured.
    pub self_cost_percent: Option<f64>,
    /// Escape text from the system (command names, sysfs words) for Pango markup.
    pub markup: bool,
}

impl Template {
    /// Parses `{field}` references and `{{` / `}}` escapes.
    pub fn parse(src: &str) -> Result<Self, TemplateError> {
        let mut segments = Vec::new();
        let mut lit = String::new();
        let mut chars = src.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '{' if chars.peek() == Some(&'{') => {
                    chars.next();
                    lit.push('{');
                }
                '}' if chars.peek() == Some(&'}') => {
                    chars.next();
                    lit.push('}');
                }
                '}' => return Err(TemplateError::Unmatched),
                '{' => {
                    let mut name = String::new();
                    loop {
                        match chars.next() {
                            Some('}') => break,
                            Some(c) => name.push(c),
                            None => return Err(TemplateError::Unclosed),
                        }
                    }
                    let field = FIELDS
                        .iter()
                        .find(|(n, _, _)| *n == name)
                        .map(|(_, f, _)| *f)
                        .ok_or_else(|| {
                            let names: Vec<&str> = FIELDS.iter().map(|(n, _, _)| *n).collect();
                            TemplateError::UnknownField(name.clone(), names.join(", "))
                        })?;
                    if !lit.is_empty() {
                        segments.push(Segment::Literal(std::mem::take(&mut lit)));
                    }
                    segments.push(Segment::Field(field));
                }
                c => lit.push(c),
            }
        }
        if !lit.is_empty() {
            segments.push(Segment::Literal(lit));
        }
        Ok(Template { segments })
    }

    /// Renders into `out` (appending).
    pub fn render(&self, out: &mut String, m: &Model, extras: &Extras) -> fmt::Result {
        for s in &self.segments {
            match s {
                Segment::Literal(l) => out.push_str(l),
                Segment::Field(f) => field(out, *f, m, extras)?,
            }
        }
        Ok(())
    }
}

fn opt<T>(
    out: &mut String,
    v: Option<T>,
    f: impl FnOnce(&mut String, T) -> fmt::Result,
) -> fmt::Result {
    match v {
        Some(v) => f(out, v),
        None => Ok(()),
    }
}

fn text(out: &mut String, s: &str, markup: bool) -> fmt::Result {
    if markup {
        human::markup_escaped(out, s)
    } else {
        out.push_str(s);
        Ok(())
    }
}

fn field(out: &mut String, f: Field, m: &Model, x: &Extras) -> fmt::Result {
    match f {
        Field::Cpu => write!(out, "{:.0}", m.cpu_percent),
        Field::Cores => human::glyphs(out, &m.cores_percent),
        Field::MemUsed => human::bytes(out, m.mem.used_bytes as f64),
        Field::MemTotal => human::bytes(out, m.mem.total_bytes as f64),
        Field::MemAvail => human::bytes(out, m.mem.available_bytes as f64),
        Field::MemPercent => write!(out, "{:.0}", m.mem.used_percent),
        Field::SwapUsed => human::bytes(out, m.mem.swap_used_bytes as f64),
        Field::Load1 => write!(out, "{:.2}", m.load[0]),
        Field::Load5 => write!(out, "{:.2}", m.load[1]),
        Field::Load15 => write!(out, "{:.2}", m.load[2]),
        Field::PsiCpu => opt(out, m.psi.cpu_some, |o, l| write!(o, "{:.1}", l.avg10)),
        Field::PsiMem => opt(out, m.psi.memory_some, |o, l| write!(o, "{:.1}", l.avg10)),
        Field::PsiIo => opt(out, m.psi.io_some, |o, l| write!(o, "{:.1}", l.avg10)),
        Field::Temp => opt(out, m.hw.temp_c, |o, t| write!(o, "{t:.0}")),
        Field::Freq => opt(out, m.hw.cpu_freq_mhz, |o, f| {
            write!(o, "{:.1}", f / 1000.0)
        }),
        Field::Gpu => opt(out, m.gpu_busy_percent, |o, g| write!(o, "{g:.0}")),
        Field::GpuFreq => opt(out, m.hw.gpu.and_then(|g| g.freq_mhz), |o, f| {
            write!(o, "{f}")
        }),
        Field::Profile => opt(out, m.hw.power_profile, |o, p| {
            text(o, p.as_str(), x.markup)
        }),
        Field::Battery => opt(out, m.hw.battery, |o, b| write!(o, "{:.0}", b.percent)),
        Field::Procs => write!(out, "{}", m.process_count),
        Field::Blocked => write!(out, "{}", m.blocked_procs),
        Field::Zombies => write!(out, "{}", m.zombie_procs),
        Field::Top => opt(out, m.top_cpu.as_slice().first(), |o, e| {
            text(o, e.comm.as_str(), x.markup)
        }),
        Field::SelfCost => opt(out, x.self_cost_percent, |o, c| write!(o, "{c:.3}")),
        Field::NetRx => opt(out, main_link(&m.links), |o, l| human::rate(o, l.rx_bps)),
        Field::NetTx => opt(out, main_link(&m.links), |o, l| human::rate(o, l.tx_bps)),
        Field::NetLink => opt(out, main_link(&m.links), |o, l| {
            text(o, l.name.as_str(), x.markup)
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernstat_model::{BatterySample, Hardware};

    fn model() -> Model {
        Model {
            cpu_percent: 12.4,
            cores_percent: vec![5.0, 60.0],
            mem: kernstat_model::MemModel {
                used_bytes: 3 << 30,
                total_bytes: 24 << 30,
                used_percent: 12.5,
                ..Default::default()
            },
            load: [0.5, 0.25, 0.125],
            ..Default::default()
        }
    }

    fn render(t: &str, m: &Model) -> String {
        let mut s = String::new();
        Template::parse(t)
            .unwrap()
            .render(&mut s, m, &Extras::default())
            .unwrap();
        s
    }

    #[test]
    fn fields_and_literals() {
        assert_eq!(render("{cpu}% {mem_used}", &model()), "12% 3.0G");
        assert_eq!(render("{cores} {load1}", &model()), "▁▅ 0.50");
        assert_eq!(render("{{cpu}} {mem_percent}%", &model()), "{cpu} 12%");
    }

    #[test]
    fn network_fields_are_the_default_routes_link() {
        use kernstat_model::net::LinkRate;
        use kernstat_model::text::ShortStr;
        let mut m = model();
        assert_eq!(
            render("[{net_link} {net_rx} {net_tx}]", &m),
            "[  ]",
            "no link"
        );
        let link = |name: &str, default: bool, rx: f64| LinkRate {
            name: ShortStr::from_str_lossy(name),
            is_default: default,
            rx_bps: rx,
            tx_bps: rx / 2.0,
            ..Default::default()
        };
        m.links = vec![link("wlan0", true, 2048.0), link("lo", false, 1e9)];
        assert_eq!(
            render("{net_link} ↓{net_rx} ↑{net_tx}", &m),
            "wlan0 ↓2.0K/s ↑1.0K/s"
        );
    }

    #[test]
    fn missing_sources_render_empty() {
        let m = model();
        assert_eq!(
            render("[{battery}][{temp}][{gpu}][{profile}]", &m),
            "[][][][]"
        );
        let mut m = model();
        m.hw = Hardware {
            temp_c: Some(61.4),
            battery: Some(BatterySample {
                percent: 87.0,
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(render("{temp}°C {battery}%", &m), "61°C 87%");
    }

    #[test]
    fn errors_are_clear() {
        match Template::parse("{cpux}") {
            Err(TemplateError::UnknownField(n, list)) => {
                assert_eq!(n, "cpux");
                assert!(list.contains("mem_used"));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(Template::parse("{cpu"), Err(TemplateError::Unclosed));
        assert_eq!(Template::parse("cpu}"), Err(TemplateError::Unmatched));
    }
}
