//! Latency histograms with log2 buckets cut into 8 linear sub-buckets (bpf/runqlat.h),
//! and what people read from them: counts, the classic log2 view, and percentiles.
//!
//! Slot layout: values 0..7 have a slot each; a value v >= 8 with e = floor(log2 v) is in
//! slot 8 + (e - 3) * 8 + ((v >> (e - 3)) & 7), which covers [lo, lo + 2^(e-3)).
//!
//! Percentiles interpolate linearly inside the slot that holds the rank. Error bound:
//! below 8 every slot is one value wide, so the answer is exact (in the recorded unit,
//! which truncates: 1.9 us is recorded as 1 us); from 8 up a slot is 1/8 of its power of
//! two wide, so the answer is within 2^(e-3) of the truth: at most 12.5 % of the value,
//! where a log2 histogram's lower bound can be off by a factor of two.

use serde::Serialize;

/// Highest exponent with its own slots (bpf/runqlat.h; kernstat-bpf checks at build time).
pub const MAX_EXP: u32 = 40;
/// Number of slots (bpf/runqlat.h; kernstat-bpf checks at build time).
pub const SLOTS: usize = 8 + (MAX_EXP as usize - 3 + 1) * 8;

/// The slot a value goes to.
pub fn slot_of(v: u64) -> usize {
    if v < 8 {
        return v as usize;
    }
    let e = 63 - v.leading_zeros();
    if e > MAX_EXP {
        return SLOTS - 1;
    }
    8 + (e as usize - 3) * 8 + ((v >> (e - 3)) & 7) as usize
}

/// The values a slot holds: [lo, hi] inclusive.
pub fn slot_bounds(slot: usize) -> (u64, u64) {
    if slot < 8 {
        return (slot as u64, slot as u64);
    }
    let e = (slot - 8) / 8 + 3;
    let sub = ((slot - 8) % 8) as u64;
    let width = 1u64 << (e - 3);
    let lo = (1u64 << e) + sub * width;
    (lo, lo + width - 1)
}

/// A histogram of slot counts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hist {
    /// Count per slot (`SLOTS` long).
    pub slots: Vec<u64>,
}

impl Default for Hist {
    fn default() -> Self {
        Hist {
            slots: vec![0; SLOTS],
        }
    }
}

/// One log2 bucket for the classic view: [lo, hi] and its count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Log2Bucket {
    /// Smallest value.
    pub lo: u64,
    /// Largest value.
    pub hi: u64,
    /// Events.
    pub count: u64,
}

impl Hist {
    /// From raw slot counts (any length; missing slots are zero).
    pub fn from_slots(slots: &[u64]) -> Self {
        let mut h = Hist::default();
        for (d, s) in h.slots.iter_mut().zip(slots) {
            *d = *s;
        }
        h
    }

    /// Records one value (for tests and userspace sources).
    pub fn record(&mut self, v: u64) {
        self.slots[slot_of(v)] += 1;
    }

    /// Adds another histogram.
    pub fn add(&mut self, o: &Hist) {
        for (a, b) in self.slots.iter_mut().zip(&o.slots) {
            *a += b;
        }
    }

    /// This histogram minus an earlier one of the same source (counts only grow).
    pub fn since(&self, earlier: &Hist) -> Hist {
        Hist {
            slots: self
                .slots
                .iter()
                .zip(&earlier.slots)
                .map(|(a, b)| a.saturating_sub(*b))
                .collect(),
        }
    }

    /// The same events in milliseconds (each slot's lower bound divided by 1,000):
    /// biolatency's -m.
    pub fn to_ms(&self) -> Hist {
        let mut m = Hist::default();
        for (slot, &n) in self.slots.iter().enumerate() {
            if n > 0 {
                m.slots[slot_of(slot_bounds(slot).0 / 1000)] += n;
            }
        }
        m
    }

    /// Total events.
    pub fn count(&self) -> u64 {
        self.slots.iter().sum()
    }

    /// The classic view: log2 buckets 0-1, 2-3, 4-7, ... up to the highest non-empty one
    /// (empty when there are no events), as libbpf-tools prints them.
    pub fn log2(&self) -> Vec<Log2Bucket> {
        let mut counts = vec![0u64; MAX_EXP as usize + 2];
        for (slot, &c) in self.slots.iter().enumerate() {
            if c == 0 {
                continue;
            }
            let (lo, _) = slot_bounds(slot);
            let k = if lo <= 1 {
                0
            } else {
                63 - lo.leading_zeros() as usize
            };
            let last = counts.len() - 1;
            counts[k.min(last)] += c;
        }
        let Some(last) = counts.iter().rposition(|&c| c > 0) else {
            return Vec::new();
        };
        (0..=last)
            .map(|k| {
                let hi = (1u64 << (k + 1)) - 1;
                let lo = if k == 0 { 0 } else { 1u64 << k };
                Log2Bucket {
                    lo,
                    hi,
                    count: counts[k],
                }
            })
            .collect()
    }

    /// The value below which `p` (0..=1) of the events fall, interpolated inside its
    /// slot; None without events.
    pub fn percentile(&self, p: f64) -> Option<f64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = (p.clamp(0.0, 1.0) * total as f64).max(1.0);
        let mut seen = 0u64;
        for (slot, &c) in self.slots.iter().enumerate() {
            if c == 0 {
                continue;
            }
            if (seen + c) as f64 >= rank {
                let (lo, hi) = slot_bounds(slot);
                let within = (rank - seen as f64) / c as f64;
                return Some(lo as f64 + within * (hi - lo) as f64);
            }
            seen += c;
        }
        let (lo, _) = slot_bounds(SLOTS - 1);
        Some(lo as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_cover_every_value_once_in_order() {
        let mut prev = 0;
        for v in 0..100_000u64 {
            let s = slot_of(v);
            assert!(s >= prev, "slots grow with values");
            let (lo, hi) = slot_bounds(s);
            assert!(lo <= v && v <= hi, "{v} in slot {s} = [{lo}, {hi}]");
            prev = s;
        }
        assert_eq!(slot_of(7), 7);
        assert_eq!(slot_bounds(8), (8, 8));
        assert_eq!(slot_bounds(16), (16, 17));
        assert_eq!(slot_of(u64::MAX), SLOTS - 1);
    }

    #[test]
    fn log2_view_matches_libbpf_tools_buckets() {
        let mut h = Hist::default();
        for v in [0, 1, 2, 3, 4, 7, 8, 15, 16, 1000] {
            h.record(v);
        }
        let b = h.log2();
        assert_eq!((b[0].lo, b[0].hi, b[0].count), (0, 1, 2));
        assert_eq!((b[1].lo, b[1].hi, b[1].count), (2, 3, 2));
        assert_eq!((b[2].lo, b[2].hi, b[2].count), (4, 7, 2));
        assert_eq!((b[3].lo, b[3].hi, b[3].count), (8, 15, 2));
        assert_eq!((b[4].lo, b[4].hi, b[4].count), (16, 31, 1));
        assert_eq!((b[9].lo, b[9].hi, b[9].count), (512, 1023, 1));
        assert_eq!(b.len(), 10);
        assert!(Hist::default().log2().is_empty());
    }

    #[test]
    fn percentiles_are_within_an_eighth_of_their_power_of_two() {
        // A spread of values with known exact percentiles.
        let mut h = Hist::default();
        let mut values: Vec<u64> = (0..20_000u64).map(|i| (i * i) % 50_000 + 3).collect();
        for &v in &values {
            h.record(v);
        }
        values.sort_unstable();
        for p in [0.5, 0.9, 0.99] {
            let exact =
                values[((values.len() as f64 * p).ceil() as usize).saturating_sub(1)] as f64;
            let got = h.percentile(p).unwrap();
            let bound = if exact < 8.0 {
                1.0
            } else {
                (1u64 << (63 - (exact as u64).leading_zeros())) as f64 / 8.0
            };
            assert!(
                (got - exact).abs() <= bound,
                "p{p}: got {got}, exact {exact}, bound {bound}"
            );
        }
        // A log2 histogram's lower bound for p50 would be off by up to 2x.
        assert_eq!(Hist::default().percentile(0.5), None);
    }

    #[test]
    fn since_subtracts_an_earlier_reading() {
        let mut a = Hist::default();
        a.record(5);
        let mut b = a.clone();
        b.record(5);
        b.record(100);
        let d = b.since(&a);
        assert_eq!(d.count(), 2);
    }
}
