//! Making a frame from what the daemon sampled (its raw sample: the machine, groups,
//! links and network counters), a read of every process (the task iterator's rows, for
//! what a table shows) and the exit hook's records, with no I/O of its own: command
//! lines come from the caller (read once per process), so that this stays testable.
//!
//! What one user may add to a frame is bounded (shared/security N2: a user starting
//! processes with long random command lines grew the archive by ~565 MB an hour):
//! at most [`Bounds::new_per_user`] processes started since the frame before are listed
//! per user per frame, [`Bounds::new_cmd_bytes_per_user`] bytes of their command lines,
//! and [`Bounds::cmd_bytes_per_user`] bytes of all of a user's listed command lines;
//! past them, a process is counted in its user's summary for its whole life (so the
//! rates of the listed ones stay exact), and a command line is cut to the command name.

use std::collections::{HashMap, HashSet};

use kernstat_model::exits::ExitedProcess;
use kernstat_model::ps::TaskRow;
use kernstat_model::RawSample;

use crate::frame::{
    Core, Ended, Frame, Group, Hardware, Hists, Link, Machine, Memory, Proc, Psi, UserSummary,
};

/// What one user may add to a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    /// New processes listed per user per frame.
    pub new_per_user: usize,
    /// Command-line bytes of a user's new processes per frame.
    pub new_cmd_bytes_per_user: usize,
    /// Command-line bytes of all of a user's listed processes.
    pub cmd_bytes_per_user: usize,
    /// Ended processes listed per user per frame.
    pub ended_per_user: usize,
}

impl Default for Bounds {
    fn default() -> Self {
        Bounds {
            new_per_user: 64,
            new_cmd_bytes_per_user: 16 << 10,
            cmd_bytes_per_user: 1 << 20,
            ended_per_user: 256,
        }
    }
}

/// What the builder remembers of a process between frames.
#[derive(Clone, Debug)]
struct Known {
    uid: u32,
    cmd: String,
    /// Counted in its user's summary, not listed.
    summarised: bool,
    seen: u64,
}

/// Makes frames, remembering each process's command line and whether it is listed.
#[derive(Debug, Default)]
pub struct FrameBuilder {
    bounds: Bounds,
    known: HashMap<(u32, u64), Known>,
    /// Command-line bytes each user's listed processes hold.
    cmd_bytes: HashMap<u32, usize>,
    generation: u64,
    /// CLOCK_BOOTTIME of the previous frame (processes started after it are new).
    last_boot_ns: Option<u64>,
}

/// Everything one frame is made of.
pub struct Inputs<'a> {
    /// Wall-clock time, ns since the Unix epoch.
    pub time_unix_ns: u64,
    /// CLOCK_BOOTTIME of the process read.
    pub boot_ns: u64,
    /// The daemon's latest sample.
    pub raw: &'a RawSample,
    /// Every process, from the task iterator (or /proc), folded into processes.
    pub tasks: &'a [TaskRow],
    /// Processes that ended since the frame before (None: no exit hook).
    pub ended: Option<Vec<ExitedProcess>>,
    /// Exits the hook lost since the frame before.
    pub ended_lost: u64,
    /// Kernel histograms.
    pub hists: Hists,
}

impl FrameBuilder {
    /// A builder with these bounds.
    pub fn new(bounds: Bounds) -> Self {
        FrameBuilder {
            bounds,
            ..Default::default()
        }
    }

    /// The frame of `inputs`; `command_line` reads a process's command line (called
    /// once per process, when it is first listed).
    pub fn build(
        &mut self,
        inputs: Inputs<'_>,
        mut command_line: impl FnMut(&TaskRow) -> String,
    ) -> Frame {
        self.generation += 1;
        let generation = self.generation;
        let raw = inputs.raw;
        let net_of = |pid: u32| -> Option<[[u64; 4]; 2]> {
            raw.net.attribution?;
            // The network counters' start times are another clock than the rows': by
            // pid, the newest process of that pid.
            let n = raw.net.procs.iter().rfind(|n| n.pid == pid);
            Some(n.map_or([[0; 4]; 2], |n| [n.counters.rx_bytes, n.counters.tx_bytes]))
        };
        let cgroup_of: HashMap<u64, &str> = raw
            .cgroups
            .groups
            .iter()
            .map(|g| (g.id, g.path.as_str()))
            .collect();
        let mut summaries: HashMap<u32, UserSummary> = HashMap::new();
        let mut new_count: HashMap<u32, usize> = HashMap::new();
        let mut new_bytes: HashMap<u32, usize> = HashMap::new();
        let mut procs = Vec::with_capacity(inputs.tasks.len());
        for t in inputs.tasks {
            let key = (t.pid, t.start_ns);
            let is_new = self.last_boot_ns.is_some_and(|b| t.start_ns > b);
            if !self.known.contains_key(&key) {
                let n = new_count.entry(t.uid).or_default();
                let admitted = !is_new || *n < self.bounds.new_per_user;
                if is_new {
                    *n += 1;
                }
                let mut cmd = if admitted {
                    command_line(t)
                } else {
                    String::new()
                };
                if admitted {
                    let held = self.cmd_bytes.entry(t.uid).or_default();
                    let fresh = new_bytes.entry(t.uid).or_default();
                    let over_new =
                        is_new && *fresh + cmd.len() > self.bounds.new_cmd_bytes_per_user;
                    let over_all = *held + cmd.len() > self.bounds.cmd_bytes_per_user;
                    if over_new || over_all {
                        summaries
                            .entry(t.uid)
                            .or_insert_with(|| UserSummary {
                                uid: t.uid,
                                ..Default::default()
                            })
                            .cmd_bytes_cut += cmd.len() as u64;
                        cmd = String::new();
                    }
                    *held += cmd.len();
                    if is_new {
                        *fresh += cmd.len();
                    }
                }
                self.known.insert(
                    key,
                    Known {
                        uid: t.uid,
                        cmd,
                        summarised: !admitted,
                        seen: generation,
                    },
                );
            }
            let k = self.known.get_mut(&key).expect("inserted above");
            k.seen = generation;
            if k.summarised {
                let s = summaries.entry(t.uid).or_insert_with(|| UserSummary {
                    uid: t.uid,
                    ..Default::default()
                });
                s.processes += 1;
                s.cpu_ns += t.cpu_ns;
                s.rss_bytes += t.rss_bytes;
                continue;
            }
            let cmd = if k.cmd.is_empty() {
                if t.kthread {
                    format!("[{}]", t.comm.as_str())
                } else {
                    t.comm.as_str().to_string()
                }
            } else {
                k.cmd.clone()
            };
            procs.push(Proc {
                pid: t.pid,
                ppid: t.ppid,
                uid: t.uid,
                euid: t.euid,
                gid: t.gid,
                start_ns: t.start_ns,
                state: t.state,
                kthread: t.kthread,
                threads: t.threads,
                nice: t.nice,
                prio: t.prio,
                cpu_ns: t.cpu_ns,
                run_delay_ns: t.run_delay_ns,
                children_cpu_ns: t.reaped_children_cpu_ns,
                read_bytes: t.read_bytes,
                write_bytes: t.write_bytes,
                rss_bytes: t.rss_bytes,
                vsz_bytes: t.vsz_bytes,
                minflt: 0,
                majflt: 0,
                net: net_of(t.pid),
                comm: t.comm.as_str().to_string(),
                cmd,
                cgroup: t
                    .cgroup_path
                    .clone()
                    .or_else(|| cgroup_of.get(&t.cgroup_id).map(|p| p.to_string()))
                    .unwrap_or_default(),
            });
        }
        procs.sort_by_key(|p| (p.pid, p.start_ns));
        // Ended: their command lines as listed, bounded per user.
        let mut ended = Vec::new();
        let exits_hook = inputs.ended.is_some();
        let mut ended_count: HashMap<u32, usize> = HashMap::new();
        for e in inputs.ended.unwrap_or_default() {
            let known = self.known.remove(&(e.pid, e.start_ns));
            let n = ended_count.entry(e.uid).or_default();
            *n += 1;
            let summarised =
                known.as_ref().is_some_and(|k| k.summarised) || *n > self.bounds.ended_per_user;
            if let Some(k) = &known {
                if let Some(h) = self.cmd_bytes.get_mut(&k.uid) {
                    *h = h.saturating_sub(k.cmd.len());
                }
            }
            if summarised {
                let s = summaries.entry(e.uid).or_insert_with(|| UserSummary {
                    uid: e.uid,
                    ..Default::default()
                });
                s.ended += 1;
                s.cpu_ns += e.cpu_ns;
                continue;
            }
            // A process no frame saw alive is matched with nothing by its start time:
            // its start and exit are kept to the millisecond (what people read; it
            // halves what a frame of short-lived processes takes, crate::delta).
            let ms = |ns: u64| {
                if known.is_some() {
                    ns
                } else {
                    ns / 1_000_000 * 1_000_000
                }
            };
            let (start_ns, exit_ns) = (ms(e.start_ns), ms(e.exit_ns));
            let cmd = known.map(|k| k.cmd).unwrap_or_default();
            let net = net_of(e.pid);
            ended.push(Ended {
                pid: e.pid,
                ppid: e.ppid,
                uid: e.uid,
                start_ns,
                exit_ns,
                cpu_ns: e.cpu_ns,
                read_bytes: e.read_bytes,
                write_bytes: e.write_bytes,
                maxrss_bytes: e.maxrss_bytes,
                exit_code: e.exit_code,
                net,
                comm: e.comm,
                cmd,
                cgroup: String::new(),
            });
        }
        // Processes gone without an exit record (no hook, or lost): forgotten, their
        // command-line bytes given back.
        let cmd_bytes = &mut self.cmd_bytes;
        self.known.retain(|_, k| {
            let keep = k.seen == generation;
            if !keep {
                if let Some(h) = cmd_bytes.get_mut(&k.uid) {
                    *h = h.saturating_sub(k.cmd.len());
                }
            }
            keep
        });
        self.last_boot_ns = Some(inputs.boot_ns);
        let mut summaries: Vec<UserSummary> = summaries.into_values().collect();
        summaries.sort_by_key(|s| s.uid);
        Frame {
            time_unix_ns: inputs.time_unix_ns,
            boot_ns: inputs.boot_ns,
            machine: machine(raw),
            procs,
            ended,
            ended_lost: inputs.ended_lost,
            exits_hook,
            summaries,
            groups: raw.cgroups.groups.iter().map(group).collect(),
            groups_mount: raw.cgroups.mount.clone(),
            groups_layout: raw.cgroups.layout.clone(),
            links: raw
                .net
                .links
                .iter()
                .map(|l| Link {
                    name: l.name.as_str().to_string(),
                    is_default: l.is_default,
                    rx: [l.rx_bytes, l.rx_packets, l.rx_errors, l.rx_dropped],
                    tx: [l.tx_bytes, l.tx_packets, l.tx_errors, l.tx_dropped],
                })
                .collect(),
            disks: raw
                .kernel
                .disks
                .iter()
                .map(|d| crate::frame::Disk {
                    name: d.name.clone(),
                    major: d.major,
                    minor: d.minor,
                    reads: d.reads,
                    writes: d.writes,
                    read_sectors: d.read_sectors,
                    write_sectors: d.write_sectors,
                    read_ms: d.read_ms,
                    write_ms: d.write_ms,
                    io_ms: d.io_ms,
                    queue_ms: d.queue_ms,
                    in_flight: d.in_flight,
                })
                .collect(),
            hists: inputs.hists,
            tcp: raw.tcp.present,
            retransmits: retransmits_of(&raw.tcp.retransmits),
            events: Vec::new(),
            v1_cpu_percent: None,
            omitted: None,
        }
    }
}

/// Retransmits as a frame keeps them: per process and peer, the 64 largest, largest
/// first.
pub fn retransmits_of(
    list: &[kernstat_model::tcp::SocketRetrans],
) -> Vec<crate::frame::Retransmit> {
    let mut by: std::collections::BTreeMap<(u32, String), crate::frame::Retransmit> =
        std::collections::BTreeMap::new();
    for s in list {
        let peer = format!("{}:{}", s.remote.0, s.remote.1);
        let e = by
            .entry((s.pid, peer.clone()))
            .or_insert_with(|| crate::frame::Retransmit {
                pid: s.pid,
                comm: s.comm.clone(),
                cgroup: s.cgroup.clone(),
                peer,
                count: 0,
            });
        e.count += s.count;
    }
    let mut v: Vec<crate::frame::Retransmit> = by.into_values().collect();
    v.sort_by_key(|r| std::cmp::Reverse(r.count));
    v.truncate(64);
    v
}

fn psi(l: &Option<kernstat_model::PsiLine>) -> Option<Psi> {
    l.map(|l| Psi {
        avg10: l.avg10,
        avg60: l.avg60,
        total_us: l.total_us,
    })
}

/// The machine's part of a raw sample.
pub fn machine(raw: &RawSample) -> Machine {
    let s = &raw.sys;
    Machine {
        mono_ns: s.taken_ns,
        ncpus: s.ncpus,
        procfs: raw.source == kernstat_model::Source::Procfs,
        busy_ns: s.busy_ns,
        cores: s
            .cores
            .iter()
            .map(|c| Core {
                busy_ns: c.busy_ns,
                total_ns: c.total_ns,
                ..Core::default()
            })
            .collect(),
        mem: Memory {
            total: s.mem.total,
            available: s.mem.available,
            free: s.mem.free,
            swap_total: s.mem.swap_total,
            swap_free: s.mem.swap_free,
            from_cgroup: s.mem.total_source == kernstat_model::raw::MemTotalSource::Cgroup,
        },
        swap_in_pages: s.swap_in_pages,
        swap_out_pages: s.swap_out_pages,
        page_size: s.page_size,
        load: s.load,
        psi: [
            psi(&s.psi.cpu_some),
            psi(&s.psi.memory_some),
            psi(&s.psi.memory_full),
            psi(&s.psi.io_some),
            psi(&s.psi.io_full),
        ],
        tasks: raw.tasks.tasks,
        running: raw.tasks.running,
        blocked: raw.tasks.blocked,
        socket_bytes: None,
        counters: raw.kernel.read,
        softirqs: raw.kernel.softirqs,
        vm: crate::frame::Vm {
            pgfault: raw.kernel.pgfault,
            pgmajfault: raw.kernel.pgmajfault,
            pgscan: raw.kernel.pgscan,
            pgsteal: raw.kernel.pgsteal,
            pgscan_direct: raw.kernel.pgscan_direct,
            oom_kill: raw.kernel.oom_kill,
        },
        tcp: crate::frame::Tcp {
            out_segs: raw.kernel.tcp_out_segs,
            retrans_segs: raw.kernel.tcp_retrans_segs,
            active_opens: raw.kernel.tcp_active_opens,
            attempt_fails: raw.kernel.tcp_attempt_fails,
        },
        hw: Hardware {
            temp_c: s.hw.temp_c,
            cpu_freq_mhz: s.hw.cpu_freq_mhz,
            gpu_busy_percent: s.hw.gpu.and_then(|g| g.busy_percent),
            gpu_rc6_ms: s.hw.gpu.and_then(|g| g.rc6_ms),
            battery_percent: s.hw.battery.map(|b| b.percent),
            battery_power_w: s.hw.battery.and_then(|b| b.power_w),
        },
    }
}

fn group(g: &kernstat_model::cgroup::CgroupSample) -> Group {
    let pair = |p: &kernstat_model::cgroup::Pressure| [psi(&p.some), psi(&p.full)];
    let [cs, cf] = pair(&g.psi_cpu);
    let [ms, mf] = pair(&g.psi_memory);
    let [is, ifull] = pair(&g.psi_io);
    Group {
        path: g.path.clone(),
        id: g.id,
        depth: g.depth,
        read_ns: g.read_ns,
        cpu_usage_us: g.cpu.usage_us,
        cpu_user_us: g.cpu.user_us,
        cpu_system_us: g.cpu.system_us,
        periods: g.cpu.periods,
        throttled_periods: g.cpu.throttled_periods,
        throttled_us: g.cpu.throttled_us,
        cpu_max_us: g.cpu.max_us,
        cpu_period_us: g.cpu.period_us,
        cpu_weight: g.cpu.weight,
        mem_current: g.memory.map(|m| m.current),
        mem_max: g.memory.and_then(|m| m.max),
        mem_high: g.memory.and_then(|m| m.high),
        mem_oom: g.memory.map_or(0, |m| m.oom),
        mem_oom_kill: g.memory.map_or(0, |m| m.oom_kill),
        mem_high_events: g.memory.map_or(0, |m| m.high_events),
        io: g.io.as_ref().map(|v| {
            v.iter()
                .map(|d| crate::frame::GroupIo {
                    major: d.major,
                    minor: d.minor,
                    rbytes: d.rbytes,
                    wbytes: d.wbytes,
                    rios: d.rios,
                    wios: d.wios,
                })
                .collect()
        }),
        pids: g.pids,
        pids_max: g.pids_max,
        psi: [cs, cf, ms, mf, is, ifull],
        truncated: g.truncated,
    }
}

impl FrameBuilder {
    /// Processes remembered (listed or summarised) now.
    pub fn remembered(&self) -> usize {
        self.known.len()
    }

    /// The processes listed (not summarised), by (pid, start).
    pub fn listed(&self) -> HashSet<(u32, u64)> {
        self.known
            .iter()
            .filter(|(_, k)| !k.summarised)
            .map(|(k, _)| *k)
            .collect()
    }
}
