//! Latency histograms for people and scripts: the classic log2 text histogram
//! (libbpf-tools' layout, so operators can read it at a glance), CSV lines and JSON.

use std::fmt::Write;

use kernstat_model::hist::{Hist, Log2Bucket};
use serde::Serialize;

/// Writes the classic view: a header naming the unit, then one line per log2 bucket with
/// its count and a bar scaled to the largest bucket (40 columns).
pub fn write_log2(out: &mut String, unit: &str, buckets: &[Log2Bucket]) {
    write_log2_indented(out, "", unit, buckets)
}

/// The classic view with every line indented (a histogram under a heading line).
pub fn write_log2_indented(out: &mut String, indent: &str, unit: &str, buckets: &[Log2Bucket]) {
    let max = buckets.iter().map(|b| b.count).max().unwrap_or(0);
    let _ = writeln!(
        out,
        "{indent}{unit:>10}               : count    distribution"
    );
    for b in buckets {
        // Integer arithmetic, as libbpf-tools draws its bars.
        let stars = (b.count * 40).checked_div(max).unwrap_or(0) as usize;
        let _ = writeln!(
            out,
            "{indent}{:>10} -> {:<10} : {:<8} |{:<40}|",
            b.lo,
            b.hi,
            b.count,
            "*".repeat(stars.min(40))
        );
    }
}

/// Summary numbers of one histogram.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Events.
    pub count: u64,
    /// Median (interpolated), in the histogram's unit.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest value recorded, exact (when it is known).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
}

impl Summary {
    /// Summarises `h`; `max`, when known, is the exact largest value, and no percentile
    /// is reported above it (interpolation inside the top slot could otherwise overshoot).
    pub fn of(h: &Hist, max: Option<f64>) -> Self {
        let cap = |v: f64| max.map_or(v, |m| v.min(m));
        Summary {
            count: h.count(),
            p50: cap(h.percentile(0.50).unwrap_or(0.0)),
            p90: cap(h.percentile(0.90).unwrap_or(0.0)),
            p99: cap(h.percentile(0.99).unwrap_or(0.0)),
            max,
        }
    }
}

/// The CSV header (`unit` is "us" or "ms").
pub fn csv_header(unit: &str) -> String {
    format!("timestamp,count,p50_{unit},p90_{unit},p99_{unit},max_{unit}")
}

/// One CSV row.
pub fn csv_row(timestamp: f64, s: &Summary) -> String {
    format!(
        "{timestamp:.3},{},{:.1},{:.1},{:.1},{:.1}",
        s.count,
        s.p50,
        s.p90,
        s.p99,
        s.max.unwrap_or(0.0)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classic_layout() {
        let mut h = Hist::default();
        for v in [0, 1, 3, 3, 9] {
            h.record(v);
        }
        let mut s = String::new();
        write_log2(&mut s, "usecs", &h.log2());
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "     usecs               : count    distribution");
        assert_eq!(
            lines[1],
            "         0 -> 1          : 2        |****************************************|"
        );
        assert_eq!(
            lines[2],
            "         2 -> 3          : 2        |****************************************|"
        );
        assert_eq!(
            lines[3],
            "         4 -> 7          : 0        |                                        |"
        );
        assert_eq!(
            lines[4],
            "         8 -> 15         : 1        |********************                    |"
        );
    }

    #[test]
    fn csv() {
        let s = Summary {
            count: 10,
            p50: 3.0,
            p90: 7.25,
            p99: 12.0,
            max: Some(40.0),
        };
        assert_eq!(
            csv_header("us"),
            "timestamp,count,p50_us,p90_us,p99_us,max_us"
        );
        assert_eq!(csv_row(1.5, &s), "1.500,10,3.0,7.2,12.0,40.0");
    }
}
