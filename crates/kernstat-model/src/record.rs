//! What the flight recorder keeps per sample, and what a replay gives back: the model
//! the live views render (machine figures and every process's rates), every process's
//! table row (ppid, user, command line, start), and the processes that ended since the
//! previous sample with their final counters. Plain data: the archive format is
//! kernstat-record's, the rendering the views' own.

use serde::{Deserialize, Serialize};

use crate::ps::PsRow;
use crate::Model;

/// A process that ended, as its exit hook saw it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExitedProcess {
    /// Process id.
    pub pid: u32,
    /// Parent's process id at the exit.
    pub ppid: u32,
    /// Real uid.
    pub uid: u32,
    /// Command name (the group leader's).
    pub comm: String,
    /// Command line, when a recorded sample saw the process alive (else empty).
    pub cmd: String,
    /// Start, ns after boot (as `ps`'s start_ns).
    pub start_ns: u64,
    /// Exit, ns after boot.
    pub exit_ns: u64,
    /// Exit, ns since the Unix epoch (set by the recorder).
    pub exit_unix_ns: u64,
    /// CPU time of every thread over its life, ns.
    pub cpu_ns: u64,
    /// Storage reads over its life, bytes.
    pub read_bytes: u64,
    /// Storage writes over its life, bytes.
    pub write_bytes: u64,
    /// Peak resident set, bytes.
    pub maxrss_bytes: u64,
    /// Exit status as wait(2) encodes it (signal in the low 7 bits, code in 8-15).
    pub exit_code: i32,
}

/// What a process table shows beyond the model's per-process rates: recorded once per
/// process per sample, joined with the model's entry by pid on replay.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ProcDetail {
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// Real uid.
    pub uid: u32,
    /// Real gid.
    pub gid: u32,
    /// Threads.
    pub threads: u32,
    /// Nice value.
    pub nice: i32,
    /// Priority.
    pub priority: i32,
    /// Virtual size, bytes.
    pub vsz_bytes: u64,
    /// Start, ns after boot.
    pub start_ns: u64,
    /// Command line (`[comm]` for kernel threads).
    pub cmd: String,
}

impl ProcDetail {
    /// The parts of a table row the model does not have.
    pub fn of(row: &PsRow) -> Self {
        ProcDetail {
            pid: row.pid,
            ppid: row.ppid,
            uid: row.uid,
            gid: row.gid,
            threads: row.threads,
            nice: row.nice,
            priority: row.priority,
            vsz_bytes: row.vsz_bytes,
            start_ns: row.start_ns,
            cmd: row.cmd.clone(),
        }
    }
}

/// Write sizes of one system call on one kind of file, counted since the daemon
/// started (what `kernstat_write_size_bytes` serves; recorded when the daemon runs with
/// `--collect writes`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct RecordedWrites {
    /// "write", "pwrite64", ...
    pub syscall: String,
    /// "file", "pipe", "socket", ...
    pub kind: String,
    /// Calls per log2 size slot (slot k: sizes in [2^(k-1), 2^k), slot 0: 0 bytes).
    pub slots: Vec<u64>,
    /// Bytes asked for, in all.
    pub bytes: u64,
}

/// One recorded sample.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Frame {
    /// When it was taken, ns since the Unix epoch.
    pub time_unix_ns: u64,
    /// When it was taken, CLOCK_BOOTTIME ns (start times are on this clock).
    pub boot_ns: u64,
    /// Everything `snapshot --json` shows, every process's rates included.
    pub model: Model,
    /// Every process's table details (ppid, user, command line...), by pid.
    pub details: Vec<ProcDetail>,
    /// Processes that ended since the previous sample, in the order they ended.
    pub exited: Vec<ExitedProcess>,
    /// Exits the hook could not keep (its buffer was full) since the previous sample.
    pub exits_lost: u64,
    /// Where exits come from: "bpf", or "" when the hook is not loaded (then processes
    /// that lived between two samples are not in the record).
    pub exits_source: String,
    /// Run-queue latency of every CPU, counts per slot of kernstat's histogram
    /// (`hist::slot_bounds`, microseconds) since the daemon started; a difference of two
    /// samples is the interval's. Recorded with `--collect runqlat`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub runqlat_us: Option<Vec<u64>>,
    /// Write sizes since the daemon started, per system call and kind of file; recorded
    /// with `--collect writes`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub writes: Vec<RecordedWrites>,
}

impl Frame {
    /// Makes every text another user (or whoever wrote the archive) controls safe to
    /// show: control characters as spaces (a forged archive's command line must not
    /// drive the terminal `ps --at` prints on).
    pub fn sanitize(&mut self) {
        let clean = |s: &mut String| {
            if let std::borrow::Cow::Owned(c) = crate::text::printable(s) {
                *s = c;
            }
        };
        for d in &mut self.details {
            clean(&mut d.cmd);
        }
        for e in &mut self.exited {
            clean(&mut e.comm);
            clean(&mut e.cmd);
        }
        for w in &mut self.writes {
            clean(&mut w.syscall);
            clean(&mut w.kind);
        }
        clean(&mut self.exits_source);
        for g in &mut self.model.cgroups {
            clean(&mut g.path);
        }
    }

    /// Every process as `ps` shows it: the model's rates joined with the details by
    /// pid. A process the model has and the details lack (it ended between the two
    /// reads) keeps its name as command line and parent 0.
    pub fn processes(&self) -> Vec<PsRow> {
        let details: std::collections::HashMap<u32, &ProcDetail> =
            self.details.iter().map(|d| (d.pid, d)).collect();
        self.model
            .procs
            .iter()
            .map(|p| {
                let d = details.get(&p.pid).copied();
                PsRow {
                    pid: p.pid,
                    tgid: p.pid,
                    ppid: d.map_or(0, |d| d.ppid),
                    uid: d.map_or(0, |d| d.uid),
                    gid: d.map_or(0, |d| d.gid),
                    state: p.state as char,
                    threads: d.map_or(0, |d| d.threads),
                    nice: d.map_or(0, |d| d.nice),
                    priority: d.map_or(0, |d| d.priority),
                    cpu_percent: p.cpu_percent,
                    cpu_ns: p.cpu_ns,
                    rss_bytes: p.rss_bytes,
                    vsz_bytes: d.map_or(0, |d| d.vsz_bytes),
                    start_ns: d.map_or(0, |d| d.start_ns),
                    read_bytes: p.read_bytes,
                    write_bytes: p.write_bytes,
                    comm: crate::raw::TaskName::from_bytes(p.comm.as_bytes()),
                    cmd: d.map_or_else(|| p.comm.as_str().to_string(), |d| d.cmd.clone()),
                    kthread: p.kthread,
                    net_rx_bps: p.net_rx_bps,
                    net_tx_bps: p.net_tx_bps,
                    ..PsRow::default()
                }
            })
            .collect()
    }
}
