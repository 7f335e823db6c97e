//! Block I/O latency (bpf/biolat.bpf.c): per device and operation, a latency histogram
//! (µs, kernstat's slots) with the requests, bytes and errors it counts; per control
//! group, counts and summed latency. Readings are cumulative; an interval is the
//! difference of two ([`since`]).

use serde::Serialize;

use crate::hist::Hist;

/// A block request's operation (REQ_OP_*; the numbering of 6.0+, the same below 4).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
pub enum BioOp {
    /// REQ_OP_READ.
    Read,
    /// REQ_OP_WRITE.
    Write,
    /// REQ_OP_FLUSH.
    Flush,
    /// REQ_OP_DISCARD.
    Discard,
    /// Any other (write-zeroes, zone operations, driver ones): its number.
    Other(u8),
}

impl BioOp {
    /// From `cmd_flags & 0xff`.
    pub fn from_raw(op: u32) -> BioOp {
        match op {
            0 => BioOp::Read,
            1 => BioOp::Write,
            2 => BioOp::Flush,
            3 => BioOp::Discard,
            n => BioOp::Other(n as u8),
        }
    }

    /// As people (and `biolatency -D`) name it.
    pub fn name(self) -> String {
        self.to_string()
    }
}

/// The name, written without building a string (a scrape's label).
impl std::fmt::Display for BioOp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BioOp::Read => f.write_str("read"),
            BioOp::Write => f.write_str("write"),
            BioOp::Flush => f.write_str("flush"),
            BioOp::Discard => f.write_str("discard"),
            BioOp::Other(9) => f.write_str("write-zeroes"),
            BioOp::Other(n) => write!(f, "op{n}"),
        }
    }
}

/// The request flags `-F` splits by (REQ_* bits above the op, as biolatency prints them).
pub fn flag_names(flags: u32) -> String {
    const NAMES: [(u32, &str); 8] = [
        (11, "sync"),
        (12, "meta"),
        (13, "prio"),
        (17, "fua"),
        (18, "preflush"),
        (19, "readahead"),
        (20, "background"),
        (21, "nowait"),
    ];
    let v: Vec<&str> = NAMES
        .iter()
        .filter(|(bit, _)| flags & (1 << bit) != 0)
        .map(|(_, n)| *n)
        .collect();
    if v.is_empty() {
        "-".into()
    } else {
        v.join(",")
    }
}

/// One device and operation (and flags, with -F).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DiskOp {
    /// Device name (sda, nvme0n1, loop3), or MAJOR:MINOR.
    pub disk: String,
    /// Device numbers.
    pub major: u32,
    /// See `major`.
    pub minor: u32,
    /// The operation.
    pub op: BioOp,
    /// Request flags above the op (with -F; else 0).
    pub flags: u32,
    /// Latency, µs.
    #[serde(skip)]
    pub hist: Hist,
    /// Requests measured.
    pub count: u64,
    /// Bytes completed.
    pub bytes: u64,
    /// Requests completed with an error.
    pub errors: u64,
}

impl DiskOp {
    /// The latency below which the fraction `p` (0..=1) of requests fall, µs.
    pub fn percentile_us(&self, p: f64) -> Option<f64> {
        self.hist.percentile(p)
    }
}

/// One control group's requests on one device and operation.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GroupIo {
    /// The group's id (its directory's inode in the blkio/io hierarchy).
    pub cgroup: u64,
    /// Its path, when known.
    pub path: String,
    /// Device name.
    pub disk: String,
    /// The operation.
    pub op: BioOp,
    /// Requests, bytes, summed latency (ns).
    pub count: u64,
    /// See `count`.
    pub bytes: u64,
    /// See `count`.
    pub latency_ns: u64,
}

/// `now` less `before` (entries matched by device, operation and flags; new ones whole).
pub fn since(now: &[DiskOp], before: &[DiskOp]) -> Vec<DiskOp> {
    now.iter()
        .map(|d| {
            match before
                .iter()
                .find(|b| (b.major, b.minor, b.op, b.flags) == (d.major, d.minor, d.op, d.flags))
            {
                Some(b) => DiskOp {
                    hist: d.hist.since(&b.hist),
                    count: d.count.saturating_sub(b.count),
                    bytes: d.bytes.saturating_sub(b.bytes),
                    errors: d.errors.saturating_sub(b.errors),
                    ..d.clone()
                },
                None => d.clone(),
            }
        })
        .collect()
}

/// The kernel's dev_t (major << 20 | minor) as (major, minor).
pub fn split_dev(dev: u32) -> (u32, u32) {
    (dev >> 20, dev & 0xfffff)
}

/// What one histogram of the output covers.
pub struct Part {
    /// biolatency's heading for it ("disk = sda  op = read"), empty for the whole.
    pub label: String,
    /// Its disk, when split per disk.
    pub disk: String,
    /// Its operation, when split.
    pub op: Option<BioOp>,
    /// Its request flags, when split per flags.
    pub flags: Option<u32>,
    /// Latency, µs.
    pub hist: Hist,
    /// Requests completed.
    pub count: u64,
    /// Bytes they moved.
    pub bytes: u64,
    /// Requests that failed.
    pub errors: u64,
}

/// The interval's entries merged as the flags ask: one histogram, per disk (-D), and/or
/// per flags (-F); operations always apart when split.
pub fn group(iv: &[DiskOp], per_disk: bool, per_flags: bool) -> Vec<Part> {
    let mut parts: Vec<Part> = Vec::new();
    for d in iv {
        let disk = if per_disk {
            d.disk.clone()
        } else {
            String::new()
        };
        let op = (per_disk || per_flags).then_some(d.op);
        let flags = per_flags.then_some(d.flags);
        let label = match (per_disk, per_flags) {
            (true, true) => format!(
                "disk = {}  op = {}  flags = {}",
                d.disk,
                d.op,
                flag_names(d.flags)
            ),
            (true, false) => format!("disk = {}  op = {}", d.disk, d.op),
            (false, true) => format!("op = {}  flags = {}", d.op, flag_names(d.flags)),
            (false, false) => String::new(),
        };
        match parts
            .iter_mut()
            .find(|p| p.disk == disk && p.op == op && p.flags == flags)
        {
            Some(p) => {
                p.hist.add(&d.hist);
                p.count += d.count;
                p.bytes += d.bytes;
                p.errors += d.errors;
            }
            None => parts.push(Part {
                label,
                disk,
                op,
                flags,
                hist: d.hist.clone(),
                count: d.count,
                bytes: d.bytes,
                errors: d.errors,
            }),
        }
    }
    parts.retain(|p| p.count > 0 || p.errors > 0);
    parts
}

impl Part {
    /// `kernstat biolat --json`'s object for it (`ms`: buckets in milliseconds).
    pub fn json(&self, ms: bool) -> serde_json::Value {
        let p = self;
        let h = if ms { p.hist.to_ms() } else { p.hist.clone() };
        let pct = |q: f64| h.percentile(q);
        serde_json::json!({
            "disk": if p.disk.is_empty() { None } else { Some(&p.disk) },
            "op": p.op.map(BioOp::name),
            "flags": p.flags.map(flag_names),
            "count": p.count,
            "bytes": p.bytes,
            "errors": p.errors,
            "p50": pct(0.50),
            "p90": pct(0.90),
            "p99": pct(0.99),
            "buckets": h.log2(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_of_the_histogram_not_its_largest_bucket() {
        let mut h = Hist::default();
        for _ in 0..98 {
            h.record(10);
        }
        h.record(100_000);
        h.record(100_000);
        let p = Part {
            label: String::new(),
            disk: "loop0".into(),
            op: Some(BioOp::Write),
            flags: None,
            hist: h,
            count: 100,
            bytes: 409_600,
            errors: 0,
        };
        let v = p.json(false);
        let (p50, p99) = (v["p50"].as_f64().unwrap(), v["p99"].as_f64().unwrap());
        assert!(p50 < 20.0, "p50 {p50} µs is in the 8-16 µs bucket");
        assert!(
            p99 > 60_000.0,
            "p99 {p99} µs is in the slowest requests' bucket"
        );
    }

    #[test]
    fn names_and_devices() {
        assert_eq!(BioOp::from_raw(1).name(), "write");
        assert_eq!(BioOp::from_raw(9).name(), "write-zeroes");
        assert_eq!(split_dev(7 << 20 | 3), (7, 3));
        assert_eq!(flag_names(1 << 11 | 1 << 17), "sync,fua");
        assert_eq!(flag_names(0), "-");
    }

    #[test]
    fn an_interval_is_a_difference() {
        let mut h = Hist::default();
        h.record(100);
        let a = DiskOp {
            disk: "loop0".into(),
            major: 7,
            minor: 0,
            op: BioOp::Write,
            flags: 0,
            hist: h.clone(),
            count: 1,
            bytes: 4096,
            errors: 0,
        };
        let mut h2 = h.clone();
        h2.record(200);
        let b = DiskOp {
            hist: h2,
            count: 2,
            bytes: 8192,
            ..a.clone()
        };
        let d = since(&[b], &[a]);
        assert_eq!((d[0].count, d[0].bytes, d[0].hist.count()), (1, 4096, 1));
    }
}
