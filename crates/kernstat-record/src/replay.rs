//! A recorded moment shown as the live views show the machine: a frame back as a raw
//! sample (so that kernstat-model's `Model::update` over the frame before and this one
//! gives the machine's figures over the interval between them, as live), and every
//! process as a table row with its rates over that interval from the one rate engine,
//! with the processes that ended in it as rows of their own (state X). No I/O: user
//! names are the caller's.

use kernstat_model::cgroup::{
    CgroupCpu, CgroupMemory, CgroupSample, CgroupTree, IoDevice, Pressure,
};
use kernstat_model::net::{Attribution, LinkSample, NetCounters, NetProcSample, NetSample};
use kernstat_model::ps::PsRow;
use kernstat_model::rates::{self, Children, Rates};
use kernstat_model::raw::{
    BatterySample, CoreTimes, GpuSample, MemInfo, MemTotalSource, ProcSample, PsiLine, TaskName,
};
use kernstat_model::{Comm, RawSample, Source, SystemSample, TaskTable};

use crate::frame::{Frame, Group, Psi};

fn line(p: &Option<Psi>) -> Option<PsiLine> {
    p.map(|p| PsiLine {
        avg10: p.avg10,
        avg60: p.avg60,
        total_us: p.total_us,
    })
}

/// The frame as a raw sample: what a collector would have read at that moment.
pub fn raw_sample(f: &Frame) -> RawSample {
    let m = &f.machine;
    let mut tasks = TaskTable {
        procs: f
            .procs
            .iter()
            .map(|p| ProcSample {
                pid: p.pid,
                start: p.start_ns,
                cpu_ns: p.cpu_ns,
                read_bytes: p.read_bytes,
                write_bytes: p.write_bytes,
                rss_bytes: p.rss_bytes,
                state: p.state,
                has_d_thread: false,
                kthread: p.kthread,
                comm: Comm::from_str_lossy(&p.comm),
                uid: p.uid,
                euid: p.euid,
                ppid: p.ppid,
                children_cpu_ns: p.children_cpu_ns,
                run_delay_ns: p.run_delay_ns,
            })
            .collect(),
        tasks: m.tasks,
        running: m.running,
        blocked: m.blocked,
    };
    tasks.finish();
    let counted = f.procs.iter().any(|p| p.net.is_some());
    let net = NetSample {
        attribution: counted.then_some(Attribution::Caller),
        procs: f
            .procs
            .iter()
            .filter_map(|p| {
                let n = p.net?;
                Some(NetProcSample {
                    pid: p.pid,
                    start_ns: p.start_ns,
                    comm: Comm::from_str_lossy(&p.comm),
                    uid: p.uid,
                    counters: NetCounters {
                        rx_bytes: n[0],
                        tx_bytes: n[1],
                        ..NetCounters::default()
                    },
                })
            })
            .collect(),
        crowded: Vec::new(),
        lost: 0,
        links: f
            .links
            .iter()
            .map(|l| LinkSample {
                name: kernstat_model::ShortStr::from_str_lossy(&l.name),
                is_default: l.is_default,
                rx_bytes: l.rx[0],
                rx_packets: l.rx[1],
                rx_errors: l.rx[2],
                rx_dropped: l.rx[3],
                tx_bytes: l.tx[0],
                tx_packets: l.tx[1],
                tx_errors: l.tx[2],
                tx_dropped: l.tx[3],
            })
            .collect(),
    };
    RawSample {
        source: if m.procfs {
            Source::Procfs
        } else {
            Source::Bpf
        },
        sys: SystemSample {
            taken_ns: m.mono_ns,
            busy_ns: m.busy_ns,
            ncpus: m.ncpus,
            cores: m
                .cores
                .iter()
                .map(|c| CoreTimes {
                    busy_ns: c.busy_ns,
                    total_ns: c.total_ns,
                })
                .collect(),
            mem: MemInfo {
                total: m.mem.total,
                available: m.mem.available,
                free: m.mem.free,
                swap_total: m.mem.swap_total,
                swap_free: m.mem.swap_free,
                total_source: if m.mem.from_cgroup {
                    MemTotalSource::Cgroup
                } else {
                    MemTotalSource::Machine
                },
            },
            page_size: m.page_size,
            swap_in_pages: m.swap_in_pages,
            swap_out_pages: m.swap_out_pages,
            load: m.load,
            psi: kernstat_model::Psi {
                cpu_some: line(&m.psi[0]),
                memory_some: line(&m.psi[1]),
                memory_full: line(&m.psi[2]),
                io_some: line(&m.psi[3]),
                io_full: line(&m.psi[4]),
            },
            hw: kernstat_model::Hardware {
                temp_c: m.hw.temp_c,
                cpu_freq_mhz: m.hw.cpu_freq_mhz,
                gpu: (m.hw.gpu_busy_percent.is_some() || m.hw.gpu_rc6_ms.is_some()).then(|| {
                    GpuSample {
                        busy_percent: m.hw.gpu_busy_percent,
                        rc6_ms: m.hw.gpu_rc6_ms,
                        ..GpuSample::default()
                    }
                }),
                battery: m.hw.battery_percent.map(|percent| BatterySample {
                    percent,
                    power_w: m.hw.battery_power_w,
                    ..BatterySample::default()
                }),
                ..kernstat_model::Hardware::default()
            },
        },
        tasks,
        net,
        cgroups: CgroupTree {
            mount: f.groups_mount.clone(),
            layout: f.groups_layout.clone(),
            taken_ns: m.mono_ns,
            groups: f.groups.iter().map(group_sample).collect(),
        },
        tcp: kernstat_model::tcp::TcpSample {
            present: f.tcp,
            retransmits: f
                .retransmits
                .iter()
                .map(|r| {
                    let (ip, port) = r.peer.rsplit_once(':').unwrap_or((&r.peer, "0"));
                    let unspecified = std::net::IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED);
                    kernstat_model::tcp::SocketRetrans {
                        count: r.count,
                        pid: r.pid,
                        comm: r.comm.clone(),
                        cgroup_id: 0,
                        cgroup: r.cgroup.clone(),
                        local: (unspecified, 0),
                        remote: (
                            ip.trim_matches(['[', ']']).parse().unwrap_or(unspecified),
                            port.parse().unwrap_or(0),
                        ),
                        ino: 0,
                    }
                })
                .collect(),
            connect: f
                .hists
                .connect_us
                .as_deref()
                .map(kernstat_model::hist::Hist::from_slots)
                .unwrap_or_default(),
        },
        kernel: kernstat_model::counters::KernelCounters {
            read: m.counters,
            softirqs: m.softirqs,
            pgfault: m.vm.pgfault,
            pgmajfault: m.vm.pgmajfault,
            pgscan: m.vm.pgscan,
            pgsteal: m.vm.pgsteal,
            pgscan_direct: m.vm.pgscan_direct,
            oom_kill: m.vm.oom_kill,
            tcp_out_segs: m.tcp.out_segs,
            tcp_retrans_segs: m.tcp.retrans_segs,
            tcp_active_opens: m.tcp.active_opens,
            tcp_attempt_fails: m.tcp.attempt_fails,
            disks: f
                .disks
                .iter()
                .map(|d| kernstat_model::counters::DiskStat {
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
        },
    }
}

fn group_sample(g: &Group) -> CgroupSample {
    CgroupSample {
        path: g.path.clone(),
        id: g.id,
        depth: g.depth,
        read_ns: g.read_ns,
        cpu: CgroupCpu {
            usage_us: g.cpu_usage_us,
            user_us: g.cpu_user_us,
            system_us: g.cpu_system_us,
            periods: g.periods,
            throttled_periods: g.throttled_periods,
            throttled_us: g.throttled_us,
            max_us: g.cpu_max_us,
            period_us: g.cpu_period_us,
            weight: g.cpu_weight,
        },
        memory: g.mem_current.map(|current| CgroupMemory {
            current,
            max: g.mem_max,
            high: g.mem_high,
            oom: g.mem_oom,
            oom_kill: g.mem_oom_kill,
            high_events: g.mem_high_events,
            ..CgroupMemory::default()
        }),
        io: g.io.as_ref().map(|v| {
            v.iter()
                .map(|d| IoDevice {
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
        psi_cpu: Pressure {
            some: line(&g.psi[0]),
            full: line(&g.psi[1]),
        },
        psi_memory: Pressure {
            some: line(&g.psi[2]),
            full: line(&g.psi[3]),
        },
        psi_io: Pressure {
            some: line(&g.psi[4]),
            full: line(&g.psi[5]),
        },
        missing: Vec::new(),
        truncated: g.truncated,
    }
}

/// Seconds between two frames, on the clock process times are on.
pub fn interval_s(before: Option<&Frame>, cur: &Frame) -> f64 {
    before.map_or(0.0, |b| cur.boot_ns.saturating_sub(b.boot_ns) as f64 / 1e9)
}

/// Every process of `cur` as a table row, and every process that ended since `before`
/// as a row in state X, each with its rates over the interval between the two frames
/// (zero without a frame before). The rule for reaped children is the engine's: on the
/// parent when the frame has no exit records, else each ended child on its own row.
pub fn rows(before: Option<&Frame>, cur: &Frame) -> Vec<(PsRow, Rates)> {
    let dt = interval_s(before, cur);
    let empty = Vec::new();
    let prev = before.map_or(&empty, |b| &b.procs);
    let children = if cur.exits_hook {
        Children::OwnRows
    } else {
        Children::OnParent
    };
    let mut r = Vec::new();
    rates::process_rates(prev, &cur.procs, dt, children, &mut r);
    let mut out: Vec<(PsRow, Rates)> = cur
        .procs
        .iter()
        .zip(r)
        .map(|(p, x)| {
            (
                PsRow {
                    pid: p.pid,
                    tgid: p.pid,
                    ppid: p.ppid,
                    uid: p.uid,
                    gid: p.gid,
                    state: p.state as char,
                    threads: p.threads,
                    nice: p.nice,
                    priority: p.prio,
                    cpu_percent: x.cpu_percent,
                    cpu_ns: p.cpu_ns,
                    rss_bytes: p.rss_bytes,
                    vsz_bytes: p.vsz_bytes,
                    start_ns: p.start_ns,
                    read_bytes: p.read_bytes,
                    write_bytes: p.write_bytes,
                    comm: TaskName::from_str_lossy(&p.comm),
                    cmd: p.cmd.clone(),
                    cgroup: p.cgroup.clone(),
                    kthread: p.kthread,
                    net_rx_bps: x.net_rx_bps,
                    net_tx_bps: x.net_tx_bps,
                    tcp_retrans_per_s: None,
                    ..PsRow::default()
                },
                x,
            )
        })
        .collect();
    let mut e = Vec::new();
    rates::ended_rates(prev, &cur.ended, dt, &mut e);
    for (p, x) in cur.ended.iter().zip(e) {
        out.push((
            PsRow {
                pid: p.pid,
                tgid: p.pid,
                ppid: p.ppid,
                uid: p.uid,
                state: 'X',
                cpu_percent: x.cpu_percent,
                cpu_ns: p.cpu_ns,
                rss_bytes: p.maxrss_bytes,
                start_ns: p.start_ns,
                read_bytes: p.read_bytes,
                write_bytes: p.write_bytes,
                comm: TaskName::from_str_lossy(&p.comm),
                cmd: {
                    let i = cur.procs.partition_point(|q| q.pid < p.ppid);
                    let parent = cur.procs.get(i).filter(|q| q.pid == p.ppid);
                    kernstat_model::exits::ended_command(
                        &p.comm,
                        Some(p.cmd.as_str()),
                        parent.map(|q| (q.comm.as_str(), q.cmd.as_str())),
                    )
                },
                cgroup: p.cgroup.clone(),
                net_rx_bps: x.net_rx_bps,
                net_tx_bps: x.net_tx_bps,
                tcp_retrans_per_s: None,
                exit_code: Some(p.exit_code),
                end_ns: Some(p.exit_ns),
                ..PsRow::default()
            },
            x,
        ));
    }
    out
}

/// The machine's model over the interval from `before` to `cur` (the live views'
/// figures: CPU, memory, pressure, the top lists, groups), as `Model::update` makes it.
pub fn model(before: Option<&Frame>, cur: &Frame) -> kernstat_model::Model {
    let now = raw_sample(cur);
    let prev = before.map_or_else(|| now.clone(), raw_sample);
    model_of(&prev, &now, cur)
}

/// [`model`] from the two frames as raw samples (for a caller that needs those too). A
/// frame of format 1 keeps the machine's CPU % it had (it has no busy counter).
pub fn model_of(prev: &RawSample, now: &RawSample, cur: &Frame) -> kernstat_model::Model {
    let mut m = kernstat_model::Model::default();
    m.update(prev, now, &kernstat_model::ModelOptions::default());
    if let Some(p) = cur.v1_cpu_percent {
        m.cpu_percent = p;
    }
    m
}

/// "recorded at T (the 5 s before it; 2 min from the time asked)": which sample a
/// replayed view shows, the interval its rates cover, and how far it is from the time
/// asked when that is a second or more.
pub fn recorded_line(cursor: &crate::Cursor, off_by_ns: u64) -> String {
    let Some(cur) = cursor.current() else {
        return String::new();
    };
    let mut s = format!("recorded at {}", crate::time::local_stamp(cur.time_unix_ns));
    let dt = interval_s(cursor.before(), cur);
    let mut notes = Vec::new();
    if dt > 0.0 {
        notes.push(format!(
            "rates over the {} before it",
            crate::time::span_text((dt * 1e9) as u64)
        ));
    } else {
        notes.push("the first sample: no rates".to_string());
    }
    if off_by_ns >= 1_000_000_000 {
        notes.push(format!(
            "{} from the time asked",
            crate::time::span_text(off_by_ns)
        ));
    }
    s.push_str(&format!(" ({})", notes.join("; ")));
    s
}
