//! `kernstat writes` reports: the per-process table with verdicts and, under each
//! process, its calls per syscall and file kind with a log2 size histogram (text), or one
//! JSON object per interval.

use std::fmt::Write as _;

use kernstat_model::hist::Log2Bucket;
use kernstat_model::writes::{slot_hi, slot_lo, FileKind, ProcessReport, Verdict, SIZE_SLOTS};
use serde::Serialize;

use crate::hist::write_log2_indented;

/// One interval's report.
#[derive(Clone, Copy, Debug)]
pub struct WritesReport<'a> {
    /// Seconds since the epoch.
    pub timestamp: f64,
    /// The interval's length, seconds.
    pub interval_s: f64,
    /// Read family (else write family).
    pub reads: bool,
    /// The attachment in use ("fexit", "tracepoints").
    pub attach: &'a str,
    /// The processes, busiest first.
    pub processes: &'a [ProcessReport],
}

/// Size slots as log2 buckets, up to the highest non-empty one.
pub fn size_buckets(slots: &[u64; SIZE_SLOTS]) -> Vec<Log2Bucket> {
    let Some(last) = slots.iter().rposition(|&c| c > 0) else {
        return Vec::new();
    };
    (0..=last)
        .map(|i| Log2Bucket {
            lo: slot_lo(i),
            hi: slot_hi(i),
            count: slots[i],
        })
        .collect()
}

#[derive(Serialize)]
struct JsonBy {
    syscall: &'static str,
    kind: FileKind,
    calls: u64,
    errors: u64,
    asked_bytes: u64,
    done_bytes: u64,
    asked: Vec<Log2Bucket>,
    done: Vec<Log2Bucket>,
}

#[derive(Serialize)]
struct JsonProc<'a> {
    #[serde(flatten)]
    verdict: &'a Verdict,
    by: Vec<JsonBy>,
}

#[derive(Serialize)]
struct JsonInterval<'a> {
    timestamp: f64,
    interval_s: f64,
    family: &'static str,
    attach: &'a str,
    processes: Vec<JsonProc<'a>>,
}

fn family(reads: bool) -> &'static str {
    if reads {
        "reads"
    } else {
        "writes"
    }
}

/// One JSON object (no newline).
pub fn write_json(out: &mut Vec<u8>, r: &WritesReport<'_>) -> serde_json::Result<()> {
    let line = JsonInterval {
        timestamp: r.timestamp,
        interval_s: r.interval_s,
        family: family(r.reads),
        attach: r.attach,
        processes: r
            .processes
            .iter()
            .map(|(v, stats)| JsonProc {
                verdict: v,
                by: stats
                    .iter()
                    .map(|s| JsonBy {
                        syscall: s.sys.name(r.reads),
                        kind: s.kind,
                        calls: s.calls,
                        errors: s.errors,
                        asked_bytes: s.asked_bytes,
                        done_bytes: s.done_bytes,
                        asked: size_buckets(&s.asked),
                        done: size_buckets(&s.done),
                    })
                    .collect(),
            })
            .collect(),
    };
    serde_json::to_writer(out, &line)
}

/// The text report.
pub fn write_text(out: &mut String, r: &WritesReport<'_>) {
    let _ = write!(
        out,
        "\n{} over {:.1} s ({}):\n{:>8} {:<16} {:>10} {:>10} {:>8} {:>7}  VERDICT\n",
        family(r.reads),
        r.interval_s,
        r.attach,
        "PID",
        "COMM",
        "CALLS/s",
        "BYTES/s",
        "MEAN",
        "SMALL"
    );
    for (v, stats) in r.processes {
        let mut rate = String::new();
        let _ = crate::human::bytes(&mut rate, v.bytes_per_s);
        let verdict = match (v.small_writes, r.reads) {
            (false, _) => "ok",
            (true, true) => "small reads",
            (true, false) => "small writes",
        };
        let _ = writeln!(
            out,
            "{:>8} {:<16} {:>10.1} {:>9}/s {:>8.0} {:>6.0}%  {verdict}",
            v.pid,
            v.comm,
            v.calls_per_s,
            rate,
            v.mean_bytes,
            v.small_share * 100.0,
        );
        for st in stats {
            let _ = writeln!(
                out,
                "  {} to {:?}: {} calls ({} failed), {} bytes asked, {} moved",
                st.sys.name(r.reads),
                st.kind,
                st.calls,
                st.errors,
                st.asked_bytes,
                st.done_bytes
            );
            write_log2_indented(out, "    ", "bytes", &size_buckets(&st.asked));
        }
        if !v.advice.is_empty() {
            let _ = writeln!(out, "  advice: {}", v.advice);
        }
    }
}
