//! `kernstat runqlat` reports: libbpf-tools' text layout (a log2 histogram per CPU, per
//! key or for the machine, and a percentile line), or one JSON object per interval.

use std::fmt::Write as _;

use kernstat_model::hist::{Hist, Log2Bucket};
use serde::Serialize;

use crate::hist::{write_log2, Summary};

/// What the histograms of a report are split by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Split {
    /// One histogram for the machine.
    None,
    /// Per CPU (-C).
    Cpu,
    /// Per process (-P).
    Pid,
    /// Per thread (-L).
    Tid,
    /// Per PID namespace (--pidnss).
    PidNs,
}

impl Split {
    fn name(self) -> Option<&'static str> {
        match self {
            Split::None => None,
            Split::Cpu => Some("cpu"),
            Split::Pid => Some("pid"),
            Split::Tid => Some("tid"),
            Split::PidNs => Some("pidns"),
        }
    }
}

/// One histogram of a split report: its key (CPU, pid, tid or namespace id) and, for
/// processes and threads, the command name.
#[derive(Clone, Debug)]
pub struct Part<'a> {
    /// CPU, pid, tid or PID namespace inode.
    pub key: u64,
    /// Command name (processes and threads).
    pub comm: Option<String>,
    /// Its histogram over the interval.
    pub hist: &'a Hist,
}

/// One interval's report.
#[derive(Clone, Debug)]
pub struct RunqlatReport<'a> {
    /// Seconds since the epoch.
    pub timestamp: f64,
    /// A local HH:MM:SS line before the text histograms (-T), else None.
    pub clock: Option<String>,
    /// Milliseconds (-m) rather than microseconds.
    pub millis: bool,
    /// The attachment in use ("tp_btf", "raw_tp").
    pub attach: &'a str,
    /// Every event of the interval.
    pub total: &'a Hist,
    /// The largest latency, in the report's unit (None: not known).
    pub max: Option<f64>,
    /// What the parts are split by.
    pub split: Split,
    /// The parts with events (empty without a split).
    pub parts: Vec<Part<'a>>,
}

impl RunqlatReport<'_> {
    /// "usecs" or "msecs", as libbpf-tools labels its histograms.
    pub fn unit(&self) -> &'static str {
        if self.millis {
            "msecs"
        } else {
            "usecs"
        }
    }

    /// "us" or "ms", for CSV headers, JSON and the percentile line.
    pub fn short_unit(&self) -> &'static str {
        if self.millis {
            "ms"
        } else {
            "us"
        }
    }

    /// The interval's count and percentiles (no percentile above the exact maximum).
    pub fn summary(&self) -> Summary {
        let max = if self.total.count() > 0 {
            self.max
        } else {
            Some(0.0)
        };
        Summary::of(self.total, max)
    }
}

#[derive(Serialize)]
struct JsonHist {
    #[serde(skip_serializing_if = "Option::is_none")]
    kind: Option<&'static str>,
    key: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    comm: Option<String>,
    #[serde(flatten)]
    summary: Summary,
    buckets: Vec<Log2Bucket>,
}

#[derive(Serialize)]
struct JsonInterval<'a> {
    timestamp: f64,
    unit: &'static str,
    attach: &'a str,
    #[serde(flatten)]
    summary: Summary,
    buckets: Vec<Log2Bucket>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    per: Vec<JsonHist>,
}

/// One JSON object (no newline).
pub fn write_json(out: &mut Vec<u8>, r: &RunqlatReport<'_>) -> serde_json::Result<()> {
    let line = JsonInterval {
        timestamp: r.timestamp,
        unit: r.short_unit(),
        attach: r.attach,
        summary: r.summary(),
        buckets: r.total.log2(),
        per: r
            .parts
            .iter()
            .map(|p| JsonHist {
                kind: r.split.name(),
                key: p.key,
                comm: p.comm.clone(),
                summary: Summary::of(p.hist, None),
                buckets: p.hist.log2(),
            })
            .collect(),
    };
    serde_json::to_writer(out, &line)
}

/// The text report, as libbpf-tools' runqlat prints it, and a percentile line.
pub fn write_text(out: &mut String, r: &RunqlatReport<'_>) {
    if let Some(clock) = &r.clock {
        out.push_str(clock);
        out.push('\n');
    }
    let unit = r.unit();
    if r.split == Split::None {
        out.push('\n');
        write_log2(out, unit, &r.total.log2());
    }
    for p in &r.parts {
        let _ = match (r.split, &p.comm) {
            (Split::Cpu, _) => writeln!(out, "\ncpu = {}", p.key),
            (Split::Pid, Some(c)) => writeln!(out, "\npid = {} {c}", p.key),
            (Split::Tid, Some(c)) => writeln!(out, "\ntid = {} {c}", p.key),
            (split, _) => writeln!(out, "\n{} = {}", split.name().unwrap_or("key"), p.key),
        };
        write_log2(out, unit, &p.hist.log2());
    }
    let s = r.summary();
    if s.count > 0 {
        let short = r.short_unit();
        let _ = writeln!(
            out,
            "p50 {:.1} {short}, p90 {:.1} {short}, p99 {:.1} {short}, max {:.1} {short} ({} events)",
            s.p50,
            s.p90,
            s.p99,
            s.max.unwrap_or(0.0),
            s.count
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(total: &Hist, split: Split, parts: Vec<Part<'_>>) -> String {
        let r = RunqlatReport {
            timestamp: 0.0,
            clock: None,
            millis: false,
            attach: "tp_btf",
            total,
            max: Some(9.0),
            split,
            parts,
        };
        let mut s = String::new();
        write_text(&mut s, &r);
        s
    }

    #[test]
    fn machine_and_split_layouts() {
        let mut h = Hist::default();
        [1, 3, 9].iter().for_each(|&v| h.record(v));
        let machine = report(&h, Split::None, vec![]);
        assert!(machine.starts_with("\n     usecs               : count    distribution\n"));
        assert!(machine.ends_with("max 9.0 us (3 events)\n"), "{machine}");
        let per_pid = report(
            &h,
            Split::Pid,
            vec![Part {
                key: 42,
                comm: Some("sh".into()),
                hist: &h,
            }],
        );
        assert!(
            per_pid.starts_with("\npid = 42 sh\n     usecs"),
            "{per_pid}"
        );
        let per_ns = report(
            &h,
            Split::PidNs,
            vec![Part {
                key: 7,
                comm: None,
                hist: &h,
            }],
        );
        assert!(per_ns.starts_with("\npidns = 7\n"), "{per_ns}");
        // No events: no percentile line.
        assert_eq!(report(&Hist::default(), Split::Cpu, vec![]), "");
    }
}
