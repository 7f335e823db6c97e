//! Reading version-1 archive files (written before 2026-11-26: one JSON document per
//! sample, the daemon's live model with its rates, and each process's table details),
//! into today's [`Frame`]. Their types are kept here, frozen, with only what the
//! conversion reads: nothing the live model does now changes how they decode.
//!
//! What a version-1 file cannot give: the machine's cumulative counters (it kept only
//! the daemon's rates), so a replay over version-1 frames shows the per-process rates
//! recomputed from each process's cumulative counters (exact over the frames' interval)
//! and the machine's figures as the daemon had them.

use serde::Deserialize;

use crate::frame::{Core, Ended, Frame, Group, Machine, Memory, Proc, Psi};

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct V1Frame {
    time_unix_ns: u64,
    boot_ns: u64,
    model: V1Model,
    details: Vec<V1Detail>,
    exited: Vec<V1Exited>,
    exits_lost: u64,
    exits_source: String,
    runqlat_us: Option<Vec<u64>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct V1Model {
    ncpus: u32,
    cpu_percent: f64,
    interval_s: f64,
    cores_percent: Vec<f64>,
    mem: V1Mem,
    load: [f64; 3],
    psi: V1Psi,
    procs: Vec<V1Proc>,
    task_count: u64,
    running_tasks: u64,
    blocked_tasks: u64,
    cgroups: Vec<V1Group>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct V1Mem {
    total_bytes: u64,
    available_bytes: u64,
    swap_used_bytes: u64,
    swap_total_bytes: u64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct V1PsiLine {
    avg10: f32,
    avg60: f32,
    total_us: u64,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct V1Psi {
    cpu_some: Option<V1PsiLine>,
    memory_some: Option<V1PsiLine>,
    memory_full: Option<V1PsiLine>,
    io_some: Option<V1PsiLine>,
    io_full: Option<V1PsiLine>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct V1Proc {
    pid: u32,
    comm: String,
    state: String,
    kthread: bool,
    cpu_ns: u64,
    rss_bytes: u64,
    read_bytes: u64,
    write_bytes: u64,
    net_rx_bytes: Option<u64>,
    net_tx_bytes: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct V1Detail {
    pid: u32,
    ppid: u32,
    uid: u32,
    gid: u32,
    threads: u32,
    nice: i32,
    priority: i32,
    vsz_bytes: u64,
    start_ns: u64,
    cmd: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct V1Exited {
    pid: u32,
    ppid: u32,
    uid: u32,
    comm: String,
    cmd: String,
    start_ns: u64,
    exit_ns: u64,
    cpu_ns: u64,
    read_bytes: u64,
    write_bytes: u64,
    maxrss_bytes: u64,
    exit_code: i32,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct V1Group {
    path: String,
    id: u64,
    depth: u32,
    memory: Option<V1GroupMemory>,
    pids: Option<u64>,
    cpu: V1GroupCpu,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct V1GroupMemory {
    current: u64,
    max: Option<u64>,
    high: Option<u64>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct V1GroupCpu {
    usage_us: u64,
    user_us: u64,
    system_us: u64,
}

fn psi(l: &Option<V1PsiLine>) -> Option<Psi> {
    l.as_ref().map(|l| Psi {
        avg10: l.avg10,
        avg60: l.avg60,
        total_us: l.total_us,
    })
}

/// A version-1 sample's JSON as a frame (Err: it does not parse).
pub fn decode(json: &[u8]) -> Result<Frame, String> {
    let v: V1Frame = serde_json::from_slice(json).map_err(|e| e.to_string())?;
    let m = &v.model;
    let details: std::collections::HashMap<u32, &V1Detail> =
        v.details.iter().map(|d| (d.pid, d)).collect();
    // The machine's busy time, rebuilt from the daemon's percentage over its interval:
    // the best a version-1 frame has.
    let interval_ns = (m.interval_s * 1e9) as u64;
    let mut procs: Vec<Proc> = m
        .procs
        .iter()
        .map(|p| {
            let d = details.get(&p.pid);
            Proc {
                pid: p.pid,
                ppid: d.map_or(0, |d| d.ppid),
                uid: d.map_or(0, |d| d.uid),
                euid: d.map_or(0, |d| d.uid),
                gid: d.map_or(0, |d| d.gid),
                start_ns: d.map_or(0, |d| d.start_ns),
                state: p.state.bytes().next().unwrap_or(b'?'),
                kthread: p.kthread,
                threads: d.map_or(0, |d| d.threads),
                nice: d.map_or(0, |d| d.nice),
                prio: d.map_or(0, |d| d.priority),
                cpu_ns: p.cpu_ns,
                read_bytes: p.read_bytes,
                write_bytes: p.write_bytes,
                rss_bytes: p.rss_bytes,
                vsz_bytes: d.map_or(0, |d| d.vsz_bytes),
                // Version 1 kept totals only: shown as "other".
                net: p
                    .net_rx_bytes
                    .zip(p.net_tx_bytes)
                    .map(|(rx, tx)| [[0, 0, 0, rx], [0, 0, 0, tx]]),
                comm: p.comm.clone(),
                cmd: d.map_or_else(|| p.comm.clone(), |d| d.cmd.clone()),
                ..Proc::default()
            }
        })
        .collect();
    procs.sort_by_key(|p| p.pid);
    Ok(Frame {
        time_unix_ns: v.time_unix_ns,
        boot_ns: v.boot_ns,
        machine: Machine {
            mono_ns: v.boot_ns,
            ncpus: m.ncpus,
            busy_ns: 0,
            cores: m
                .cores_percent
                .iter()
                .map(|p| Core {
                    busy_ns: (p / 100.0 * interval_ns as f64) as u64,
                    total_ns: interval_ns,
                    ..Core::default()
                })
                .collect(),
            mem: Memory {
                total: m.mem.total_bytes,
                available: m.mem.available_bytes,
                swap_total: m.mem.swap_total_bytes,
                swap_free: m.mem.swap_total_bytes.saturating_sub(m.mem.swap_used_bytes),
                ..Memory::default()
            },
            load: m.load,
            psi: [
                psi(&m.psi.cpu_some),
                psi(&m.psi.memory_some),
                psi(&m.psi.memory_full),
                psi(&m.psi.io_some),
                psi(&m.psi.io_full),
            ],
            tasks: m.task_count,
            running: m.running_tasks,
            blocked: m.blocked_tasks,
            ..Machine::default()
        },
        procs,
        ended: v
            .exited
            .iter()
            .map(|e| Ended {
                pid: e.pid,
                ppid: e.ppid,
                uid: e.uid,
                start_ns: e.start_ns,
                exit_ns: e.exit_ns,
                cpu_ns: e.cpu_ns,
                read_bytes: e.read_bytes,
                write_bytes: e.write_bytes,
                maxrss_bytes: e.maxrss_bytes,
                exit_code: e.exit_code,
                comm: e.comm.clone(),
                cmd: e.cmd.clone(),
                ..Ended::default()
            })
            .collect(),
        ended_lost: v.exits_lost,
        exits_hook: v.exits_source == "bpf",
        groups: m
            .cgroups
            .iter()
            .map(|g| Group {
                path: g.path.clone(),
                id: g.id,
                depth: g.depth,
                cpu_usage_us: g.cpu.usage_us,
                cpu_user_us: g.cpu.user_us,
                cpu_system_us: g.cpu.system_us,
                mem_current: g.memory.as_ref().map(|m| m.current),
                mem_max: g.memory.as_ref().and_then(|m| m.max),
                mem_high: g.memory.as_ref().and_then(|m| m.high),
                pids: g.pids,
                ..Group::default()
            })
            .collect(),
        hists: crate::frame::Hists {
            runqlat_us: v.runqlat_us,
            ..Default::default()
        },
        summaries: Vec::new(),
        groups_mount: String::new(),
        groups_layout: String::new(),
        links: Vec::new(),
        disks: Vec::new(),
        events: Vec::new(),
        tcp: false,
        retransmits: Vec::new(),
        // What the daemon measured, kept for the machine's CPU %: a version-1 frame
        // has no busy counter to difference.
        v1_cpu_percent: Some(m.cpu_percent),
        omitted: None,
    })
}
