//! Prometheus histograms from the kernel's slot counts.
//!
//! Run-queue latency is recorded in whole microseconds in log2 slots cut in eighths
//! (kernstat-model hist.rs). Classic buckets are exact: the log2 bucket [2^k, 2^(k+1))
//! µs of truncated values holds exactly the latencies below 2^(k+1) µs that are at least
//! 2^k µs, so `le = 2^(k+1) µs` counts every event at or below it. Native histograms
//! (schema 0) have power-of-two boundaries in *seconds*, which are not powers of two in
//! microseconds: each eighth-slot goes to the native bucket that holds its midpoint, so a
//! count lands at most one eighth-slot (1/8 of its power of two) from where an exact
//! recording would put it. The sum is estimated from the slots' midpoints, within 1/16
//! of each value.
//!
//! Write sizes are recorded in log2 slots [2^k, 2^(k+1)) bytes (slot 0: 0 and 1); their
//! classic buckets `le = 2^(k+1) - 1` are exact. They get no native buckets: schema 0's
//! buckets are (2^(i-1), 2^i], so every exact power of two (4096, 65536: the commonest
//! write sizes) would sit one bucket off.

use kernstat_model::hist::{slot_bounds, Hist};
use kernstat_model::writes::{slot_hi, SIZE_SLOTS};

/// Classic buckets (upper bound, count in the bucket; not cumulative), +Inf last.
pub type Classic = Vec<(f64, u64)>;

/// A native histogram's positive buckets as Prometheus encodes them: spans of
/// consecutive indexes (offset from the previous span's end, length) and the
/// differences between consecutive counts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Native {
    /// (offset, length) per span.
    pub spans: Vec<(i32, u32)>,
    /// First count, then each count minus the previous one.
    pub deltas: Vec<i64>,
}

/// The zero bucket's half-width: the smallest Prometheus' client libraries use. Every
/// latency, sub-microsecond ones included, goes to a positive bucket.
pub const ZERO_THRESHOLD: f64 = 2.938_735_877_055_719e-39; // 2^-128

/// One histogram ready to encode.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Encoded {
    /// Events.
    pub count: u64,
    /// Sum of the values in the base unit (estimated for latencies; see the module).
    pub sum: f64,
    /// Classic buckets.
    pub classic: Classic,
    /// Native buckets, where they are faithful.
    pub native: Option<Native>,
}

/// The schema-0 index of the bucket (2^(i-1), 2^i] holding `v` > 0.
fn schema0_index(v: f64) -> i32 {
    // ceil(log2 v): exact at powers of two, where frexp-style rounding would be off.
    let (mantissa, exp) = frexp(v);
    if mantissa == 0.5 {
        exp - 1
    } else {
        exp
    }
}

/// v = m * 2^e with m in [0.5, 1).
fn frexp(v: f64) -> (f64, i32) {
    let bits = v.to_bits();
    let exp = ((bits >> 52) & 0x7ff) as i32;
    if exp == 0 {
        // Subnormal: scale up first (not reached for latencies, but be exact).
        let (m, e) = frexp(v * 2f64.powi(64));
        return (m, e - 64);
    }
    let m = f64::from_bits((bits & !(0x7ff << 52)) | (1022 << 52));
    (m, exp - 1022)
}

/// A run-queue latency histogram (slots of whole `unit_s` seconds: 1e-6 for µs).
#[cfg(test)]
pub fn latency(h: &Hist, unit_s: f64) -> Encoded {
    let mut out = Encoded::default();
    latency_into(h, unit_s, &mut out);
    out
}

/// [`latency`] into `out`, reusing its buffers: a scrape encodes every histogram of a
/// sample through one `Encoded`, so the buffers are allocated once per scrape, not once
/// per series (asserted in metrics' tests).
pub fn latency_into(h: &Hist, unit_s: f64, out: &mut Encoded) {
    out.count = 0;
    out.sum = 0.0;
    out.classic.clear();
    // Sized for the most a histogram can have, so a larger one never grows them.
    out.classic.reserve(65);
    let native = out.native.get_or_insert_with(Native::default);
    native.spans.clear();
    native.deltas.clear();
    native.spans.reserve(h.slots.len());
    native.deltas.reserve(h.slots.len());
    let mut log2 = [0u64; 64];
    // Slots ascend in value, so their midpoints' native indexes never go down: a slot
    // either adds to the last native bucket or starts the next one.
    let mut last: Option<(i32, u64)> = None; // the last native bucket's index and count
    for (slot, &c) in h.slots.iter().enumerate() {
        if c == 0 {
            continue;
        }
        let (lo, hi) = slot_bounds(slot);
        // Recorded values are truncated: slot [lo, hi] holds latencies in [lo, hi + 1).
        let mid = (lo as f64 + hi as f64 + 1.0) / 2.0 * unit_s;
        out.count += c;
        out.sum += mid * c as f64;
        let k = if lo <= 1 {
            0
        } else {
            63 - lo.leading_zeros() as usize
        };
        log2[k] += c;
        let index = schema0_index(mid);
        last = match last {
            Some((i, n)) if i == index => {
                *native.deltas.last_mut().expect("a bucket") += c as i64;
                Some((i, n + c))
            }
            _ => {
                match last {
                    Some((p, _)) if index == p + 1 => {
                        native.spans.last_mut().expect("a span").1 += 1
                    }
                    Some((p, _)) => native.spans.push((index - p - 1, 1)),
                    None => native.spans.push((index, 1)),
                }
                native
                    .deltas
                    .push(c as i64 - last.map_or(0, |(_, n)| n as i64));
                Some((index, c))
            }
        };
    }
    let last = log2.iter().rposition(|&c| c > 0).unwrap_or(0);
    for (k, &c) in log2.iter().enumerate().take(last + 1) {
        out.classic.push(((1u64 << (k + 1)) as f64 * unit_s, c));
    }
    out.classic.push((f64::INFINITY, 0));
}

/// A write-size histogram (log2 slots of bytes). The sum is the exact byte total the
/// kernel counted.
#[cfg(test)]
pub fn sizes(slots: &[u64; SIZE_SLOTS], total_bytes: u64) -> Encoded {
    let mut out = Encoded::default();
    sizes_into(slots, total_bytes, &mut out);
    out
}

/// [`sizes`] into `out`, reusing its buffers (as [`latency_into`]; a buffer of its own,
/// since this one has no native buckets).
pub fn sizes_into(slots: &[u64; SIZE_SLOTS], total_bytes: u64, out: &mut Encoded) {
    let last = slots.iter().rposition(|&c| c > 0).unwrap_or(0);
    out.classic.clear();
    out.classic.reserve(SIZE_SLOTS + 1);
    out.classic
        .extend((0..=last).map(|k| (slot_hi(k) as f64, slots[k])));
    out.classic.push((f64::INFINITY, 0));
    out.count = slots.iter().sum();
    out.sum = total_bytes as f64;
    out.native = None;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema0_bucket_boundaries_are_upper_inclusive() {
        assert_eq!(schema0_index(1.0), 0);
        assert_eq!(schema0_index(1.5), 1);
        assert_eq!(schema0_index(2.0), 1);
        assert_eq!(schema0_index(0.5), -1);
        assert_eq!(schema0_index(0.3), -1);
        assert_eq!(schema0_index(1e-6), -19); // (2^-20, 2^-19] = (0.95, 1.9] µs
    }

    #[test]
    fn classic_latency_buckets_are_exact_and_cumulative_in_prometheus() {
        let mut h = Hist::default();
        for v in [0, 1, 2, 3, 5, 9, 1000] {
            h.record(v);
        }
        let e = latency(&h, 1e-6);
        assert_eq!(e.count, 7);
        // [0,1] -> le 2 µs, [2,3] -> le 4, [4,7] -> le 8, [8,15] -> le 16 ...
        assert_eq!(e.classic[0], (2e-6, 2));
        assert_eq!(e.classic[1], (4e-6, 2));
        assert_eq!(e.classic[2], (8e-6, 1));
        assert_eq!(e.classic[3], (16e-6, 1));
        assert_eq!(e.classic.last(), Some(&(f64::INFINITY, 0)));
        let in_buckets: u64 = e.classic.iter().map(|b| b.1).sum();
        assert_eq!(in_buckets, 7);
        // The sum is within 1/16 of each value (+0.5 µs of truncation) of the truth.
        let truth: f64 = [0.5, 1.5, 2.5, 3.5, 5.5, 9.5, 1000.5].iter().sum::<f64>() * 1e-6;
        assert!(
            (e.sum - truth).abs() <= truth / 16.0 + 7.0 * 0.5e-6,
            "{} vs {truth}",
            e.sum
        );
    }

    /// (index, count) of each native bucket, rebuilt from spans and deltas as
    /// Prometheus does.
    fn decode(n: &Native) -> Vec<(i32, u64)> {
        let mut counts = Vec::new();
        let (mut idx, mut count, mut d) = (0i32, 0i64, n.deltas.iter());
        for &(offset, len) in &n.spans {
            idx += offset;
            for _ in 0..len {
                count += d.next().unwrap();
                counts.push((idx, count as u64));
                idx += 1;
            }
        }
        counts
    }

    #[test]
    fn native_spans_and_deltas_round_trip_to_the_counts() {
        let mut h = Hist::default();
        for v in [0, 0, 1, 3, 3, 3, 100, 5000] {
            h.record(v);
        }
        let e = latency(&h, 1e-6);
        let n = e.native.unwrap();
        let counts = decode(&n);
        let total: u64 = counts.iter().map(|c| c.1).sum::<u64>();
        assert_eq!(total, 8);
        // Below 1 µs (recorded as 0): midpoint 0.5 µs, in (2^-21, 2^-20] s.
        assert!(counts.contains(&(-20, 2)), "{counts:?}");
        // Each count sits in the bucket of its slot's midpoint: 3 µs (3.5e-6 s) in
        // (2^-19, 2^-18] = (1.9, 3.8] µs; 5000 µs in (2^-8, 2^-7] s = (3.9, 7.8] ms.
        assert!(counts.contains(&(-18, 3)), "{counts:?}");
        assert!(counts.contains(&(-7, 1)), "{counts:?}");
    }

    #[test]
    fn native_buckets_add_up_each_index_once_in_order() {
        // Many slots share a native bucket; each index appears once, ascending, with
        // the sum of its slots' counts.
        let mut h = Hist::default();
        for v in (0..200_000u64).step_by(7) {
            h.record(v);
        }
        let mut want = std::collections::BTreeMap::new();
        for (slot, &c) in h.slots.iter().enumerate().filter(|(_, &c)| c > 0) {
            let (lo, hi) = slot_bounds(slot);
            *want
                .entry(schema0_index((lo + hi + 1) as f64 / 2.0 * 1e-6))
                .or_insert(0) += c;
        }
        let n = latency(&h, 1e-6).native.unwrap();
        assert_eq!(decode(&n), want.into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn size_buckets_are_exact() {
        let mut slots = [0u64; SIZE_SLOTS];
        slots[0] = 1; // 0 or 1 byte
        slots[12] = 5; // 4096..8191
        let e = sizes(&slots, 5 * 4096 + 1);
        assert_eq!(e.classic[0], (1.0, 1));
        assert_eq!(e.classic[12], (8191.0, 5));
        assert_eq!(e.count, 6);
        assert_eq!(e.sum, 20481.0);
        assert!(e.native.is_none());
    }
}
