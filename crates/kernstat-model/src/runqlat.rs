//! Run-queue latency intervals: the kernel's histograms only grow, so each report is the
//! difference between two readings (nothing is reset, so nothing recorded between a
//! read and a reset is lost), or, in cumulative mode, the difference from the first.
//!
//! Keyed histograms (per process, thread or PID namespace) of tasks that have gone quiet
//! for three intervals are named for removal from the kernel's map, so that a long run
//! over a machine where processes come and go does not fill it.

use std::collections::BTreeMap;

use crate::hist::Hist;

/// Intervals a keyed histogram may stay unchanged before it is forgotten.
pub const QUIET_INTERVALS: u32 = 3;

/// One interval's histograms.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Interval {
    /// Per CPU (index = CPU), unkeyed mode.
    pub cpus: Vec<Hist>,
    /// Per key with events in the interval, in key order (keyed modes).
    pub keyed: Vec<(u32, Hist)>,
    /// Every event of the interval: the CPUs' sum, or the keys' in keyed modes.
    pub total: Hist,
    /// Largest latency of the interval (cumulative mode: of the run), in the recorded
    /// unit's nanoseconds as the kernel kept them.
    pub max_ns: u64,
    /// Keys quiet for [`QUIET_INTERVALS`]: the caller deletes them from the kernel map.
    pub forget: Vec<u32>,
}

/// Turns cumulative readings into intervals.
#[derive(Clone, Debug, Default)]
pub struct Intervals {
    cumulative: bool,
    keyed: bool,
    base_cpus: Vec<Hist>,
    prev_cpus: Vec<Hist>,
    prev_keyed: BTreeMap<u32, Hist>,
    quiet: BTreeMap<u32, u32>,
    run_max_ns: u64,
}

impl Intervals {
    /// Starts from the first reading of the per-CPU histograms (keyed histograms start
    /// empty: the kernel creates a key on its first event). `keyed`: totals come from the
    /// keyed histograms rather than the per-CPU ones.
    pub fn new(first_cpus: Vec<Hist>, keyed: bool, cumulative: bool) -> Self {
        Intervals {
            cumulative,
            keyed,
            base_cpus: first_cpus.clone(),
            prev_cpus: first_cpus,
            ..Default::default()
        }
    }

    /// The interval ending with these readings. `max_ns` is the largest latency the
    /// kernel saw since the previous call (it resets that one value itself).
    pub fn next(&mut self, cpus: Vec<Hist>, keyed: Vec<(u32, Hist)>, max_ns: u64) -> Interval {
        let base = if self.cumulative {
            &self.base_cpus
        } else {
            &self.prev_cpus
        };
        let empty = Hist::default();
        let cpu_hists: Vec<Hist> = cpus
            .iter()
            .zip(base.iter().chain(std::iter::repeat(&empty)))
            .map(|(c, b)| c.since(b))
            .collect();
        if !self.cumulative {
            self.prev_cpus = cpus;
        }
        let mut out_keyed = Vec::new();
        let mut forget = Vec::new();
        for (k, h) in keyed {
            let d = match self.prev_keyed.get(&k) {
                Some(p) if !self.cumulative => h.since(p),
                _ => h.clone(),
            };
            let n = d.count();
            if !self.cumulative {
                let quiet = self.quiet.entry(k).or_insert(0);
                *quiet = if n == 0 { *quiet + 1 } else { 0 };
                if *quiet >= QUIET_INTERVALS {
                    forget.push(k);
                }
                self.prev_keyed.insert(k, h);
            }
            if n > 0 {
                out_keyed.push((k, d));
            }
        }
        for k in &forget {
            self.prev_keyed.remove(k);
            self.quiet.remove(k);
        }
        self.run_max_ns = self.run_max_ns.max(max_ns);
        let mut total = Hist::default();
        if self.keyed {
            out_keyed.iter().for_each(|(_, h)| total.add(h));
        } else {
            cpu_hists.iter().for_each(|h| total.add(h));
        }
        Interval {
            cpus: cpu_hists,
            keyed: out_keyed,
            total,
            max_ns: if self.cumulative {
                self.run_max_ns
            } else {
                max_ns
            },
            forget,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(values: &[u64]) -> Hist {
        let mut h = Hist::default();
        values.iter().for_each(|&v| h.record(v));
        h
    }

    #[test]
    fn each_interval_holds_only_its_own_events() {
        let mut iv = Intervals::new(vec![hist(&[1]), hist(&[])], false, false);
        let a = iv.next(vec![hist(&[1, 5]), hist(&[9])], vec![], 9000);
        assert_eq!(
            a.total.count(),
            2,
            "the first reading's event is not counted"
        );
        assert_eq!(a.cpus[0], hist(&[5]));
        assert_eq!(a.max_ns, 9000);
        let b = iv.next(vec![hist(&[1, 5]), hist(&[9, 9])], vec![], 100);
        assert_eq!(b.total, hist(&[9]));
        assert_eq!(b.max_ns, 100);
    }

    #[test]
    fn cumulative_mode_counts_from_the_start_and_keeps_the_run_maximum() {
        let mut iv = Intervals::new(vec![hist(&[1])], false, true);
        iv.next(vec![hist(&[1, 5])], vec![], 9000);
        let b = iv.next(vec![hist(&[1, 5, 7])], vec![], 100);
        assert_eq!(b.total, hist(&[5, 7]));
        assert_eq!(b.max_ns, 9000);
    }

    #[test]
    fn quiet_keys_are_forgotten_after_three_intervals_and_counted_again_if_they_return() {
        let mut iv = Intervals::new(vec![], true, false);
        let first = iv.next(vec![], vec![(7, hist(&[3])), (8, hist(&[4]))], 0);
        assert_eq!(first.keyed.len(), 2);
        assert_eq!(first.total.count(), 2);
        let mut forgotten = Vec::new();
        for n in 2..5 {
            let busy = hist(&vec![4; n]);
            let i = iv.next(vec![], vec![(7, hist(&[3])), (8, busy)], 0);
            assert_eq!(i.keyed.iter().map(|(k, _)| *k).collect::<Vec<_>>(), [8]);
            forgotten.extend(i.forget);
        }
        assert_eq!(forgotten, [7]);
        // Deleted from the kernel map, key 7 comes back with a fresh histogram.
        let back = iv.next(vec![], vec![(7, hist(&[2]))], 0);
        assert_eq!(back.keyed, vec![(7, hist(&[2]))]);
    }
}
