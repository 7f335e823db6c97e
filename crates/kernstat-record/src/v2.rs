//! Format 2's process record, read from files written before format 3 added each
//! process's run delay (`Proc::run_delay_ns`, which `kernstat why` ranks victims by):
//! everything else in a format-2 frame is format 3's, so a format-2 frame is read as a
//! [`FrameOf<ProcV2>`] and its processes turned into [`Proc`] with no run delay; the
//! prefix of the first delta after a key frame is made in format 2's encoding too.

use serde::{Deserialize, Serialize};

use crate::frame::{Frame, FrameOf, Proc};

/// A process as format 2 recorded it.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ProcV2 {
    pid: u32,
    ppid: u32,
    uid: u32,
    euid: u32,
    gid: u32,
    start_ns: u64,
    state: u8,
    kthread: bool,
    threads: u32,
    nice: i32,
    prio: i32,
    cpu_ns: u64,
    children_cpu_ns: u64,
    read_bytes: u64,
    write_bytes: u64,
    rss_bytes: u64,
    vsz_bytes: u64,
    minflt: u64,
    majflt: u64,
    net: Option<[[u64; 4]; 2]>,
    comm: String,
    cmd: String,
    cgroup: String,
}

impl From<ProcV2> for Proc {
    fn from(p: ProcV2) -> Proc {
        Proc {
            pid: p.pid,
            ppid: p.ppid,
            uid: p.uid,
            euid: p.euid,
            gid: p.gid,
            start_ns: p.start_ns,
            state: p.state,
            kthread: p.kthread,
            threads: p.threads,
            nice: p.nice,
            prio: p.prio,
            cpu_ns: p.cpu_ns,
            children_cpu_ns: p.children_cpu_ns,
            run_delay_ns: 0,
            read_bytes: p.read_bytes,
            write_bytes: p.write_bytes,
            rss_bytes: p.rss_bytes,
            vsz_bytes: p.vsz_bytes,
            minflt: p.minflt,
            majflt: p.majflt,
            net: p.net,
            comm: p.comm,
            cmd: p.cmd,
            cgroup: p.cgroup,
        }
    }
}

impl From<Proc> for ProcV2 {
    fn from(p: Proc) -> ProcV2 {
        ProcV2 {
            pid: p.pid,
            ppid: p.ppid,
            uid: p.uid,
            euid: p.euid,
            gid: p.gid,
            start_ns: p.start_ns,
            state: p.state,
            kthread: p.kthread,
            threads: p.threads,
            nice: p.nice,
            prio: p.prio,
            cpu_ns: p.cpu_ns,
            children_cpu_ns: p.children_cpu_ns,
            read_bytes: p.read_bytes,
            write_bytes: p.write_bytes,
            rss_bytes: p.rss_bytes,
            vsz_bytes: p.vsz_bytes,
            minflt: p.minflt,
            majflt: p.majflt,
            net: p.net,
            comm: p.comm,
            cmd: p.cmd,
            cgroup: p.cgroup,
        }
    }
}

/// The prefix the first delta after a format-2 key frame was compressed against: the
/// key frame's differences from itself, in format 2's encoding.
pub fn template(key: &Frame) -> Vec<u8> {
    let mut t = crate::delta::encode(key, key);
    crate::delta::pack_ended(&mut t);
    postcard::to_stdvec(&t.map_procs(ProcV2::from)).unwrap_or_default()
}

/// A format-2 frame's payload as a frame of this version.
pub fn decode(raw: &[u8]) -> Result<Frame, String> {
    postcard::from_bytes::<FrameOf<ProcV2>>(raw)
        .map(|f| f.map_procs(Proc::from))
        .map_err(|e| e.to_string())
}
