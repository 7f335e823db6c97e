//! OpenMetrics text with timestamps, for `promtool tsdb create-blocks-from openmetrics`:
//! the history backfilled into Prometheus lines up with what the daemon's `/metrics`
//! served live, because each frame is encoded by the very exporter `/metrics` uses
//! (kernstat-daemon's), from the frame's model and counters; only the lines gain the
//! frame's time. Every process is a series here (the live endpoint bounds them to the
//! top N); kernstat's own cost is left out (it would describe the dump, not the past).
//!
//! OpenMetrics wants each family's samples together while frames come in time order:
//! each family's lines go to an unnamed temporary file of its own, and the files are
//! joined at the end, so that memory stays flat whatever the range.

use std::collections::HashMap;
use std::fs::File;
use std::io::{BufWriter, Seek, Write};
use std::sync::Arc;

use kernstat_daemon::metrics::{Counters, Exporter, MetricsSample, SizeSeries};
use kernstat_model::hist::Hist;
use kernstat_model::net::NetSample;
use kernstat_model::writes::SIZE_SLOTS;
use kernstat_record::replay;

use crate::{Error, FrameRows, Sink};

/// Families of the live endpoint that describe kernstat itself at the time of the
/// scrape, not the machine at the time of the frame.
const NOT_HISTORY: &[&str] = &[
    "kernstat_self_",
    "kernstat_sample_duration",
    "kernstat_bpf_",
    "kernstat_build",
];

struct Family {
    /// Its HELP and TYPE lines.
    header: String,
    body: BufWriter<File>,
}

pub(crate) struct OpenMetrics<W: Write> {
    out: W,
    families: Vec<Family>,
    by_name: HashMap<String, usize>,
    exporter: Arc<Exporter>,
    counters: Counters,
    prev_net: Option<NetSample>,
}

impl<W: Write> OpenMetrics<W> {
    pub(crate) fn new(out: W) -> Self {
        OpenMetrics {
            out,
            families: Vec::new(),
            by_name: HashMap::new(),
            exporter: Exporter::new(usize::MAX),
            counters: Counters::default(),
            prev_net: None,
        }
    }

    /// Sends each line of one exposition to its family, samples with `stamp` added.
    fn route(&mut self, text: &str, stamp: &str) -> Result<(), Error> {
        let mut current: Option<usize> = None;
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# ") {
                let mut words = rest.splitn(3, ' ');
                let (Some(what), Some(name)) = (words.next(), words.next()) else {
                    continue;
                };
                if what == "EOF" {
                    break;
                }
                if NOT_HISTORY.iter().any(|p| name.starts_with(p)) {
                    current = None;
                    continue;
                }
                let index = match self.by_name.get(name) {
                    Some(&i) => i,
                    None => {
                        self.families.push(Family {
                            header: String::new(),
                            body: BufWriter::new(tempfile::tempfile()?),
                        });
                        self.by_name
                            .insert(name.to_string(), self.families.len() - 1);
                        self.families.len() - 1
                    }
                };
                let fam = &mut self.families[index];
                // A family seen in an earlier frame keeps the descriptor it had.
                if !fam.header.contains(&format!("# {what} ")) {
                    fam.header.push_str(line);
                    fam.header.push('\n');
                }
                current = Some(index);
                continue;
            }
            if let Some(i) = current {
                let body = &mut self.families[i].body;
                body.write_all(line.as_bytes())?;
                body.write_all(stamp.as_bytes())?;
            }
        }
        Ok(())
    }
}

/// An operation by the name the recorder gave it.
fn op_of(name: &str) -> kernstat_model::biolat::BioOp {
    use kernstat_model::biolat::BioOp;
    match name {
        "read" => BioOp::Read,
        "write" => BioOp::Write,
        "flush" => BioOp::Flush,
        "discard" => BioOp::Discard,
        "write-zeroes" => BioOp::Other(9),
        other => BioOp::Other(other.trim_start_matches("op").parse().unwrap_or(255)),
    }
}

/// " SECONDS.MMM\n": a sample's timestamp as OpenMetrics writes it.
fn stamp(unix_ns: u64) -> String {
    format!(
        " {}.{:03}\n",
        unix_ns / 1_000_000_000,
        unix_ns / 1_000_000 % 1000
    )
}

impl<W: Write> Sink for OpenMetrics<W> {
    fn frame(&mut self, f: &FrameRows<'_>) -> Result<(), Error> {
        let now = replay::raw_sample(f.frame);
        let prev = f.before.map(replay::raw_sample);
        let model = replay::model_of(prev.as_ref().unwrap_or(&now), &now, f.frame);
        self.counters.observe(&now.sys);
        if let Some(p) = self.prev_net.as_ref().or(prev.as_ref().map(|p| &p.net)) {
            self.counters.observe_net(p, &now.net);
        }
        let hists = &f.frame.hists;
        let writes = hists
            .writes
            .iter()
            .map(|w| {
                let mut slots = [0u64; SIZE_SLOTS];
                for (d, s) in slots.iter_mut().zip(&w.slots) {
                    *d = *s;
                }
                SizeSeries {
                    syscall: w.syscall.clone(),
                    kind: w.kind.clone(),
                    slots,
                    bytes: w.bytes,
                }
            })
            .collect();
        let biolat = hists
            .biolat
            .iter()
            .map(|d| {
                let hist = Hist::from_slots(&d.slots);
                kernstat_model::biolat::DiskOp {
                    disk: d.disk.clone(),
                    major: 0,
                    minor: 0,
                    op: op_of(&d.op),
                    flags: 0,
                    count: hist.count(),
                    hist,
                    bytes: d.bytes,
                    errors: d.errors,
                }
            })
            .collect();
        self.exporter.publish(MetricsSample {
            model,
            counters: self.counters.clone(),
            runq: hists.runqlat_us.as_deref().map(Hist::from_slots),
            writes,
            biolat,
            kernel: now.kernel.clone(),
            ..MetricsSample::default()
        });
        self.prev_net = Some(now.net);
        let text = self
            .exporter
            .encode_text()
            .map_err(|_| Error::Encode("the OpenMetrics encoder failed".into()))?;
        let text = std::str::from_utf8(&text)
            .map_err(|_| Error::Encode("the OpenMetrics encoder wrote no text".into()))?;
        self.route(text, &stamp(f.frame.time_unix_ns))
    }

    fn finish(&mut self) -> Result<(), Error> {
        for fam in &mut self.families {
            self.out.write_all(fam.header.as_bytes())?;
            fam.body.flush()?;
            let file = fam.body.get_mut();
            file.rewind()?;
            std::io::copy(file, &mut self.out)?;
        }
        self.out.write_all(b"# EOF\n")?;
        self.out.flush()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_in_seconds() {
        assert_eq!(stamp(1_764_000_000_123_456_789), " 1764000000.123\n");
        assert_eq!(stamp(5_000_000), " 0.005\n");
    }

    #[test]
    fn families_stay_together_across_frames() {
        let mut om = OpenMetrics::new(Vec::new());
        let a = "# HELP x_a help a\n# TYPE x_a gauge\nx_a 1\n# HELP kernstat_self_cpu s\n# TYPE kernstat_self_cpu counter\nkernstat_self_cpu_total 3\n# HELP x_b b\n# TYPE x_b counter\nx_b_total{k=\"v\"} 2\n# EOF\n";
        om.route(a, " 1.000\n").unwrap();
        om.route(a, " 2.000\n").unwrap();
        om.finish().unwrap();
        let text = String::from_utf8(om.out).unwrap();
        assert_eq!(
            text,
            "# HELP x_a help a\n# TYPE x_a gauge\nx_a 1 1.000\nx_a 1 2.000\n# HELP x_b b\n# TYPE x_b counter\nx_b_total{k=\"v\"} 2 1.000\nx_b_total{k=\"v\"} 2 2.000\n# EOF\n"
        );
    }
}
