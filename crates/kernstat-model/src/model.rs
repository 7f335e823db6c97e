//! The model: two raw samples in, everything a person reads out (rates, percentages, top
//! lists, alert level). Pure functions of their inputs, so every number can be unit-tested
//! with made-up samples.
//!
//! `Model::update` reuses the model's own buffers: after the first call it does not
//! allocate unless the number of processes grows past every earlier sample.

use serde::{Deserialize, Serialize};

use crate::raw::{Comm, Hardware, MemInfo, Psi, Source};
use crate::sample::RawSample;
use crate::thresholds::{Level, Thresholds};
use crate::top::{Top, TopEntry, TOP_N};

/// One process over the interval between two samples.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProcRate {
    /// Process id.
    pub pid: u32,
    /// Command name.
    pub comm: Comm,
    /// /proc state letter.
    #[serde(serialize_with = "ser_state", deserialize_with = "de_state")]
    pub state: u8,
    /// Kernel thread.
    pub kthread: bool,
    /// In uninterruptible sleep (itself or one of its threads).
    pub blocked: bool,
    /// CPU use over the interval in percent of one core (like top).
    pub cpu_percent: f64,
    /// CPU time of all its threads, live and exited, in nanoseconds.
    pub cpu_ns: u64,
    /// Resident memory in bytes.
    pub rss_bytes: u64,
    /// Storage reads over the interval, bytes per second.
    pub read_bps: f64,
    /// Storage writes over the interval, bytes per second.
    pub write_bps: f64,
    /// Cumulative storage reads, bytes.
    pub read_bytes: u64,
    /// Cumulative storage writes, bytes.
    pub write_bytes: u64,
    /// Payload bytes received per second on its sockets (None: not counted here).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub net_rx_bps: Option<f64>,
    /// Payload bytes sent per second.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub net_tx_bps: Option<f64>,
    /// Payload bytes received since the collector started (or the process did).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub net_rx_bytes: Option<u64>,
    /// Payload bytes sent since then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub net_tx_bytes: Option<u64>,
    /// Real uid.
    pub uid: u32,
    /// Effective uid.
    pub euid: u32,
    /// Its I/O and network counters are not shown to this reader (not their process:
    /// see [`crate::Viewer`]); they read 0 and absent.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub counters_hidden: bool,
}

fn ser_state<S: serde::Serializer>(state: &u8, s: S) -> Result<S::Ok, S::Error> {
    let buf = [*state];
    s.serialize_str(std::str::from_utf8(&buf).unwrap_or("?"))
}

fn de_state<'de, D: serde::Deserializer<'de>>(d: D) -> Result<u8, D::Error> {
    let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
    Ok(s.bytes().next().unwrap_or(b'?'))
}

/// Which metric set the alert level (Waybar's `alt`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Alert {
    /// CPU busy percent.
    Cpu,
    /// Memory used percent.
    Mem,
    /// Temperature.
    Temp,
    /// Nothing above its warning threshold.
    #[default]
    Ok,
}

impl Alert {
    /// The name as shown.
    pub fn as_str(self) -> &'static str {
        match self {
            Alert::Cpu => "cpu",
            Alert::Mem => "mem",
            Alert::Temp => "temp",
            Alert::Ok => "ok",
        }
    }
}

/// Memory figures derived from MemInfo.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MemModel {
    /// Total RAM, bytes.
    pub total_bytes: u64,
    /// Used = total - available (MemAvailable semantics), bytes.
    pub used_bytes: u64,
    /// Available without swapping, bytes.
    pub available_bytes: u64,
    /// used / total, percent.
    pub used_percent: f64,
    /// Swap in use, bytes.
    pub swap_used_bytes: u64,
    /// Swap size, bytes.
    pub swap_total_bytes: u64,
    /// "machine" (MemTotal), or "cgroup": total is the reader's cgroup's memory limit
    /// and used its usage (inside a container with a limit).
    pub total_source: crate::raw::MemTotalSource,
}

impl MemModel {
    fn from_info(m: &MemInfo) -> Self {
        let used = m.total.saturating_sub(m.available);
        MemModel {
            total_bytes: m.total,
            used_bytes: used,
            available_bytes: m.available,
            used_percent: percent(used as f64, m.total as f64),
            swap_used_bytes: m.swap_total.saturating_sub(m.swap_free),
            swap_total_bytes: m.swap_total,
            total_source: m.total_source,
        }
    }
}

/// Choices that change what the model computes.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ModelOptions {
    /// Show kernel threads in the top lists.
    pub include_kthreads: bool,
    /// Alert thresholds.
    pub thresholds: Thresholds,
}

/// Everything derived from two samples.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Model {
    /// Where the task numbers came from.
    pub source: Source,
    /// Seconds between the two samples.
    pub interval_s: f64,
    /// Online CPUs.
    pub ncpus: u32,
    /// Machine CPU busy percent (all CPUs = 100).
    pub cpu_percent: f64,
    /// Busy percent of each CPU.
    pub cores_percent: Vec<f64>,
    /// Memory.
    pub mem: MemModel,
    /// Swap-in rate, bytes per second.
    pub swap_in_bps: f64,
    /// Swap-out rate, bytes per second.
    pub swap_out_bps: f64,
    /// 1, 5, 15 minute load averages.
    pub load: [f64; 3],
    /// Pressure stall information.
    pub psi: Psi,
    /// GPU busy percent over the interval (i915 from RC6 residency, amdgpu as reported).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_busy_percent: Option<f64>,
    /// Sensors and devices (absent ones are left out).
    pub hw: Hardware,
    /// Processes seen.
    pub process_count: u64,
    /// Tasks (threads) seen.
    pub task_count: u64,
    /// Tasks running or runnable.
    pub running_tasks: u64,
    /// Tasks in uninterruptible sleep.
    pub blocked_tasks: u64,
    /// Processes in D (or with a thread in D).
    pub blocked_procs: u64,
    /// Zombie processes.
    pub zombie_procs: u64,
    /// Top processes by CPU percent.
    pub top_cpu: Top<TOP_N>,
    /// Top processes by resident memory (bytes).
    pub top_mem: Top<TOP_N>,
    /// Top processes by storage I/O (value: read+write bytes/s, extra: write bytes/s).
    pub top_io: Top<TOP_N>,
    /// Some processes in D state (value: CPU percent).
    pub blocked: Top<TOP_N>,
    /// Some zombie processes.
    pub zombies: Top<TOP_N>,
    /// Per-process network over the interval (None: not counted on this machine).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub net: Option<crate::net::NetModel>,
    /// Every network interface, the default route's first.
    pub links: Vec<crate::net::LinkRate>,
    /// Control groups over the interval, parents first (where they are read).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub cgroups: Vec<crate::cgroup::CgroupRate>,
    /// Notable kernel events (OOM kills), the most recent last, at most 50: kept across
    /// updates (whoever watches for them appends).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<crate::events::Event>,
    /// The last `kernstat why` report of whoever computes one (the daemon, over its last
    /// window), as JSON (kernstat-why's Report; this crate is below it).
    #[serde(skip)]
    pub why: Option<serde_json::Value>,
    /// TCP retransmits and connects over the interval (where the hooks are loaded).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp: Option<crate::tcp::TcpModel>,
    /// The kernel's own counters over the interval (faults, reclaim, OOM kills, TCP
    /// retransmits and connects, disks, softirqs), where the collector reads them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub counters: Option<crate::counters::CounterRates>,
    /// Whether kernel threads are in the top lists.
    pub include_kthreads: bool,
    /// The alert level.
    pub level: Level,
    /// Which metric set the level: "cpu", "mem", "temp", or "ok".
    pub alert: Alert,
    /// Every process, sorted by pid.
    pub procs: Vec<ProcRate>,
    /// The rate engine's output buffer, kept between updates (no allocation per sample).
    #[serde(skip)]
    #[doc(hidden)]
    pub rates: Vec<crate::rates::Rates>,
}

fn percent(part: f64, whole: f64) -> f64 {
    if whole <= 0.0 {
        0.0
    } else {
        (part / whole * 100.0).clamp(0.0, 100.0)
    }
}

fn rate(delta: u64, seconds: f64) -> f64 {
    if seconds <= 0.0 {
        0.0
    } else {
        delta as f64 / seconds
    }
}

impl Model {
    /// Recomputes the model from the samples `prev` and `cur` (taken later).
    pub fn update(&mut self, prev: &RawSample, cur: &RawSample, opts: &ModelOptions) {
        let dt_ns = cur.sys.taken_ns.saturating_sub(prev.sys.taken_ns);
        let dt = dt_ns as f64 / 1e9;
        let ncpus = cur.sys.ncpus.max(1);
        self.source = cur.source;
        self.include_kthreads = opts.include_kthreads;
        self.interval_s = dt;
        self.ncpus = ncpus;
        let busy = cur.sys.busy_ns.saturating_sub(prev.sys.busy_ns);
        self.cpu_percent = percent(busy as f64, dt_ns as f64 * ncpus as f64);

        self.cores_percent.clear();
        for (i, c) in cur.sys.cores.iter().enumerate() {
            let p = prev.sys.cores.get(i).copied().unwrap_or_default();
            let b = c.busy_ns.saturating_sub(p.busy_ns) as f64;
            let t = c.total_ns.saturating_sub(p.total_ns) as f64;
            self.cores_percent.push(percent(b, t));
        }

        self.mem = MemModel::from_info(&cur.sys.mem);
        let page = if cur.sys.page_size == 0 {
            4096
        } else {
            cur.sys.page_size
        };
        self.swap_in_bps = rate(
            cur.sys.swap_in_pages.saturating_sub(prev.sys.swap_in_pages) * page,
            dt,
        );
        self.swap_out_bps = rate(
            cur.sys
                .swap_out_pages
                .saturating_sub(prev.sys.swap_out_pages)
                * page,
            dt,
        );
        self.load = cur.sys.load;
        self.psi = cur.sys.psi;
        self.hw = cur.sys.hw;
        self.gpu_busy_percent = gpu_busy(prev, cur, dt);

        self.update_procs(prev, cur, dt, opts);
        self.update_net(prev, cur, dt, opts);
        self.counters = crate::counters::rates(&prev.kernel, &cur.kernel, self.interval_s);
        self.tcp = crate::tcp::model(&prev.tcp, &cur.tcp);
        if cur.cgroups.groups.is_empty() {
            self.cgroups.clear();
        } else {
            self.cgroups = crate::cgroup::rates(&prev.cgroups, &cur.cgroups);
        }

        self.apply_thresholds(&opts.thresholds);
    }

    /// The model without its per-process list and groups (what a bar renders: the
    /// aggregates and top lists, a tenth of the bytes).
    pub fn summary(&self) -> Model {
        Model {
            source: self.source,
            interval_s: self.interval_s,
            ncpus: self.ncpus,
            cpu_percent: self.cpu_percent,
            cores_percent: self.cores_percent.clone(),
            mem: self.mem,
            swap_in_bps: self.swap_in_bps,
            swap_out_bps: self.swap_out_bps,
            load: self.load,
            psi: self.psi,
            gpu_busy_percent: self.gpu_busy_percent,
            hw: self.hw,
            process_count: self.process_count,
            task_count: self.task_count,
            running_tasks: self.running_tasks,
            blocked_tasks: self.blocked_tasks,
            blocked_procs: self.blocked_procs,
            zombie_procs: self.zombie_procs,
            top_cpu: self.top_cpu,
            top_mem: self.top_mem,
            top_io: self.top_io,
            blocked: self.blocked,
            zombies: self.zombies,
            net: self.net.clone(),
            links: self.links.clone(),
            cgroups: Vec::new(),
            counters: None,
            events: Vec::new(),
            tcp: None,
            why: None,
            include_kthreads: self.include_kthreads,
            level: self.level,
            alert: self.alert,
            procs: Vec::new(),
            rates: Vec::new(),
        }
    }

    /// The same model as `viewer` may read it: the I/O and network counters of every
    /// process that is not theirs zeroed (and marked), and the top lists by I/O and by
    /// network made again from what is left. Machine and group figures stay.
    pub fn restrict_counters(&mut self, viewer: crate::Viewer) {
        if viewer == crate::Viewer::Everyone {
            return;
        }
        self.top_io.clear();
        // Retransmits and why's I/O and network parties come from per-socket and
        // per-process I/O counters: only the viewer's own processes stay (groups stay).
        let own: std::collections::HashSet<u32> = self
            .procs
            .iter()
            .filter(|r| viewer.may_see(r.uid, r.euid))
            .map(|r| r.pid)
            .collect();
        if let Some(t) = self.tcp.as_mut() {
            t.top.retain(|(pid, _, _)| own.contains(pid));
            t.peers.clear();
        }
        if let Some(findings) = self
            .why
            .as_mut()
            .and_then(|w| w.get_mut("findings"))
            .and_then(|f| f.as_array_mut())
        {
            for f in findings {
                if !matches!(
                    f.get("resource").and_then(|r| r.as_str()),
                    Some("io" | "network")
                ) {
                    continue;
                }
                for side in ["culprits", "victims"] {
                    if let Some(parties) = f.get_mut(side).and_then(|v| v.as_array_mut()) {
                        parties.retain(|p| {
                            p.get("pid")
                                .and_then(|v| v.as_u64())
                                .is_none_or(|pid| own.contains(&(pid as u32)))
                        });
                    }
                }
            }
        }
        let mut net_top = crate::top::Top::<TOP_N>::default();
        for r in self.procs.iter_mut() {
            if !viewer.may_see(r.uid, r.euid) {
                r.counters_hidden = true;
                r.read_bps = 0.0;
                r.write_bps = 0.0;
                r.read_bytes = 0;
                r.write_bytes = 0;
                r.net_rx_bps = None;
                r.net_tx_bps = None;
                r.net_rx_bytes = None;
                r.net_tx_bytes = None;
                continue;
            }
            if r.kthread && !self.include_kthreads {
                continue;
            }
            let entry = |value: f64, extra: f64| TopEntry {
                pid: r.pid,
                comm: r.comm,
                value,
                extra,
            };
            if r.read_bps + r.write_bps > 0.0 {
                self.top_io
                    .offer(entry(r.read_bps + r.write_bps, r.write_bps));
            }
            let (rx, tx) = (r.net_rx_bps.unwrap_or(0.0), r.net_tx_bps.unwrap_or(0.0));
            if rx + tx > 0.0 {
                net_top.offer(entry(rx + tx, tx));
            }
        }
        if let Some(n) = self.net.as_mut() {
            n.top = net_top;
        }
    }

    /// Recomputes the alert level with other thresholds (a bar reading the daemon's
    /// model applies its own --warn and --crit).
    pub fn apply_thresholds(&mut self, t: &Thresholds) {
        let (level, alert) = self.alert_level(t);
        self.level = level;
        self.alert = alert;
    }

    fn update_procs(&mut self, prev: &RawSample, cur: &RawSample, dt: f64, opts: &ModelOptions) {
        self.procs.clear();
        self.top_cpu.clear();
        self.top_mem.clear();
        self.top_io.clear();
        self.blocked.clear();
        self.zombies.clear();
        self.blocked_procs = 0;
        self.zombie_procs = 0;
        self.process_count = cur.tasks.procs.len() as u64;
        self.task_count = cur.tasks.tasks;
        self.running_tasks = cur.tasks.running;
        self.blocked_tasks = cur.tasks.blocked;

        // The one rate engine (rates.rs): each process over the interval, with what its
        // reaped children used unseen (the daemon keeps no exit records).
        let mut rates = std::mem::take(&mut self.rates);
        crate::rates::process_rates(
            &prev.tasks.procs,
            &cur.tasks.procs,
            dt,
            crate::rates::Children::OnParent,
            &mut rates,
        );
        for (p, x) in cur.tasks.procs.iter().zip(&rates) {
            let r = ProcRate {
                pid: p.pid,
                comm: p.comm,
                state: p.state,
                kthread: p.kthread,
                blocked: p.is_blocked(),
                cpu_percent: x.cpu_percent,
                cpu_ns: p.cpu_ns,
                rss_bytes: p.rss_bytes,
                read_bps: x.read_bps,
                write_bps: x.write_bps,
                read_bytes: p.read_bytes,
                write_bytes: p.write_bytes,
                net_rx_bps: None,
                net_tx_bps: None,
                net_rx_bytes: None,
                net_tx_bytes: None,
                uid: p.uid,
                euid: p.euid,
                counters_hidden: false,
            };
            self.procs.push(r);

            let entry = |value: f64, extra: f64| TopEntry {
                pid: r.pid,
                comm: r.comm,
                value,
                extra,
            };
            if r.blocked {
                self.blocked_procs += 1;
                self.blocked.offer(entry(r.cpu_percent, 0.0));
            }
            if p.is_zombie() {
                self.zombie_procs += 1;
                self.zombies.offer(entry(0.0, 0.0));
            }
            if r.kthread && !opts.include_kthreads {
                continue;
            }
            if r.cpu_percent > 0.0 {
                self.top_cpu.offer(entry(r.cpu_percent, 0.0));
            }
            if r.rss_bytes > 0 {
                self.top_mem.offer(entry(r.rss_bytes as f64, 0.0));
            }
            if r.read_bps + r.write_bps > 0.0 {
                self.top_io
                    .offer(entry(r.read_bps + r.write_bps, r.write_bps));
            }
        }
        self.rates = rates;
    }

    /// Per-process network, joined to the processes by (pid, start time), and the links.
    fn update_net(&mut self, prev: &RawSample, cur: &RawSample, dt: f64, opts: &ModelOptions) {
        crate::net::link_rates(&prev.net.links, &cur.net.links, dt, &mut self.links);
        // Start times are the iterator's (ns) with BPF; procfs gives clock ticks, so
        // there a pid alone joins (a pid reused within one interval is the rare miss).
        let exact = cur.source == Source::Bpf;
        let tasks = &cur.tasks;
        let alive =
            |pid: u32, start: u64| tasks.get(pid).is_some_and(|p| !exact || p.start == start);
        self.net = crate::net::model(&prev.net, &cur.net, dt, alive);
        let Some(net) = self.net.as_mut() else {
            return;
        };
        for (p, r) in tasks.procs.iter().zip(self.procs.iter_mut()) {
            let found = if exact {
                cur.net.get(p.pid, p.start)
            } else {
                cur.net.procs.iter().find(|n| n.pid == p.pid)
            };
            let (rx, tx, rx_total, tx_total) = match found {
                Some(n) => {
                    let before = prev.net.get(n.pid, n.start_ns).map(|b| &b.counters);
                    let (rx, tx) = crate::net::proc_rates(&n.counters, before, dt);
                    (rx, tx, n.counters.rx(), n.counters.tx())
                }
                None => (0.0, 0.0, 0, 0),
            };
            r.net_rx_bps = Some(rx);
            r.net_tx_bps = Some(tx);
            r.net_rx_bytes = Some(rx_total);
            r.net_tx_bytes = Some(tx_total);
        }
        if !opts.include_kthreads {
            // Kernel threads out of the top list, as from the others (an NFS or
            // WireGuard worker sends on nobody's behalf).
            let mut kept = crate::top::Top::default();
            for e in net.top.as_slice() {
                let kthread = tasks.get(e.pid).is_some_and(|p| p.kthread);
                if !kthread {
                    kept.offer(*e);
                }
            }
            net.top = kept;
        }
    }

    fn alert_level(&self, t: &Thresholds) -> (Level, Alert) {
        let mut worst = (Level::Normal, Alert::Ok);
        let mut consider = |level: Level, name: Alert| {
            if level > worst.0 {
                worst = (level, name);
            }
        };
        consider(t.cpu.level(self.cpu_percent), Alert::Cpu);
        consider(t.mem.level(self.mem.used_percent), Alert::Mem);
        if let Some(temp) = self.hw.temp_c {
            consider(t.temp.level(temp as f64), Alert::Temp);
        }
        worst
    }
}

fn gpu_busy(prev: &RawSample, cur: &RawSample, dt: f64) -> Option<f64> {
    let g = cur.sys.hw.gpu.as_ref()?;
    if let Some(b) = g.busy_percent {
        return Some(b as f64);
    }
    let now = g.rc6_ms?;
    let before = prev.sys.hw.gpu.as_ref()?.rc6_ms?;
    if dt <= 0.0 {
        return None;
    }
    let idle_ms = now.saturating_sub(before) as f64;
    Some((100.0 - idle_ms / (dt * 1000.0) * 100.0).clamp(0.0, 100.0))
}

#[cfg(test)]
#[path = "model_tests.rs"]
mod tests;
