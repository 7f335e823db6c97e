//! What `kernstat daemon --metrics` adds to the daemon: the kernel histograms asked for
//! with `--collect` (loaded while still privileged), the kernel's BPF statistics, and
//! after each sample the [`MetricsSample`] the endpoint serves.
//!
//! Write sizes are kept as running totals per (syscall, file kind): each sample adds
//! every (process, syscall, kind) counter's increase since the previous one, and the
//! counters of processes that exited are deleted from the kernel map (which would
//! otherwise fill on a machine where processes come and go), so the totals never go
//! back and the map stays small.

use std::collections::{BTreeMap, HashSet};
use std::os::fd::BorrowedFd;
use std::sync::Arc;

use anyhow::Context;
use kernstat_bpf::runqlat::{self, Runqlat};
use kernstat_bpf::stats::{prog_run_time, RunTimeStats};
use kernstat_bpf::writes::{self, Writes};
use kernstat_daemon::metrics::{Counters, Exporter, MetricsSample, ProgramStats, SizeSeries};
use kernstat_model::hist::Hist;
use kernstat_model::writes::{Deltas, FileKind, Syscall, SIZE_SLOTS};
use kernstat_model::{Model, RawSample};

use kernstat_collect::Collector;

/// The Prometheus endpoint as asked for.
#[derive(Clone, Debug)]
pub struct MetricsOptions {
    /// Where it listens.
    pub addr: std::net::SocketAddr,
    /// Per-process series for the top N processes by each measure (0: none).
    pub top: usize,
    /// `--metrics-top` was given (said when processes are private and it is ignored).
    pub top_given: bool,
    /// Load the run-queue latency histogram.
    pub runqlat: bool,
    /// Load the write-size histograms.
    pub writes: bool,
    /// Load the block I/O latency histograms.
    pub biolat: bool,
    /// Switch the kernel's BPF run-time statistics on.
    pub bpf_stats: bool,
}

/// The metrics side of the daemon.
pub struct MetricsSources {
    exporter: Arc<Exporter>,
    runq: Option<Runqlat>,
    writes: Option<Writes>,
    bio: Option<kernstat_bpf::biolat::Biolat>,
    block_names: kernstat_sources::block::BlockNames,
    /// Block I/O latency per device and operation at the last publish (cumulative).
    last_bio: Vec<kernstat_model::biolat::DiskOp>,
    /// TCP segments retransmitted per process since start (pid, command).
    tcp_retrans: BTreeMap<(u32, String), u64>,
    write_deltas: Deltas,
    write_totals: BTreeMap<(Syscall, FileKind), ([u64; SIZE_SLOTS], u64)>,
    counters: Counters,
    stats: Option<RunTimeStats>,
    /// Entries in the writes map at the last read (before exited processes' are deleted).
    write_entries: u64,
    /// The network counters of the previous sample (socket totals are differences).
    prev_net: kernstat_model::net::NetSample,
    /// The run-queue histogram of every CPU at the last publish (for the recorder).
    last_runq: Option<Vec<u64>>,
    /// Whose per-process I/O and network counters the endpoint may serve: nobody's for
    /// a system daemon (every local user can scrape it; /proc/PID/io is the owner's and
    /// root's only).
    viewer: kernstat_model::Viewer,
}

impl MetricsSources {
    /// Loads what `args` asks for (call while privileged). `private_processes`: other
    /// users' processes are hidden on this machine (hidepid, or --private-processes),
    /// so no per-process series are served at all.
    pub fn open(
        args: &MetricsOptions,
        system: bool,
        collector: &Collector,
        private_processes: bool,
    ) -> anyhow::Result<Self> {
        let runq = if args.runqlat {
            Some(Runqlat::load(&runqlat::Config::default()).context("--collect runqlat")?)
        } else {
            None
        };
        let writes = if args.writes {
            Some(Writes::load(&writes::Config::default()).context("--collect writes")?)
        } else {
            None
        };
        let bio = if args.biolat {
            Some(
                kernstat_bpf::biolat::Biolat::load(&kernstat_bpf::biolat::Config::default())
                    .context("--collect biolat")?,
            )
        } else {
            None
        };
        let any_bpf =
            collector.sampler().is_some() || runq.is_some() || writes.is_some() || bio.is_some();
        let stats = if any_bpf && args.bpf_stats {
            match RunTimeStats::enable() {
                Ok(s) => Some(s),
                Err(e) => {
                    eprintln!("kernstat daemon: BPF statistics unavailable ({e}); kernstat_bpf_program_* series read 0");
                    None
                }
            }
        } else {
            None
        };
        let top = if private_processes {
            if args.top_given && args.top > 0 {
                eprintln!("kernstat daemon: --metrics-top {}: other users' processes are private here (hidepid or --private-processes); /metrics serves no per-process series", args.top);
            }
            0
        } else {
            args.top
        };
        Ok(MetricsSources {
            exporter: Exporter::new(top),
            viewer: if system {
                kernstat_model::Viewer::Nobody
            } else {
                kernstat_model::Viewer::Everyone
            },
            runq,
            writes,
            bio,
            block_names: Default::default(),
            last_bio: Vec::new(),
            tcp_retrans: BTreeMap::new(),
            write_deltas: Deltas::default(),
            write_totals: BTreeMap::new(),
            counters: Counters::default(),
            stats,
            write_entries: 0,
            prev_net: Default::default(),
            last_runq: None,
        })
    }

    /// The exporter the endpoint serves from.
    pub fn exporter(&self) -> Arc<Exporter> {
        self.exporter.clone()
    }

    /// Whether the histograms can be read with the privileges held now.
    pub fn readable(&self) -> bool {
        self.runq.as_ref().is_none_or(|r| r.read_per_cpu().is_ok())
            && self.writes.as_ref().is_none_or(|w| w.read().is_ok())
    }

    fn programs(&self, collector: &Collector) -> Vec<ProgramStats> {
        let mut fds: Vec<(&'static str, String, BorrowedFd<'_>)> = Vec::new();
        if let Some(s) = collector.sampler() {
            let [exit, free] = s.hook_programs();
            fds.push(("sampler", "sample_exit".into(), exit));
            fds.push(("sampler", "sample_free".into(), free));
        }
        if let Some(r) = &self.runq {
            for (name, fd) in r.programs() {
                fds.push(("runqlat", name.to_string(), fd));
            }
        }
        if let Some(b) = &self.bio {
            for (name, fd) in b.programs() {
                fds.push(("biolat", name.to_string(), fd));
            }
        }
        let write_progs = self
            .writes
            .as_ref()
            .map(|w| w.programs())
            .unwrap_or_default();
        for (name, raw) in &write_progs {
            // SAFETY: the fd belongs to `self.writes`, alive for this call.
            fds.push(("writes", name.clone(), unsafe {
                BorrowedFd::borrow_raw(*raw)
            }));
        }
        let net_progs = collector.net().map(|n| n.programs()).unwrap_or_default();
        for (name, raw) in &net_progs {
            // SAFETY: the fd belongs to the collector's net counter, alive for this call.
            fds.push(("net", name.clone(), unsafe { BorrowedFd::borrow_raw(*raw) }));
        }
        fds.into_iter()
            .filter_map(|(collector, program, fd)| {
                let t = prog_run_time(fd).ok()?;
                Some(ProgramStats {
                    collector,
                    program,
                    run_time_ns: t.run_time_ns,
                    run_count: t.run_cnt,
                })
            })
            .collect()
    }

    fn update_writes(&mut self, model: &Model) {
        let Some(w) = &self.writes else {
            return;
        };
        let Ok(cur) = w.read() else {
            return;
        };
        self.write_entries = cur.len() as u64;
        for d in self.write_deltas.next(cur) {
            let (slots, bytes) = self
                .write_totals
                .entry((d.sys, d.kind))
                .or_insert(([0; SIZE_SLOTS], 0));
            for (t, x) in slots.iter_mut().zip(&d.asked) {
                *t += x;
            }
            *bytes += d.asked_bytes;
        }
        // Counters of processes that have exited: delete them (their totals are in).
        let alive: HashSet<u32> = model.procs.iter().map(|p| p.pid).collect();
        if w.forget(|pid| !alive.contains(&pid)) > 0 {
            self.write_deltas.retain(|pid| alive.contains(&pid));
        }
    }

    /// Builds and publishes the metrics of one sample.
    pub fn publish(
        &mut self,
        collector: &Collector,
        cur: &RawSample,
        model: &Model,
        sample_us: f64,
    ) {
        self.counters.observe(&cur.sys);
        self.counters.observe_net(&self.prev_net, &cur.net);
        self.prev_net.clone_from(&cur.net);
        self.update_writes(model);
        let (runq, runq_per_cpu) = match self.runq.as_ref().map(|r| r.read_per_cpu()) {
            Some(Ok(cpus)) => {
                let mut total = Hist::default();
                cpus.iter().for_each(|h| total.add(h));
                (Some(total), cpus)
            }
            _ => (None, Vec::new()),
        };
        self.last_runq = runq.as_ref().map(|h| h.slots.clone());
        if let Some(b) = &self.bio {
            let names = &mut self.block_names;
            if let Ok(now) = b.read(&mut |ma, mi| names.name(ma, mi)) {
                self.last_bio = now;
            }
        }
        let writes = self
            .write_totals
            .iter()
            .map(|((sys, kind), (slots, bytes))| SizeSeries {
                syscall: sys.name(false).to_string(),
                kind: kind.as_str().to_string(),
                slots: *slots,
                bytes: *bytes,
            })
            .collect();
        let mut model = model.clone();
        model.restrict_counters(self.viewer);
        let sample = MetricsSample {
            model,
            sample_us,
            counters: self.counters.clone(),
            runq,
            runq_per_cpu,
            writes,
            biolat: self.last_bio.clone(),
            tcp_connect: cur.tcp.present.then(|| cur.tcp.connect.clone()),
            tcp_retrans: self.tcp_retrans(cur),
            kernel: cur.kernel.clone(),
            self_cpu_ns: kernstat_os::process_cpu_ns(),
            self_rss_bytes: self_rss_bytes(),
            programs: self.programs(collector),
            bpf_stats: self.stats.is_some(),
            map_entries: {
                let mut m = Vec::new();
                if let Some(w) = &self.writes {
                    m.push(("writes", "stats", self.write_entries, w.capacity()));
                }
                if let Some(n) = collector.net() {
                    m.push(("net", "exited", n.exited_entries(), n.capacity()));
                }
                m
            },
        };
        self.exporter.publish(sample);
    }
}

impl MetricsSources {
    /// Adds a sample's retransmits per process; the 20 largest, largest first (the
    /// table keeps at most 1,000 processes: the smallest go first).
    fn tcp_retrans(&mut self, cur: &RawSample) -> Vec<(u32, String, u64)> {
        for s in &cur.tcp.retransmits {
            *self.tcp_retrans.entry((s.pid, s.comm.clone())).or_default() += s.count;
        }
        if self.tcp_retrans.len() > 1000 {
            let mut v: Vec<((u32, String), u64)> =
                std::mem::take(&mut self.tcp_retrans).into_iter().collect();
            v.sort_by_key(|e| std::cmp::Reverse(e.1));
            v.truncate(500);
            self.tcp_retrans = v.into_iter().collect();
        }
        if self.viewer == kernstat_model::Viewer::Nobody {
            // Per-process network figures are not for every local user (docs/security.md).
            return Vec::new();
        }
        let mut v: Vec<(u32, String, u64)> = self
            .tcp_retrans
            .iter()
            .map(|((p, c), n)| (*p, c.clone(), *n))
            .collect();
        v.sort_by(|a, b| b.2.cmp(&a.2).then(a.0.cmp(&b.0)));
        v.truncate(20);
        v
    }

    /// What the flight recorder keeps of the kernel histograms (--collect), as of the
    /// last publish: all cumulative since start.
    pub fn recorded(&self) -> kernstat_record::frame::Hists {
        let writes = self
            .write_totals
            .iter()
            .map(
                |((sys, kind), (slots, bytes))| kernstat_record::frame::WriteSizes {
                    syscall: sys.name(false).to_string(),
                    kind: kind.as_str().to_string(),
                    slots: slots.to_vec(),
                    bytes: *bytes,
                },
            )
            .collect();
        let biolat = self
            .last_bio
            .iter()
            .map(|d| kernstat_record::frame::DiskLatency {
                disk: d.disk.clone(),
                op: d.op.name(),
                slots: d.hist.slots.clone(),
                bytes: d.bytes,
                errors: d.errors,
            })
            .collect();
        kernstat_record::frame::Hists {
            runqlat_us: self.last_runq.clone(),
            writes,
            biolat,
            connect_us: None,
        }
    }
}

/// This process's resident memory (/proc/self/statm, in pages).
fn self_rss_bytes() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as u64;
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .map_or(0, |pages| pages * page)
}
