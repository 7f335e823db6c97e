//! The Prometheus endpoint's series: what the daemon already samples, as counters,
//! gauges and histograms, encoded with prometheus-client (OpenMetrics text, or
//! Prometheus protobuf with native histograms when the scraper asks for it).
//!
//! The sampler publishes a [`MetricsSample`] after each tick (an `Arc` swapped under a
//! mutex held for the swap only); a scrape encodes the latest one. A scrape therefore
//! never waits for a sample, never takes the sampler's locks, and two scrapes of the
//! same sample give the same numbers.
//!
//! - Gauges and info metrics of the machine come from the daemon's key table
//!   (providers/system.rs: the `prom` column), so a key and its series cannot disagree.
//! - Counters come from the kernel's cumulative counters (CPU busy time per core and for
//!   the machine, pressure stall time, swap traffic), passed through [`Monotonic`] so
//!   that they never go backwards across scrapes whatever the sampling interval.
//! - Per-process series are bounded: the top N processes by each measure.
//! - Histograms (run-queue latency, write sizes) only when their collectors are loaded
//!   (`--collect`): their hooks cost on every event.
//! - kernstat's own cost: its CPU time and the run time and count of each BPF program.

pub mod buckets;
mod families;
pub mod http;

use families::*;

use std::sync::{Arc, Mutex};

use hyper::body::Bytes;

use kernstat_model::hist::Hist;
use kernstat_model::net::{LinkRate, NetSample, KINDS};
use kernstat_model::raw::SystemSample;
use kernstat_model::writes::SIZE_SLOTS;
use kernstat_model::{Model, ProcRate};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, NativeHistogram, NativeHistogramBuckets};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use crate::providers::system::{Prom, Sample, METRICS};

/// A counter that only goes forward: each reading adds its increase over the previous
/// one (a reading below the previous is taken as a restart of the source and adds 0).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Monotonic {
    last: Option<u64>,
    total: u64,
}

impl Monotonic {
    /// Takes a reading; returns the counter's value.
    pub fn observe(&mut self, reading: u64) -> u64 {
        match self.last {
            None => self.total = reading,
            Some(prev) => self.total = self.total.saturating_add(reading.saturating_sub(prev)),
        }
        self.last = Some(reading);
        self.total
    }

    /// The counter's value.
    pub fn value(&self) -> u64 {
        self.total
    }
}

/// The machine's cumulative counters, kept monotonic.
#[derive(Clone, Debug, Default)]
pub struct Counters {
    /// Machine-wide busy time, ns.
    pub busy_ns: Monotonic,
    /// Per-CPU busy time, ns.
    pub core_busy_ns: Vec<Monotonic>,
    /// Swapped in / out, bytes.
    pub swap_in_bytes: Monotonic,
    /// Swapped out, bytes.
    pub swap_out_bytes: Monotonic,
    /// Pressure stall time, µs: cpu some, memory some/full, io some/full.
    pub psi_us: [Monotonic; 5],
    /// Socket payload bytes of all processes (exited ones included) since the daemon
    /// started, by kind (tcp, udp, unix, other): received, sent. None without BPF.
    pub socket_bytes: Option<[[u64; 4]; 2]>,
}

impl Counters {
    /// Adds what every process sent and received between two samples (exact: the
    /// difference of each process's counters, a new process's counted from zero).
    pub fn observe_net(&mut self, prev: &NetSample, cur: &NetSample) {
        if cur.attribution.is_none() {
            return;
        }
        let totals = self.socket_bytes.get_or_insert([[0; 4]; 2]);
        // Not over a sample without the collector's reading (a failed read): every
        // counter is cumulative, and would be added again whole.
        if prev.attribution.is_none() {
            return;
        }
        let mut add = |d: kernstat_model::net::NetCounters| {
            for (t, b) in totals[0].iter_mut().zip(d.rx_bytes) {
                *t += b;
            }
            for (t, b) in totals[1].iter_mut().zip(d.tx_bytes) {
                *t += b;
            }
        };
        for p in &cur.procs {
            add(match prev.get(p.pid, p.start_ns) {
                Some(b) => p.counters.since(&b.counters),
                None => p.counters,
            });
        }
        // Processes counted per user (past their user's share of the table).
        for c in &cur.crowded {
            add(match prev.crowded.iter().find(|b| b.uid == c.uid) {
                Some(b) => c.counters.since(&b.counters),
                None => c.counters,
            });
        }
    }

    /// Takes the counters of one raw sample.
    pub fn observe(&mut self, sys: &SystemSample) {
        self.busy_ns.observe(sys.busy_ns);
        self.core_busy_ns.resize(
            sys.cores.len().max(self.core_busy_ns.len()),
            Monotonic::default(),
        );
        for (c, t) in self.core_busy_ns.iter_mut().zip(&sys.cores) {
            c.observe(t.busy_ns);
        }
        let page = if sys.page_size == 0 {
            4096
        } else {
            sys.page_size
        };
        self.swap_in_bytes
            .observe(sys.swap_in_pages.saturating_mul(page));
        self.swap_out_bytes
            .observe(sys.swap_out_pages.saturating_mul(page));
        let psi = [
            sys.psi.cpu_some,
            sys.psi.memory_some,
            sys.psi.memory_full,
            sys.psi.io_some,
            sys.psi.io_full,
        ];
        for (m, line) in self.psi_us.iter_mut().zip(psi) {
            if let Some(l) = line {
                m.observe(l.total_us);
            }
        }
    }
}

/// One BPF program's run-time statistics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProgramStats {
    /// Which collector loaded it ("sampler", "runqlat", "writes").
    pub collector: &'static str,
    /// The program's name.
    pub program: String,
    /// Nanoseconds it ran while statistics were on.
    pub run_time_ns: u64,
    /// Times it ran while statistics were on.
    pub run_count: u64,
}

/// A write- or read-size histogram of one (syscall, file kind).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SizeSeries {
    /// "write", "pwrite64", ...
    pub syscall: String,
    /// "file", "pipe", "socket", ...
    pub kind: String,
    /// Calls per log2 size slot (size asked for).
    pub slots: [u64; SIZE_SLOTS],
    /// Bytes asked for, in all.
    pub bytes: u64,
}

/// Everything one scrape reports; published by the sampler after each tick.
#[derive(Clone, Debug, Default)]
pub struct MetricsSample {
    /// The latest model (gauges, per-process figures).
    pub model: Model,
    /// Wall time of the sample, µs.
    pub sample_us: f64,
    /// The machine's counters.
    pub counters: Counters,
    /// Run-queue latency of the machine (µs slots), when runqlat is collected.
    pub runq: Option<Hist>,
    /// Run-queue latency per CPU, when runqlat is collected.
    pub runq_per_cpu: Vec<Hist>,
    /// Write sizes per syscall and file kind, when writes are collected.
    pub writes: Vec<SizeSeries>,
    /// Block I/O latency per device and operation (cumulative), when biolat is collected.
    pub biolat: Vec<kernstat_model::biolat::DiskOp>,
    /// The kernel's own counters (cumulative), where the collector reads them.
    pub kernel: kernstat_model::counters::KernelCounters,
    /// TCP connect latency since the hooks were loaded (µs), where they are.
    pub tcp_connect: Option<Hist>,
    /// TCP segments retransmitted per process since the daemon started: (pid, command,
    /// segments), the largest first, bounded.
    pub tcp_retrans: Vec<(u32, String, u64)>,
    /// kernstat's own CPU time (all threads, exited ones included), ns.
    pub self_cpu_ns: u64,
    /// kernstat's resident memory, bytes.
    pub self_rss_bytes: u64,
    /// Its BPF programs' statistics.
    pub programs: Vec<ProgramStats>,
    /// Whether the kernel's BPF statistics are on (else run times read 0).
    pub bpf_stats: bool,
    /// Entries in the BPF maps that grow with what the machine does: (collector, map,
    /// entries, capacity).
    pub map_entries: Vec<(&'static str, &'static str, u64, u64)>,
}

/// What the endpoint serves from.
#[derive(Debug)]
pub struct Exporter {
    latest: Mutex<Option<Arc<MetricsSample>>>,
    top: usize,
    scrapes: std::sync::atomic::AtomicU64,
    /// Each exposition of the latest sample, encoded by the first scrape that asked for
    /// it: every series comes from the sample, so scrapes between two samples get the
    /// same bytes (a Prometheus pair, or a scraper and `kernstat dump`, encode once).
    encoded: Mutex<Encoded>,
    /// The length of the last OpenMetrics exposition (the next one's buffer size).
    last_len: std::sync::atomic::AtomicUsize,
}

/// The expositions of one sample.
#[derive(Debug, Default)]
struct Encoded {
    of: Option<Arc<MetricsSample>>,
    openmetrics: Option<Bytes>,
    classic: Option<Bytes>,
    protobuf: Option<Bytes>,
}

impl Exporter {
    /// An exporter with no sample yet; per-process series for the top `top` processes.
    pub fn new(top: usize) -> Arc<Self> {
        Arc::new(Exporter {
            latest: Mutex::new(None),
            top,
            scrapes: std::sync::atomic::AtomicU64::new(0),
            encoded: Mutex::default(),
            last_len: std::sync::atomic::AtomicUsize::new(0),
        })
    }

    /// Publishes a sample (the lock is held for the pointer swap only).
    pub fn publish(&self, s: MetricsSample) {
        let s = Arc::new(s);
        if let Ok(mut l) = self.latest.lock() {
            *l = Some(s);
        }
    }

    /// The latest sample.
    pub fn latest(&self) -> Option<Arc<MetricsSample>> {
        self.latest.lock().ok().and_then(|l| l.clone())
    }

    /// Scrapes served.
    pub fn scrapes(&self) -> u64 {
        self.scrapes.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn registry(self: &Arc<Self>) -> Registry {
        let mut r = Registry::default();
        r.register_collector(Box::new(Scrape(self.clone())));
        r
    }

    /// The cache of the latest sample's expositions (emptied when a newer sample was
    /// published since they were made).
    fn cached(&self) -> std::sync::MutexGuard<'_, Encoded> {
        let latest = self.latest();
        let mut e = self.encoded.lock().unwrap_or_else(|e| e.into_inner());
        let same = match (&e.of, &latest) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        };
        if !same {
            *e = Encoded {
                of: latest,
                ..Encoded::default()
            };
        }
        e
    }

    /// The OpenMetrics text exposition (encoded once per sample).
    pub fn encode_text(self: &Arc<Self>) -> Result<Bytes, std::fmt::Error> {
        self.scrapes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut e = self.cached();
        self.openmetrics(&mut e)
    }

    fn openmetrics(self: &Arc<Self>, e: &mut Encoded) -> Result<Bytes, std::fmt::Error> {
        if let Some(t) = &e.openmetrics {
            return Ok(t.clone());
        }
        // Sized from the last exposition, so the buffer is not grown (copied) as the
        // text is written: ~20 KB at 300 processes, more with control groups. The cached
        // bytes keep the spare eighth (2.5 KB at 300 processes) until the next sample.
        let last = self.last_len.load(std::sync::atomic::Ordering::Relaxed);
        let mut out = String::with_capacity(last.max(32 * 1024) + last / 8);
        prometheus_client::encoding::text::encode(&mut out, &self.registry())?;
        self.last_len
            .store(out.len(), std::sync::atomic::Ordering::Relaxed);
        let t = Bytes::from(out);
        e.openmetrics = Some(t.clone());
        Ok(t)
    }

    /// The classic text format 0.0.4 (encoded once per sample).
    pub fn encode_classic_text(self: &Arc<Self>) -> Result<Bytes, std::fmt::Error> {
        self.scrapes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut e = self.cached();
        if let Some(t) = &e.classic {
            return Ok(t.clone());
        }
        let om = self.openmetrics(&mut e)?;
        let t = Bytes::from(http::openmetrics_to_text(
            std::str::from_utf8(&om).map_err(|_| std::fmt::Error)?,
        ));
        e.classic = Some(t.clone());
        Ok(t)
    }

    /// The Prometheus protobuf exposition (length-delimited MetricFamily messages;
    /// encoded once per sample).
    pub fn encode_protobuf(self: &Arc<Self>) -> Result<Bytes, std::fmt::Error> {
        self.scrapes
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut e = self.cached();
        if let Some(b) = &e.protobuf {
            return Ok(b.clone());
        }
        let b = Bytes::from(
            prometheus_client::encoding::prometheus_protobuf::encode_to_vec(&self.registry())
                .map_err(|_| std::fmt::Error)?,
        );
        e.protobuf = Some(b.clone());
        Ok(b)
    }
}

#[derive(Debug)]
struct Scrape(Arc<Exporter>);

impl Collector for Scrape {
    fn encode(&self, mut enc: DescriptorEncoder<'_>) -> Result<(), std::fmt::Error> {
        use MetricType::{Counter, Gauge, Histogram};
        let Some(s) = self.0.latest() else {
            return Ok(());
        };
        let top = self.0.top;
        let sample = Sample {
            model: &s.model,
            sample_us: s.sample_us,
        };
        let enc = &mut enc;

        // Gauges and info metrics from the key table. A key that is not exported is not
        // evaluated: some are whole JSON documents (`snapshot`, `summary`,
        // `network.sockets`, `cgroups`, `events.recent`), and building them was a
        // quarter of the encoding's CPU when every key was computed and then dropped
        // (perf of one sample encoded 2,000 times in a row, 2026-11-27).
        for m in METRICS {
            if matches!(m.prom, Prom::None) {
                continue;
            }
            match (m.prom, (m.value)(&sample)) {
                (Prom::Gauge(name, scale), Some(v)) => {
                    if let Some(v) = v.as_f64() {
                        single(enc, name, m.info().help, Gauge, v * scale)?;
                    }
                }
                (Prom::Info(name, label), Some(crate::providers::system::Value::Text(t))) => {
                    info(enc, name, m.info().help, label, t)?;
                }
                _ => {}
            }
        }

        // Counters, from the kernel's cumulative counters.
        let c = &s.counters;
        single(
            enc,
            "kernstat_system_cpu_busy_seconds",
            "CPU time spent busy, all CPUs together (BPF: the sum of every task's run time; procfs: /proc/stat)",
            Counter,
            secs(c.busy_ns.value()),
        )?;
        labeled(
            enc,
            "kernstat_cpu_busy_seconds",
            "CPU time each CPU spent busy (/proc/stat: everything but idle and iowait)",
            Counter,
            c.core_busy_ns
                .iter()
                .enumerate()
                .map(|(cpu, b)| ([("cpu", cpu)], secs(b.value()))),
        )?;
        single(
            enc,
            "kernstat_cpus_online",
            "online CPUs",
            Gauge,
            f64::from(s.model.ncpus),
        )?;
        single(
            enc,
            "kernstat_swap_in_bytes",
            "bytes swapped in (/proc/vmstat pswpin)",
            Counter,
            c.swap_in_bytes.value() as f64,
        )?;
        single(
            enc,
            "kernstat_swap_out_bytes",
            "bytes swapped out (/proc/vmstat pswpout)",
            Counter,
            c.swap_out_bytes.value() as f64,
        )?;
        let psi = [
            ("cpu", "some", s.model.psi.cpu_some.is_some()),
            ("memory", "some", s.model.psi.memory_some.is_some()),
            ("memory", "full", s.model.psi.memory_full.is_some()),
            ("io", "some", s.model.psi.io_some.is_some()),
            ("io", "full", s.model.psi.io_full.is_some()),
        ];
        if psi.iter().any(|p| p.2) {
            labeled(
                enc,
                "kernstat_pressure_stalled_seconds",
                "time tasks were stalled on a resource (/proc/pressure: some = at least one task, full = all non-idle tasks)",
                Counter,
                psi.iter()
                    .zip(&c.psi_us)
                    .filter(|((_, _, present), _)| *present)
                    .map(|((resource, kind, _), m)| {
                        ([("resource", *resource), ("kind", *kind)], m.value() as f64 / 1e6)
                    }),
            )?;
        }

        // Per-process series, top N by each measure.
        let procs = &s.model.procs;
        let mut io_top = top_by(procs, top, |p| p.read_bps + p.write_bps);
        io_top.retain(|p| !p.counters_hidden);
        let per_process: [ProcessFamily<'_>; 4] = [
            (
                "kernstat_process_cpu_seconds",
                "CPU time of a process, its threads and exited threads included (the top processes by CPU use over the last sample)",
                Counter,
                top_by(procs, top, |p| p.cpu_percent),
                |p| secs(p.cpu_ns),
            ),
            (
                "kernstat_process_resident_memory_bytes",
                "resident memory of a process (the top processes by resident memory)",
                Gauge,
                top_by(procs, top, |p| p.rss_bytes as f64),
                |p| p.rss_bytes as f64,
            ),
            (
                "kernstat_process_read_bytes",
                "bytes a process read from storage (the top processes by storage I/O over the last sample)",
                Counter,
                io_top.clone(),
                |p| p.read_bytes as f64,
            ),
            (
                "kernstat_process_written_bytes",
                "bytes a process wrote to storage (the top processes by storage I/O over the last sample)",
                Counter,
                io_top,
                |p| p.write_bytes as f64,
            ),
        ];
        for (name, help, kind, rows, value) in per_process {
            labeled(
                enc,
                name,
                help,
                kind,
                rows.into_iter().map(|p| (proc_labels(p), value(p))),
            )?;
        }
        network(enc, &s, top)?;
        cgroups(enc, &s.model.cgroups)?;
        single(
            enc,
            "kernstat_tasks_blocked",
            "tasks in uninterruptible sleep (D)",
            Gauge,
            s.model.blocked_tasks as f64,
        )?;

        // Histograms the kernel keeps, each built in one of these two buffers.
        let (mut lat, mut size) = (buckets::Encoded::default(), buckets::Encoded::default());
        if let Some(h) = &s.runq {
            family(
                enc,
                "kernstat_runqueue_latency_seconds",
                "time tasks waited on a run queue between waking up (or being preempted) and running",
                Histogram,
                |e| {
                    buckets::latency_into(h, 1e-6, &mut lat);
                    histogram(e, &lat)
                },
            )?;
            family(
                enc,
                "kernstat_cpu_runqueue_latency_seconds",
                "run-queue latency per CPU",
                Histogram,
                |e| {
                    for (cpu, h) in s.runq_per_cpu.iter().enumerate() {
                        buckets::latency_into(h, 1e-6, &mut lat);
                        histogram(&mut e.encode_family(&[("cpu", cpu)])?, &lat)?;
                    }
                    Ok(())
                },
            )?;
        }
        if !s.writes.is_empty() {
            family(
                enc,
                "kernstat_write_size_bytes",
                "sizes asked of write-family system calls, per call and kind of file",
                Histogram,
                |e| {
                    for w in &s.writes {
                        let labels = [("syscall", w.syscall.as_str()), ("kind", w.kind.as_str())];
                        buckets::sizes_into(&w.slots, w.bytes, &mut size);
                        histogram(&mut e.encode_family(&labels)?, &size)?;
                    }
                    Ok(())
                },
            )?;
        }

        if !s.biolat.is_empty() {
            family(
                enc,
                "kernstat_disk_latency_seconds",
                "time block requests took from issue to the device to completion, per device and operation (the request's own block-layer stamps)",
                Histogram,
                |e| {
                    for d in &s.biolat {
                        let labels = ([("device", d.disk.as_str())], [("op", OpLabel(d.op))]);
                        buckets::latency_into(&d.hist, 1e-6, &mut lat);
                        histogram(&mut e.encode_family(&labels)?, &lat)?;
                    }
                    Ok(())
                },
            )?;
            labeled(
                enc,
                "kernstat_disk_request_errors",
                "block requests completed with an error, per device and operation",
                Counter,
                s.biolat.iter().map(|d| {
                    (
                        ([("device", d.disk.as_str())], [("op", OpLabel(d.op))]),
                        d.errors as f64,
                    )
                }),
            )?;
        }
        kernel_counters(enc, &s.kernel)?;
        if let Some(findings) = s.model.why.as_ref().and_then(|w| w["findings"].as_array()) {
            labeled(
                enc,
                "kernstat_why_score",
                "kernstat why over the daemon's last 10 s: the share of the window stalled on each resource (docs/why.md)",
                MetricType::Gauge,
                findings.iter().filter_map(|f| {
                    Some((
                        [("resource", f["resource"].as_str()?)],
                        f["score"].as_f64()?,
                    ))
                }),
            )?;
        }
        if let Some(h) = &s.tcp_connect {
            family(
                enc,
                "kernstat_tcp_connect_latency_seconds",
                "time from a connect's SYN to the connection being established (sock:inet_sock_set_state)",
                Histogram,
                |e| {
                    buckets::latency_into(h, 1e-6, &mut lat);
                    histogram(e, &lat)
                },
            )?;
            labeled(
                enc,
                "kernstat_process_tcp_retransmits",
                "TCP segments a process's sockets retransmitted since kernstat started (the processes that retransmitted most)",
                Counter,
                s.tcp_retrans
                    .iter()
                    .map(|(pid, comm, n)| (([("pid", *pid)], [("comm", comm.as_str())]), *n as f64)),
            )?;
        }

        // What kernstat itself costs.
        let own: [(&str, &str, MetricType, f64); 4] = [
            (
                "kernstat_self_cpu_seconds",
                "CPU time of the kernstat daemon (all its threads; BPF iterators run inside it)",
                Counter,
                secs(s.self_cpu_ns),
            ),
            (
                "kernstat_self_resident_memory_bytes",
                "resident memory of the kernstat daemon",
                Gauge,
                s.self_rss_bytes as f64,
            ),
            (
                "kernstat_sample_duration_seconds",
                "wall time the last sample took",
                Gauge,
                s.sample_us / 1e6,
            ),
            (
                "kernstat_bpf_stats_enabled",
                "1 when the kernel's BPF run-time statistics are on (program run times are 0 otherwise)",
                Gauge,
                f64::from(u8::from(s.bpf_stats)),
            ),
        ];
        for (name, help, kind, v) in own {
            single(enc, name, help, kind, v)?;
        }
        let maps = |value: fn(u64, u64) -> u64| {
            s.map_entries.iter().map(move |(collector, map, n, cap)| {
                (
                    [("collector", *collector), ("map", *map)],
                    value(*n, *cap) as f64,
                )
            })
        };
        if !s.map_entries.is_empty() {
            labeled(
                enc,
                "kernstat_bpf_map_entries",
                "entries in kernstat's BPF maps that grow with the machine's activity (exited processes' entries are deleted)",
                Gauge,
                maps(|n, _| n),
            )?;
            labeled(
                enc,
                "kernstat_bpf_map_capacity",
                "the most entries those maps can hold",
                Gauge,
                maps(|_, cap| cap),
            )?;
        }
        let programs = |value: fn(&ProgramStats) -> f64| {
            s.programs.iter().map(move |p| {
                (
                    [("collector", p.collector), ("program", p.program.as_str())],
                    value(p),
                )
            })
        };
        if !s.programs.is_empty() {
            labeled(
                enc,
                "kernstat_bpf_program_run_seconds",
                "time kernstat's BPF programs ran in other tasks' context (kernel BPF statistics)",
                Counter,
                programs(|p| secs(p.run_time_ns)),
            )?;
            labeled(
                enc,
                "kernstat_bpf_program_runs",
                "times kernstat's BPF programs ran (kernel BPF statistics)",
                Counter,
                programs(|p| p.run_count as f64),
            )?;
        }
        info(
            enc,
            "kernstat_build",
            "the kernstat daemon's version",
            "version",
            env!("CARGO_PKG_VERSION"),
        )
    }
}

#[cfg(test)]
mod tests;
