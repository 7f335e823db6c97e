//! The probes `top` switches on and off by key: run-queue latency (bpf/runqlat.bpf.c,
//! keyed per process). Loading attaches the programs; dropping the panel closes their
//! links and descriptors, so the kernel unloads them at once (the test checks the
//! program list).
//!
//! The probe's own cost is measured, not estimated: BPF run-time statistics are switched
//! on while the panel is open and the programs' run time per second of wall time is shown
//! in the footer.

use std::collections::HashMap;
use std::time::Instant;

use kernstat_bpf::runqlat::{Config, KeyKind, Runqlat};
use kernstat_bpf::stats::{prog_run_time, RunTimeStats};
use kernstat_model::hist::Hist;
use kernstat_model::runqlat::Intervals;

/// Run-queue latency over the last interval.
pub struct RunqPanel {
    rq: Runqlat,
    intervals: Intervals,
    _stats: Option<RunTimeStats>,
    last_run_ns: u64,
    last_at: Instant,
    /// Every wake-up's wait, machine-wide, over the last interval (µs).
    pub machine: Hist,
    /// Per-process 99th percentile over the last interval, µs.
    pub p99: HashMap<u32, f64>,
    /// The programs' CPU time per wall time, percent of one core (None: statistics off).
    pub cost_percent: Option<f64>,
    /// "tp_btf" or "raw_tp".
    pub attach: &'static str,
}

impl RunqPanel {
    /// Loads and attaches the programs.
    pub fn open() -> anyhow::Result<Self> {
        let cfg = Config {
            key: KeyKind::Pid,
            ..Default::default()
        };
        let rq = Runqlat::load(&cfg)?;
        let stats = RunTimeStats::enable().ok();
        let first = rq.read_per_cpu()?;
        let last_run_ns = run_time(&rq);
        Ok(RunqPanel {
            attach: rq.attach_kind().as_str(),
            intervals: Intervals::new(first, true, false),
            rq,
            _stats: stats,
            last_run_ns,
            last_at: Instant::now(),
            machine: Hist::default(),
            p99: HashMap::new(),
            cost_percent: None,
        })
    }

    /// Reads the interval since the previous call.
    pub fn refresh(&mut self) -> anyhow::Result<()> {
        let cpus = self.rq.read_per_cpu()?;
        let keyed = self.rq.read_keyed()?;
        let iv = self.intervals.next(cpus, keyed, self.rq.take_max_ns()?);
        self.rq.forget_keys(&iv.forget);
        self.p99.clear();
        for (pid, h) in &iv.keyed {
            if let Some(v) = h.percentile(0.99) {
                self.p99.insert(*pid, v);
            }
        }
        self.machine = iv.total;
        let now = Instant::now();
        let run = run_time(&self.rq);
        let wall = now.duration_since(self.last_at).as_nanos() as f64;
        self.cost_percent = (self._stats.is_some() && wall > 0.0)
            .then(|| run.saturating_sub(self.last_run_ns) as f64 / wall * 100.0);
        self.last_run_ns = run;
        self.last_at = now;
        Ok(())
    }

    /// Names of the loaded programs (for the help screen and tests).
    pub fn program_names(&self) -> Vec<&'static str> {
        self.rq.programs().into_iter().map(|(n, _)| n).collect()
    }
}

fn run_time(rq: &Runqlat) -> u64 {
    rq.programs()
        .into_iter()
        .filter_map(|(_, fd)| prog_run_time(fd).ok())
        .map(|s| s.run_time_ns)
        .sum()
}
