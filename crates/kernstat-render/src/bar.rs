//! The bar's output formats, behind one type: Waybar JSON lines (`return-type: json`),
//! the i3bar protocol, plain text, and full JSON lines (`--json`).
//!
//! A `BarRenderer` owns every buffer it writes through, so rendering a tick does not
//! allocate once the buffers have grown to their working size.

use std::io::Write as _;

use kernstat_model::{Level, Model};
use serde::Serialize;

use crate::template::{Extras, Template};
use crate::tooltip::{write_tooltip, TooltipExtras};

/// Output format of `kernstat bar`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BarFormat {
    /// One JSON object per line for Waybar's custom module with `return-type: json`.
    Waybar,
    /// The i3bar protocol: a header, then an endless JSON array of block arrays.
    I3bar,
    /// The text line only.
    Text,
    /// Every metric as one JSON object per line.
    Json,
}

/// Per-tick values from outside the model.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct TickInfo {
    /// Wall time the sample took, microseconds.
    pub sample_us: f64,
    /// kernstat's own cost, percent of one core (with --self-cost).
    pub self_cost_percent: Option<f64>,
}

#[derive(Serialize)]
struct WaybarLine<'a> {
    text: &'a str,
    tooltip: &'a str,
    class: &'a str,
    percentage: u32,
    alt: &'a str,
}

#[derive(Serialize)]
struct I3Block<'a> {
    name: &'static str,
    full_text: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    color: Option<&'static str>,
    urgent: bool,
    markup: &'static str,
}

/// One `kernstat snapshot` / `bar --json` object.
#[derive(Serialize)]
pub struct SnapshotView<'a> {
    /// Everything the model holds.
    #[serde(flatten)]
    pub model: &'a Model,
    /// Wall time of the sample, microseconds.
    pub sample_us: f64,
    /// kernstat's own cost, percent of one core.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub self_cost_percent: Option<f64>,
}

/// Renders ticks in one format.
#[derive(Debug)]
pub struct BarRenderer {
    format: BarFormat,
    template: Template,
    text: String,
    tooltip: String,
    ticks: u64,
}

impl BarRenderer {
    /// A renderer for `format` whose text is `template`.
    pub fn new(format: BarFormat, template: Template) -> Self {
        BarRenderer {
            format,
            template,
            text: String::with_capacity(256),
            tooltip: String::with_capacity(4096),
            ticks: 0,
        }
    }

    /// Whether a tick shows processes: Waybar's tooltip and the JSON line do; a text or
    /// i3bar line when its template names `{procs}`, `{blocked}`, `{zombies}` or
    /// `{top}`. A bar that shows none walks no task.
    pub fn processes_shown(&self) -> bool {
        match self.format {
            BarFormat::Waybar | BarFormat::Json => true,
            BarFormat::Text | BarFormat::I3bar => self.template.uses_processes(),
        }
    }

    /// What a tick shows of the network: (the interfaces' counters, every process's
    /// socket bytes). Waybar's tooltip and the JSON line show both; a text or i3bar line
    /// only what its template's fields name, and never processes. What is not shown is
    /// not sampled (the per-process map is 8,192 entries).
    pub fn network_shown(&self) -> (bool, bool) {
        match self.format {
            BarFormat::Waybar | BarFormat::Json => (true, true),
            BarFormat::Text | BarFormat::I3bar => (self.template.uses_links(), false),
        }
    }

    /// What goes before the first tick (the i3bar header and the array opening).
    pub fn header(&self, out: &mut Vec<u8>) {
        if self.format == BarFormat::I3bar {
            out.extend_from_slice(b"{\"version\":1}\n[\n");
        }
    }

    /// Appends one tick's output, ending in '\n'.
    pub fn render(&mut self, m: &Model, tick: &TickInfo, out: &mut Vec<u8>) {
        let markup = self.format == BarFormat::Waybar;
        self.text.clear();
        self.tooltip.clear();
        let extras = Extras {
            self_cost_percent: tick.self_cost_percent,
            markup,
        };
        // Writing into a String cannot fail.
        let _ = self.template.render(&mut self.text, m, &extras);
        match self.format {
            BarFormat::Waybar => {
                let _ = write_tooltip(
                    &mut self.tooltip,
                    m,
                    &TooltipExtras {
                        sample_us: tick.sample_us,
                        self_cost_percent: tick.self_cost_percent,
                        markup: true,
                    },
                );
                let line = WaybarLine {
                    text: &self.text,
                    tooltip: &self.tooltip,
                    class: m.level.as_str(),
                    percentage: m.cpu_percent.round().clamp(0.0, 100.0) as u32,
                    alt: m.alert.as_str(),
                };
                let _ = serde_json::to_writer(&mut *out, &line);
            }
            BarFormat::I3bar => {
                if self.ticks > 0 {
                    out.push(b',');
                }
                let block = I3Block {
                    name: "kernstat",
                    full_text: &self.text,
                    color: match m.level {
                        Level::Normal => None,
                        Level::Warning => Some("#FFCC00"),
                        Level::Critical => Some("#FF5555"),
                    },
                    urgent: m.level == Level::Critical,
                    markup: "none",
                };
                let _ = serde_json::to_writer(&mut *out, &[block]);
            }
            BarFormat::Text => {
                let _ = out.write_all(self.text.as_bytes());
            }
            BarFormat::Json => {
                let view = SnapshotView {
                    model: m,
                    sample_us: tick.sample_us,
                    self_cost_percent: tick.self_cost_percent,
                };
                let _ = serde_json::to_writer(&mut *out, &view);
            }
        }
        out.push(b'\n');
        self.ticks += 1;
    }

    /// The last tick's text (for tests and the daemon).
    pub fn last_text(&self) -> &str {
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernstat_model::Model;

    fn model() -> Model {
        Model {
            cpu_percent: 93.6,
            level: Level::Critical,
            alert: kernstat_model::Alert::Cpu,
            cores_percent: vec![90.0, 97.0],
            ..Default::default()
        }
    }

    #[test]
    fn waybar_line_is_one_json_object() {
        let mut r = BarRenderer::new(BarFormat::Waybar, Template::parse("{cpu}%").unwrap());
        let mut out = Vec::new();
        r.header(&mut out);
        assert!(out.is_empty());
        r.render(&model(), &TickInfo::default(), &mut out);
        assert_eq!(out.iter().filter(|&&b| b == b'\n').count(), 1);
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["text"], "94%");
        assert_eq!(v["class"], "critical");
        assert_eq!(v["percentage"], 94);
        assert_eq!(v["alt"], "cpu");
        assert!(v["tooltip"].as_str().unwrap().contains("CPU 94%"));
    }

    #[test]
    fn i3bar_header_then_comma_separated_arrays() {
        let mut r = BarRenderer::new(BarFormat::I3bar, Template::parse("{cpu}").unwrap());
        let mut out = Vec::new();
        r.header(&mut out);
        r.render(&model(), &TickInfo::default(), &mut out);
        r.render(&model(), &TickInfo::default(), &mut out);
        let s = String::from_utf8(out).unwrap();
        let mut lines = s.lines();
        let header: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
        assert_eq!(header["version"], 1);
        assert_eq!(lines.next(), Some("["));
        let first: serde_json::Value = serde_json::from_str(lines.next().unwrap()).unwrap();
        assert_eq!(first[0]["full_text"], "94");
        assert_eq!(first[0]["urgent"], true);
        let second = lines.next().unwrap();
        assert!(second.starts_with(",["));
        let _: serde_json::Value = serde_json::from_str(&second[1..]).unwrap();
    }

    #[test]
    fn text_and_json() {
        let mut r = BarRenderer::new(BarFormat::Text, Template::parse("cpu {cpu}").unwrap());
        let mut out = Vec::new();
        r.render(&model(), &TickInfo::default(), &mut out);
        assert_eq!(out, b"cpu 94\n");
        let mut r = BarRenderer::new(BarFormat::Json, Template::parse("").unwrap());
        let mut out = Vec::new();
        r.render(
            &model(),
            &TickInfo {
                sample_us: 12.0,
                self_cost_percent: Some(0.01),
            },
            &mut out,
        );
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["cpu_percent"], 93.6);
        assert_eq!(v["source"], "bpf");
        assert_eq!(v["sample_us"], 12.0);
        assert_eq!(v["self_cost_percent"], 0.01);
    }

    #[test]
    fn a_snapshot_read_back_renders_the_same_bar() {
        // `bar --daemon` renders from the daemon's snapshot JSON: every field the bar and
        // tooltip use must survive the round trip.
        use kernstat_model::{BatterySample, GpuSample, PsiLine, ShortStr, TopEntry};
        let mut m = model();
        m.mem.used_bytes = 3 << 30;
        m.mem.total_bytes = 8 << 30;
        m.mem.used_percent = 37.5;
        m.load = [1.5, 0.7, 0.2];
        m.psi.cpu_some = Some(PsiLine {
            avg10: 2.5,
            avg60: 1.0,
            total_us: 99,
        });
        m.psi.io_full = Some(PsiLine {
            avg10: 0.5,
            avg60: 0.1,
            total_us: 7,
        });
        m.hw.temp_c = Some(71.0);
        m.hw.cpu_freq_mhz = Some(2400.0);
        m.hw.power_profile = Some(ShortStr::from_str_lossy("balanced"));
        m.hw.battery = Some(BatterySample {
            percent: 81.0,
            status: ShortStr::from_str_lossy("Discharging"),
            power_w: Some(9.5),
            time_remaining_s: None,
        });
        m.hw.gpu = Some(GpuSample {
            freq_mhz: Some(900),
            throttle: ShortStr::from_str_lossy("thermal"),
            ..Default::default()
        });
        m.gpu_busy_percent = Some(33.0);
        m.blocked_procs = 1;
        for (pid, v) in [(10, 50.0), (11, 30.0), (12, 30.0)] {
            m.top_cpu.offer(TopEntry {
                pid,
                comm: ShortStr::from_str_lossy("stress-ng"),
                value: v,
                extra: 0.0,
            });
            m.top_io.offer(TopEntry {
                pid,
                comm: ShortStr::from_str_lossy("dd"),
                value: v * 1e6,
                extra: v,
            });
        }
        let json = serde_json::to_vec(&SnapshotView {
            model: &m,
            sample_us: 61.0,
            self_cost_percent: None,
        })
        .unwrap();
        let back: Model = serde_json::from_slice(&json).unwrap();
        let tick = TickInfo {
            sample_us: 61.0,
            self_cost_percent: None,
        };
        let template =
            Template::parse("{cpu}% {mem_used} {load1} {temp} {cores} {battery} {gpu} {top}")
                .unwrap();
        let (mut a, mut b) = (Vec::new(), Vec::new());
        BarRenderer::new(BarFormat::Waybar, template.clone()).render(&m, &tick, &mut a);
        BarRenderer::new(BarFormat::Waybar, template).render(&back, &tick, &mut b);
        assert_eq!(String::from_utf8(a).unwrap(), String::from_utf8(b).unwrap());
        assert_eq!(back.alert, kernstat_model::Alert::Cpu);
        assert_eq!(back.top_cpu.as_slice(), m.top_cpu.as_slice());
    }
}
