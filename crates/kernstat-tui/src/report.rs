//! What one refresh costs, split into sampling, view and drawing (`top --report`), and
//! the signals that end or redraw the view.

use kernstat_os::signals::{Signals, Wake};

/// What the signals waiting on the signalfd ask for, all of them taken.
pub(crate) enum Pending {
    Nothing,
    Stop,
    Resized,
}

pub(crate) fn pending_signals(signals: &Signals) -> Pending {
    let mut pending = Pending::Nothing;
    loop {
        match signals.poll() {
            Wake::Stop => return Pending::Stop,
            Wake::Resize => pending = Pending::Resized,
            Wake::Timeout => return pending,
            Wake::RtMin | Wake::RtMin1 => {}
        }
    }
}

/// Per-refresh counts for `--report` (benchmarks and the allocation test): allocations,
/// and CPU time in all and split into sampling (the iterator's read, /proc), the view
/// (panels, sort, filter, tree) and drawing (widgets, diff, the terminal write).
#[derive(Default)]
pub(crate) struct Report {
    allocs: Vec<u64>,
    cpu_ns: Vec<u64>,
    sample_ns: Vec<u64>,
    view_ns: Vec<u64>,
    draw_ns: Vec<u64>,
}

impl Report {
    pub(crate) fn add(&mut self, allocs: u64, [all, sample, view, draw]: [u64; 4]) {
        self.allocs.push(allocs);
        self.cpu_ns.push(all);
        self.sample_ns.push(sample);
        self.view_ns.push(view);
        self.draw_ns.push(draw);
    }

    pub(crate) fn json(&self, refreshes: u64) -> serde_json::Value {
        fn median(v: &[u64]) -> u64 {
            let mut v = v.to_vec();
            v.sort_unstable();
            v.get(v.len() / 2).copied().unwrap_or(0)
        }
        // The first refreshes fill caches (names, command lines): steady state after.
        let steady = |v: &[u64]| {
            if v.len() > 2 {
                median(&v[2..])
            } else {
                median(v)
            }
        };
        serde_json::json!({
            "refreshes": refreshes,
            "allocations_per_refresh_median": steady(&self.allocs),
            "allocations_per_refresh": self.allocs,
            "cpu_us_per_refresh_median": steady(&self.cpu_ns) / 1000,
            "sample_us_median": steady(&self.sample_ns) / 1000,
            "view_us_median": steady(&self.view_ns) / 1000,
            "draw_us_median": steady(&self.draw_ns) / 1000,
            "max_rss_kib": max_rss_kib(),
        })
    }
}

fn max_rss_kib() -> i64 {
    // SAFETY: getrusage writes into the struct we pass.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru.ru_maxrss
    }
}
