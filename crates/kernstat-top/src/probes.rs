//! The probes `top` switches on and off by key: run-queue latency (bpf/runqlat.bpf.c,
//! keyed per process) and write sizes (bpf/writes.bpf.c, per process). Loading attaches the programs; dropping the panel closes their
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
use kernstat_model::writes::{self as wr, Thresholds, Verdict};

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

/// Write calls per process over the last interval: how many, and how many were small.
pub struct WritesPanel {
    writes: kernstat_bpf::writes::Writes,
    intervals: wr::Intervals,
    _stats: Option<RunTimeStats>,
    last_run_ns: u64,
    last_at: Instant,
    /// When a call counts as small, and when a process is flagged.
    pub thresholds: Thresholds,
    /// Every process with write calls in the interval, busiest first.
    pub verdicts: Vec<Verdict>,
    /// The programs' CPU time per wall time, percent of one core (None: statistics off).
    pub cost_percent: Option<f64>,
    /// "fexit" or "tracepoints".
    pub attach: &'static str,
}

impl WritesPanel {
    /// Loads and attaches the programs (every process, the write family).
    pub fn open() -> anyhow::Result<Self> {
        let writes = kernstat_bpf::writes::Writes::load(&kernstat_bpf::writes::Config::default())?;
        let stats = RunTimeStats::enable().ok();
        let mut intervals = wr::Intervals::default();
        // The counters start at zero at load; the first interval begins now.
        let t = Thresholds::default();
        intervals.next(writes.read()?, 1.0, &t, false, 0);
        let last_run_ns = writes_run_time(&writes);
        Ok(WritesPanel {
            attach: writes.attach().as_str(),
            writes,
            intervals,
            _stats: stats,
            last_run_ns,
            last_at: Instant::now(),
            thresholds: t,
            verdicts: Vec::new(),
            cost_percent: None,
        })
    }

    /// Reads the interval since the previous call; forgets processes `alive` rejects.
    pub fn refresh(&mut self, alive: impl Fn(u32) -> bool) -> anyhow::Result<()> {
        let now = Instant::now();
        let secs = now.duration_since(self.last_at).as_secs_f64();
        let reports = self.intervals.next(
            self.writes.read()?,
            secs,
            &self.thresholds,
            false,
            usize::MAX,
        );
        self.verdicts = reports.into_iter().map(|(v, _)| v).collect();
        if self.writes.forget(|pid| !alive(pid)) > 0 {
            self.intervals.retain(&alive);
        }
        let run = writes_run_time(&self.writes);
        self.cost_percent = (self._stats.is_some() && secs > 0.0)
            .then(|| run.saturating_sub(self.last_run_ns) as f64 / (secs * 1e9) * 100.0);
        self.last_run_ns = run;
        self.last_at = now;
        Ok(())
    }

    /// How many programs are attached (for the message line).
    pub fn program_count(&self) -> usize {
        self.writes.programs().len()
    }
}

fn writes_run_time(w: &kernstat_bpf::writes::Writes) -> u64 {
    w.programs()
        .into_iter()
        // SAFETY: the descriptors belong to `w`, which outlives this borrow.
        .filter_map(|(_, fd)| {
            prog_run_time(unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }).ok()
        })
        .map(|s| s.run_time_ns)
        .sum()
}
