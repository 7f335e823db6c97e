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

/// One recorded sample.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Frame {
    /// When it was taken, ns since the Unix epoch.
    pub time_unix_ns: u64,
    /// When it was taken, CLOCK_BOOTTIME ns (start times are on this clock).
    pub boot_ns: u64,
    /// Everything `snapshot --json` shows.
    pub model: Model,
    /// Every process as `ps` shows it, CPU % over the recording interval.
    pub processes: Vec<PsRow>,
    /// Processes that ended since the previous sample, in the order they ended.
    pub exited: Vec<ExitedProcess>,
    /// Exits the hook could not keep (its buffer was full) since the previous sample.
    pub exits_lost: u64,
    /// Where exits come from: "bpf", or "" when the hook is not loaded (then processes
    /// that lived between two samples are not in the record).
    pub exits_source: String,
}
