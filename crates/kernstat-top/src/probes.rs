//! The probes `top` switches on and off by key: run-queue latency (bpf/runqlat.bpf.c,
//! keyed per process), write sizes (bpf/writes.bpf.c, per process) and block I/O
//! latency (bpf/biolat.bpf.c, per device and operation). Loading attaches the programs; dropping the panel closes their
//! links and descriptors, so the kernel unloads them at once (the test checks the
//! program list).
//!
//! The probe's own cost is measured, not estimated: BPF run-time statistics are switched
//! on while the panel is open and the programs' run time per second of wall time is shown
//! in the footer.

use std::collections::HashMap;
use std::time::Instant;

use kernstat_bpf::biolat::Biolat;
use kernstat_bpf::runqlat::{Config, KeyKind, Runqlat};
use kernstat_bpf::stats::{prog_run_time, RunTimeStats};
use kernstat_model::biolat::{since, DiskOp};
use kernstat_model::hist::Hist;
use kernstat_model::runqlat::Intervals;
use kernstat_model::writes::{self as wr, Thresholds, Verdict};

/// TCP retransmits per process over each refresh (the RETR/s column, key R).
pub use kernstat_collect::tcp_interval::TcpInterval;

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

/// The summed run time of `programs` (BPF run-time statistics), ns.
fn programs_run_time(programs: Vec<(&'static str, std::os::fd::BorrowedFd<'_>)>) -> u64 {
    programs
        .into_iter()
        .filter_map(|(_, fd)| prog_run_time(fd).ok())
        .map(|s| s.run_time_ns)
        .sum()
}

fn run_time(rq: &Runqlat) -> u64 {
    programs_run_time(rq.programs())
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

/// One device and operation in the disk panel.
#[derive(Clone, Debug)]
pub struct DiskRow {
    /// The last interval's requests, bytes and latency histogram.
    pub interval: DiskOp,
    /// Requests completed since the panel opened.
    pub total: u64,
}

/// Block I/O latency per device and operation: the last interval's requests and
/// percentiles, and the requests since the panel opened (issue to completion, the
/// request's own issue stamp read at completion: one hook).
pub struct DiskPanel {
    bio: Biolat,
    names: kernstat_sources::block::BlockNames,
    opened: Vec<DiskOp>,
    before: Vec<DiskOp>,
    _stats: Option<RunTimeStats>,
    last_run_ns: u64,
    last_at: Instant,
    /// Every device and operation with a request since the panel opened: the busiest
    /// in the last interval first.
    pub rows: Vec<DiskRow>,
    /// The last interval, seconds.
    pub seconds: f64,
    /// The programs' CPU time per wall time, percent of one core (None: statistics off).
    pub cost_percent: Option<f64>,
    /// "tp_btf" or "raw_tp".
    pub attach: &'static str,
}

impl DiskPanel {
    /// Loads and attaches the program; what it counted before now is the baseline.
    pub fn open() -> anyhow::Result<Self> {
        let bio = Biolat::load(&kernstat_bpf::biolat::Config::default())?;
        let stats = RunTimeStats::enable().ok();
        let mut names = kernstat_sources::block::BlockNames::default();
        let first = bio.read(&mut |ma, mi| names.name(ma, mi))?;
        let last_run_ns = disk_run_time(&bio);
        Ok(DiskPanel {
            attach: bio.attach_kind().as_str(),
            bio,
            names,
            opened: first.clone(),
            before: first,
            _stats: stats,
            last_run_ns,
            last_at: Instant::now(),
            rows: Vec::new(),
            seconds: 0.0,
            cost_percent: None,
        })
    }

    /// Reads the interval since the previous call.
    pub fn refresh(&mut self) -> anyhow::Result<()> {
        let names = &mut self.names;
        let now = self.bio.read(&mut |ma, mi| names.name(ma, mi))?;
        let at = Instant::now();
        self.seconds = at.duration_since(self.last_at).as_secs_f64();
        let interval = since(&now, &self.before);
        let totals = since(&now, &self.opened);
        self.rows = interval
            .into_iter()
            .zip(totals)
            .filter(|(_, t)| t.count > 0)
            .map(|(interval, t)| DiskRow {
                interval,
                total: t.count,
            })
            .collect();
        self.rows.sort_by(|a, b| {
            b.interval
                .count
                .cmp(&a.interval.count)
                .then(b.total.cmp(&a.total))
                .then(a.interval.disk.cmp(&b.interval.disk))
        });
        self.before = now;
        let run = disk_run_time(&self.bio);
        self.cost_percent = (self._stats.is_some() && self.seconds > 0.0)
            .then(|| run.saturating_sub(self.last_run_ns) as f64 / (self.seconds * 1e9) * 100.0);
        self.last_run_ns = run;
        self.last_at = at;
        Ok(())
    }

    /// How many programs are attached (for the message line).
    pub fn program_count(&self) -> usize {
        self.bio.programs().len()
    }
}

fn disk_run_time(bio: &Biolat) -> u64 {
    programs_run_time(bio.programs())
}
