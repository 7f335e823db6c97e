//! `bar --bench`: ticks timed and their allocations counted. A sample that reads more
//! processes, tasks or socket-using processes than any before grows its tables (an
//! allocation that stays), and so does the next one (samples alternate between two sets
//! of tables); every other sample must allocate nothing. They are counted apart, so that
//! the claim holds on a machine where processes come and go.

use std::time::Duration;

use crate::Ticker;

/// What `n` ticks cost.
#[derive(Clone, Debug)]
pub struct Report {
    /// Ticks measured.
    pub n: u32,
    /// Tasks in the last sample.
    pub tasks: u64,
    /// Each tick's time, ns, sorted.
    pub sorted_ns: Vec<u64>,
    /// The mean tick, µs.
    pub avg_us: f64,
    /// Allocations over every measured tick.
    pub allocations: u64,
    /// Ticks that grew a table (or followed one that did).
    pub growing_samples: u32,
    /// Allocations in the other ticks: 0 when no steady tick allocates.
    pub allocs_in_steady_samples: u64,
}

impl Report {
    /// The `p`-quantile (0..=1) of the tick times, µs (nearest rank).
    pub fn percentile_us(&self, p: f64) -> f64 {
        if self.sorted_ns.is_empty() {
            return 0.0;
        }
        let idx = ((self.sorted_ns.len() - 1) as f64 * p).round() as usize;
        self.sorted_ns[idx] as f64 / 1000.0
    }
}

fn table_sizes(t: &Ticker) -> [usize; 3] {
    [
        t.prev.tasks.procs.len(),
        t.prev.tasks.tasks as usize,
        t.prev.net.procs.len(),
    ]
}

/// Takes a baseline and ten warm-up ticks (every buffer grows to its working size),
/// then measures `n` ticks 1 ms apart. `allocations` reads the process's allocation
/// counter (kernstat-os's counting allocator, installed by the binary).
pub fn bench(t: &mut Ticker, n: u32, allocations: fn() -> u64) -> anyhow::Result<Report> {
    t.baseline()?;
    for _ in 0..10 {
        std::thread::sleep(Duration::from_millis(1));
        t.tick(None)?;
    }
    let mut times = Vec::with_capacity(n as usize);
    let mut most = table_sizes(t);
    let mut grew_last = false;
    let (mut allocs, mut steady_allocs, mut growing) = (0u64, 0u64, 0u32);
    for _ in 0..n {
        std::thread::sleep(Duration::from_millis(1));
        let a0 = allocations();
        let took = t.tick(None)?;
        let made = allocations() - a0;
        allocs += made;
        let now = table_sizes(t);
        let grew = now.iter().zip(&most).any(|(n, m)| n > m);
        for (m, n) in most.iter_mut().zip(now) {
            *m = (*m).max(n);
        }
        let after_growth = std::mem::replace(&mut grew_last, grew);
        if grew || after_growth {
            growing += 1;
        } else {
            steady_allocs += made;
        }
        times.push(took.as_nanos() as u64);
    }
    let avg_us = times.iter().sum::<u64>() as f64 / times.len().max(1) as f64 / 1000.0;
    times.sort_unstable();
    Ok(Report {
        n,
        tasks: t.prev.tasks.tasks,
        sorted_ns: times,
        avg_us,
        allocations: allocs,
        growing_samples: growing,
        allocs_in_steady_samples: steady_allocs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_nearest_ranks_in_microseconds() {
        let r = Report {
            n: 5,
            tasks: 0,
            sorted_ns: vec![1_000, 2_000, 3_000, 4_000, 100_000],
            avg_us: 22.0,
            allocations: 0,
            growing_samples: 0,
            allocs_in_steady_samples: 0,
        };
        assert_eq!(r.percentile_us(0.0), 1.0);
        assert_eq!(r.percentile_us(0.5), 3.0);
        assert_eq!(r.percentile_us(0.95), 100.0);
        assert_eq!(r.percentile_us(1.0), 100.0);
        let empty = Report {
            sorted_ns: vec![],
            ..r
        };
        assert_eq!(empty.percentile_us(0.5), 0.0);
    }
}
