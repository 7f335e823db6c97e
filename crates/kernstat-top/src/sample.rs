//! One refresh of `kernstat top`: the process table (BPF iterator or procfs, through
//! tasks.rs) turned into rates over the interval, and the header's machine figures.
//!
//! Rates are kernstat-model's rate engine's over the interval between this read and the
//! one before (the same rules as `ps --interval`, the daemon and every replay, so the
//! same interval reads the same in all of them): a process is its pid and start time; its
//! CPU time includes its threads that exited (the iterator reads the kernel's
//! `signal->sum_sched_runtime`). With the exit hook loaded (BPF), a process that ended in
//! the interval is a row of its own in state X, with what it used in the interval;
//! without it, what reaped children used unseen counts on their parent.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use kernstat_bpf::exits::Exits;
use kernstat_bpf::net::Net;
use kernstat_model::net::{link_rates, proc_rates, LinkRate, NetModel, NetSample};
use kernstat_model::ps::TaskRow;
use kernstat_model::rates::{Children, Rates};
use kernstat_model::{Comm, CoreTimes, Hardware, MemInfo, Psi, SystemSample};
use kernstat_sources::cgroup::CgroupPaths;
use kernstat_sources::users::UserNames;
use kernstat_sources::{
    HardwareReader, LinkReader, ProcfsPs, Roots, SystemReader, TempSource, Want,
};

use crate::view::Proc;
use kernstat_collect::events::OomWatcher;
use kernstat_collect::tasks::{self, TaskSource};

/// The header's figures for one interval.
#[derive(Clone, Debug, Default)]
pub struct Machine {
    /// Busy percent of each core over the interval.
    pub core_busy: Vec<f64>,
    /// Memory and swap.
    pub mem: MemInfo,
    /// 1, 5, 15 minute load.
    pub load: [f64; 3],
    /// Pressure stall information.
    pub psi: Psi,
    /// Temperature, frequency, GPU, battery where present.
    pub hw: Hardware,
    /// Runnable tasks (procs_running).
    pub running: u64,
    /// Tasks seen in the table read.
    pub tasks: usize,
    /// Where processes come from: "bpf-iter", "bpf-pin" or "procfs".
    pub source: &'static str,
    /// Every network interface over the interval, the default route's first.
    pub links: Vec<LinkRate>,
    /// All processes' socket bytes over the interval, its `top` empty (None: not
    /// counted here).
    pub net: Option<NetModel>,
    /// Why per-process network is not counted.
    pub net_unavailable: Option<String>,
    /// The last OOM kill while top runs, and how long ago, for [`OOM_SHOWN`] after it
    /// (as atop keeps `oomkills` coloured).
    pub oom: Option<(Duration, String)>,
}

/// How long the header keeps the last OOM kill.
pub const OOM_SHOWN: Duration = Duration::from_secs(15 * 60);

/// A task's names, shared with the rows (Rc: a refresh allocates nothing per process for
/// them). The command line is read from /proc/PID/cmdline once per task, and again after
/// an exec (the comm changes).
struct Known {
    comm: Rc<str>,
    cmd: Rc<str>,
    seen: u64,
}

/// Reads everything a refresh shows.
pub struct Sampler {
    source: TaskSource,
    extra: Option<ProcfsPs>,
    system: SystemReader,
    hardware: HardwareReader,
    sys: SystemSample,
    prev_cores: Vec<CoreTimes>,
    /// The names of each task (per (id, start time)) between refreshes.
    known: HashMap<(u32, u64), Known>,
    /// Refreshes so far: entries not seen in the latest are dropped.
    generation: u64,
    at: Option<Instant>,
    users: UserNames,
    cgroups: Option<CgroupPaths>,
    /// The previous read (the start of the interval) and whether it was of threads.
    prev: Vec<TaskRow>,
    prev_threads: bool,
    rates: Vec<Rates>,
    /// The exit hook (BPF): processes that ended in the interval as rows of their own.
    exits: Option<Exits>,
    ended_rates: Vec<Rates>,
    /// User names by uid, shared with the rows.
    user_names: HashMap<u32, Rc<str>>,
    links: Option<LinkReader>,
    net: Option<Net>,
    net_unavailable: Option<String>,
    /// Network counters at the previous and this refresh.
    net_prev: NetSample,
    net_cur: NetSample,
    link_rates: Vec<LinkRate>,
    /// OOM kills (`oom:mark_victim`), and the last one seen.
    oom: Option<OomWatcher>,
    last_oom: Option<(Instant, String)>,
}

impl Sampler {
    /// Opens the sources: BPF unless `no_bpf`, a pin under `pin_dir` when one exists.
    pub fn open(
        no_bpf: bool,
        pin_dir: &std::path::Path,
        temp: &TempSource,
    ) -> anyhow::Result<Self> {
        let roots = Roots::default();
        let (net, net_unavailable) = if no_bpf {
            (None, Some("--no-bpf".to_string()))
        } else {
            match Net::load(false) {
                Ok(n) => (Some(n), None),
                Err(e) => (None, Some(e.summary())),
            }
        };
        Ok(Sampler {
            // The iterator without command lines: copying every process's argv out of
            // its memory is three quarters of the sleepable iterator's time (3.3 µs a
            // task; 33 of 45 ms per refresh at 10,000 processes, `bench.sh top`); a new
            // process's line is read from /proc once instead.
            source: TaskSource::open_repeated(no_bpf, pin_dir, false)?,
            extra: None,
            system: SystemReader::open(&roots)?,
            hardware: HardwareReader::discover(&roots, temp),
            sys: SystemSample::default(),
            prev_cores: Vec::new(),
            known: HashMap::new(),
            generation: 0,
            at: None,
            users: UserNames::default(),
            cgroups: None,
            user_names: HashMap::new(),
            prev: Vec::new(),
            prev_threads: false,
            rates: Vec::new(),
            // Without the hook a process that lived between two refreshes is never a
            // row; its CPU shows on the parent that reaped it (the engine's rule).
            exits: if no_bpf { None } else { Exits::load().ok() },
            ended_rates: Vec::new(),
            links: LinkReader::open(&roots),
            net,
            net_unavailable,
            net_prev: NetSample::default(),
            net_cur: NetSample::default(),
            link_rates: Vec::new(),
            oom: if no_bpf {
                None
            } else {
                OomWatcher::open().ok()
            },
            last_oom: None,
        })
    }

    /// Reads one refresh into `procs` (cleared first) and returns the header's figures.
    /// `threads`: one row per thread. `cgroups`: fill in cgroup paths (for the filter).
    pub fn refresh(
        &mut self,
        procs: &mut Vec<Proc>,
        threads: bool,
        cgroups: bool,
    ) -> anyhow::Result<Machine> {
        let now = Instant::now();
        let want = Want {
            cmdline: false,
            cgroup: cgroups,
        };
        let tasks = self.source.read(threads, want, &mut self.extra)?;
        self.read_net(&tasks);
        if let Some(w) = self.oom.as_mut() {
            w.remember(
                tasks
                    .iter()
                    .filter(|t| !t.kthread)
                    .map(|t| (t.pid, Comm::from_str_lossy(t.comm.as_str()), t.rss_bytes)),
            );
            if let Some(e) = w.poll().pop() {
                self.last_oom = Some((now, e.line()));
            }
        }
        let dt_s = self
            .at
            .map(|t| now.duration_since(t).as_secs_f64())
            .unwrap_or(0.0);
        self.at = Some(now);
        if cgroups && self.cgroups.is_none() {
            self.cgroups = Some(CgroupPaths::scan(&Roots::default()));
        }
        procs.clear();
        procs.reserve(tasks.len());
        self.generation += 1;
        // Grown once, before the walk (not doubled and re-hashed midway).
        self.known
            .reserve(tasks.len().saturating_sub(self.known.len()));
        if threads != self.prev_threads {
            self.prev.clear();
        }
        let children = if self.exits.is_some() {
            Children::OwnRows
        } else {
            Children::OnParent
        };
        kernstat_model::ps::row_rates(&self.prev, &tasks, threads, dt_s, children, &mut self.rates);
        let rates = std::mem::take(&mut self.rates);
        for (t, r) in tasks.iter().zip(&rates) {
            let mut p = self.proc_of(t, threads, r, cgroups);
            if self.net.is_some() && !threads {
                (p.net_rx_bps, p.net_tx_bps) = self.net_rates(t.pid, dt_s);
            }
            procs.push(p);
        }
        self.rates = rates;
        if !threads {
            self.add_ended(procs, &tasks, dt_s);
        }
        let generation = self.generation;
        self.known.retain(|_, k| k.seen == generation);
        self.prev = tasks;
        self.prev_threads = threads;
        let totals = self.system.read(&mut self.sys)?;
        self.hardware.read(&mut self.sys.hw);
        let core_busy = self
            .sys
            .cores
            .iter()
            .zip(
                self.prev_cores
                    .iter()
                    .chain(std::iter::repeat(&CoreTimes::default())),
            )
            .map(|(now, was)| {
                let total = now.total_ns.saturating_sub(was.total_ns);
                let busy = now.busy_ns.saturating_sub(was.busy_ns);
                if total == 0 {
                    0.0
                } else {
                    (busy as f64 / total as f64 * 100.0).min(100.0)
                }
            })
            .collect();
        self.prev_cores.clone_from(&self.sys.cores);
        Ok(Machine {
            core_busy,
            mem: self.sys.mem,
            load: self.sys.load,
            psi: self.sys.psi,
            hw: self.sys.hw,
            running: totals.running,
            tasks: self.prev.len(),
            source: self.source.name(),
            links: self.link_rates.clone(),
            net: self.net_total(dt_s),
            net_unavailable: self.net_unavailable.clone(),
            oom: self
                .last_oom
                .as_ref()
                .map(|(t, line)| (now.duration_since(*t), line.clone()))
                .filter(|(ago, _)| *ago < OOM_SHOWN),
        })
    }

    /// Reads the links and the per-process counters; forgets the counters of processes
    /// not in `tasks` (by pid: the rows' start times are another clock than the hooks').
    fn read_net(&mut self, tasks: &[TaskRow]) {
        std::mem::swap(&mut self.net_prev, &mut self.net_cur);
        self.net_cur.clear();
        if let Some(l) = &mut self.links {
            if l.read(&mut self.net_cur.links).is_err() {
                self.net_cur.links.clear();
            }
        }
        let dt = self.at.map_or(0.0, |t| t.elapsed().as_secs_f64());
        link_rates(
            &self.net_prev.links,
            &self.net_cur.links,
            dt,
            &mut self.link_rates,
        );
        if let Some(net) = &mut self.net {
            let mut pids: Vec<u32> = tasks.iter().map(|t| t.pid).collect();
            pids.sort_unstable();
            if net
                .read(&mut self.net_cur, |pid, _| pids.binary_search(&pid).is_ok())
                .is_err()
            {
                self.net_cur.procs.clear();
            }
        }
    }

    /// (received, sent) bytes per second of process `pid` over the interval: its newest
    /// counters (a pid reused within the interval is the later process).
    fn net_rates(&self, pid: u32, dt_s: f64) -> (Option<f64>, Option<f64>) {
        let i = self.net_cur.procs.partition_point(|p| p.pid <= pid);
        let (rx, tx) = match i.checked_sub(1).map(|i| &self.net_cur.procs[i]) {
            Some(p) if p.pid == pid && dt_s > 0.0 => {
                let before = self.net_prev.get(p.pid, p.start_ns).map(|b| &b.counters);
                proc_rates(&p.counters, before, dt_s)
            }
            _ => (0.0, 0.0),
        };
        (Some(rx), Some(tx))
    }

    /// Every process's socket bytes per second, including those that exited.
    fn net_total(&self, dt_s: f64) -> Option<NetModel> {
        self.net.as_ref()?;
        let m = kernstat_model::net::model(&self.net_prev, &self.net_cur, dt_s, |_, _| true)?;
        Some(NetModel {
            top: Default::default(),
            ..m
        })
    }

    /// Rows for the processes that ended in the interval (the exit hook's), each with
    /// what it used in the interval, in state X.
    fn add_ended(&mut self, procs: &mut Vec<Proc>, tasks: &[TaskRow], dt_s: f64) {
        let Some(exits) = self.exits.as_mut() else {
            return;
        };
        let ended = exits.drain().unwrap_or_default();
        if ended.is_empty() {
            return;
        }
        kernstat_model::rates::ended_rates(&self.prev, &ended, dt_s, &mut self.ended_rates);
        for (e, r) in ended.iter().zip(&self.ended_rates) {
            // Its names when a refresh saw it alive; else its parent's command line when
            // it is a fork of it (kernstat-model's rule).
            let (comm, cmd) = match self.known.get(&(e.pid, e.start_ns)) {
                Some(k) => (k.comm.clone(), k.cmd.clone()),
                None => {
                    let i = tasks.partition_point(|t| t.pid < e.ppid);
                    let parent = tasks
                        .get(i)
                        .filter(|t| t.pid == e.ppid)
                        .and_then(|t| self.known.get(&(t.pid, t.start_ns)));
                    let cmd = kernstat_model::exits::ended_command(
                        &e.comm,
                        None,
                        parent.map(|k| (&*k.comm, &*k.cmd)),
                    );
                    (Rc::from(e.comm.as_str()), Rc::from(cmd))
                }
            };
            let users = &mut self.users;
            let user = self
                .user_names
                .entry(e.uid)
                .or_insert_with(|| Rc::from(users.name(e.uid)))
                .clone();
            procs.push(Proc {
                pid: e.pid,
                tgid: e.pid,
                ppid: e.ppid,
                uid: e.uid,
                user,
                state: 'X',
                threads: 0,
                nice: 0,
                prio: 0,
                cpu_percent: r.cpu_percent,
                cpu_ns: e.cpu_ns,
                rss_bytes: e.maxrss_bytes,
                read_bps: r.read_bps,
                write_bps: r.write_bps,
                comm,
                cmd,
                cgroup: String::new(),
                kthread: false,
                runq_p99_us: None,
                write_calls_per_s: None,
                small_write_share: None,
                net_rx_bps: None,
                net_tx_bps: None,
                tcp_retrans_per_s: None,
            });
        }
    }

    fn proc_of(&mut self, t: &TaskRow, threads: bool, r: &Rates, cgroups: bool) -> Proc {
        let id = if threads { t.tid } else { t.pid };
        let key = (id, t.start_ns);
        let generation = self.generation;
        let known = self.known.entry(key).or_insert_with(|| Known {
            comm: Rc::from(t.comm.as_str()),
            cmd: Rc::from(tasks::read_command_line(t)),
            seen: generation,
        });
        if &*known.comm != t.comm.as_str() {
            // An exec: a new command line under the same pid and start time.
            known.comm = Rc::from(t.comm.as_str());
            known.cmd = Rc::from(tasks::read_command_line(t));
        }
        known.seen = generation;
        let (comm, cmd) = (known.comm.clone(), known.cmd.clone());
        let users = &mut self.users;
        let user = self
            .user_names
            .entry(t.uid)
            .or_insert_with(|| Rc::from(users.name(t.uid)))
            .clone();
        let cgroup = match (&t.cgroup_path, &self.cgroups) {
            (Some(p), _) => p.clone(),
            (None, Some(c)) if cgroups => c.path(t.cgroup_id),
            _ => String::new(),
        };
        Proc {
            pid: id,
            tgid: t.pid,
            ppid: t.ppid,
            uid: t.uid,
            user,
            state: t.state as char,
            threads: t.threads,
            nice: t.nice,
            prio: t.prio,
            cpu_percent: r.cpu_percent,
            cpu_ns: t.cpu_ns,
            rss_bytes: t.rss_bytes,
            read_bps: r.read_bps,
            write_bps: r.write_bps,
            comm,
            cmd,
            cgroup,
            kthread: t.kthread,
            runq_p99_us: None,
            write_calls_per_s: None,
            small_write_share: None,
            net_rx_bps: None,
            net_tx_bps: None,
            tcp_retrans_per_s: None,
        }
    }

    /// Forgets the previous counters (after switching threads on or off: rows change
    /// meaning).
    pub fn reset_rates(&mut self) {
        self.known.clear();
        self.prev.clear();
        self.at = None;
    }
}
