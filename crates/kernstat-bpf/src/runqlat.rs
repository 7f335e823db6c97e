//! Run-queue latency (bpf/runqlat.bpf.c): choose tp_btf or raw_tp before load, set the
//! filters, load, attach, and read the histograms.
//!
//! Histograms are cumulative in the kernel; callers take per-interval views by
//! subtracting an earlier reading (nothing is reset, so nothing recorded between a read
//! and a reset is lost). Keyed histograms (-P, -L, --pidnss) are read with
//! BPF_MAP_LOOKUP_BATCH in batches of 256 (smaller batches stop early on ENOSPC when a
//! bucket of the hash holds more entries than the batch).

use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use libbpf_rs::{MapCore, MapFlags};

use kernstat_model::hist::{Hist, SLOTS};

use crate::kernel::Attach;
use crate::loader::{load_skel, LoadError};
use crate::skel::runqlat::types::ks_rq_hist;
use crate::skel::runqlat::{RunqlatSkel, RunqlatSkelBuilder};

/// What keyed histograms are keyed by.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum KeyKind {
    /// One histogram (per CPU).
    #[default]
    None,
    /// Per process (-P).
    Pid,
    /// Per thread (-L).
    Tid,
    /// Per PID namespace (--pidnss).
    PidNs,
}

/// How to trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// Only this process (-p).
    pub pid: Option<u32>,
    /// Record milliseconds instead of microseconds (-m).
    pub ms: bool,
    /// Keyed histograms.
    pub key: KeyKind,
    /// Only tasks in this cgroup v2 or below it: (cgroup id, level).
    pub cgroup: Option<(u64, i32)>,
    /// Use raw tracepoints even where tp_btf works (to test the fallback).
    pub force_raw_tp: bool,
    /// Measure off-CPU time (blocked until running again) instead, with the same
    /// switch hook (tp_btf only).
    pub offcpu: bool,
}

/// The loaded tracer.
pub struct Runqlat {
    skel: RunqlatSkel<'static>,
    attach: Attach,
    ncpus: usize,
    offcpu: bool,
}

impl std::fmt::Debug for Runqlat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runqlat")
            .field("attach", &self.attach)
            .finish()
    }
}

// The model's slot count is the generated type's (bpf/runqlat.h), checked when this
// crate is built: a change to one side that misses the other does not compile.
// SAFETY: ks_rq_hist is plain old data; all zeroes is a valid value.
const _: () = assert!(unsafe { std::mem::zeroed::<ks_rq_hist>() }.slots.len() == SLOTS);

fn to_hist(bytes: &[u8]) -> Hist {
    let mut h = ks_rq_hist::default();
    for (slot, chunk) in h.slots.iter_mut().zip(bytes.chunks_exact(8)) {
        *slot = u64::from_ne_bytes(chunk.try_into().expect("8 bytes"));
    }
    Hist::from_slots(&h.slots)
}

impl Runqlat {
    /// Loads and attaches with `cfg`.
    pub fn load(cfg: &Config) -> Result<Self, LoadError> {
        let attach = if !cfg.force_raw_tp && crate::kernel::features().tp_btf {
            Attach::TpBtf
        } else {
            Attach::RawTp
        };
        if cfg.offcpu && attach != Attach::TpBtf {
            return Err(LoadError::Unsupported(
                "off-CPU time needs tp_btf tracepoints (5.5+ with BTF)".into(),
            ));
        }
        let skel = load_skel(RunqlatSkelBuilder::default(), "runqlat", |open| {
            let btf = attach == Attach::TpBtf;
            open.progs.rq_wakeup.set_autoload(btf && !cfg.offcpu);
            open.progs.rq_wakeup_new.set_autoload(btf && !cfg.offcpu);
            open.progs.rq_switch.set_autoload(btf);
            open.progs.rq_wakeup_raw.set_autoload(!btf);
            open.progs.rq_wakeup_new_raw.set_autoload(!btf);
            open.progs.rq_switch_raw.set_autoload(!btf);
            if !btf {
                // Task-local storage may not exist on kernels that need raw_tp.
                let _ = open.maps.start_ts.set_autocreate(false);
                let _ = open.maps.off_ts.set_autocreate(false);
            }
            let rodata = open
                .maps
                .rodata_data
                .as_deref_mut()
                .expect("runqlat has rodata");
            rodata.targ_tgid = cfg.pid.unwrap_or(0);
            rodata.targ_ms = cfg.ms;
            rodata.offcpu = cfg.offcpu;
            rodata.key_kind = match cfg.key {
                KeyKind::None => 0,
                KeyKind::Pid => 1,
                KeyKind::Tid => 2,
                KeyKind::PidNs => 3,
            };
            if let Some((id, level)) = cfg.cgroup {
                rodata.filter_cg = true;
                rodata.targ_cg_id = id;
                rodata.targ_cg_level = level;
            }
            Ok(())
        })?;
        let ncpus = libbpf_rs::num_possible_cpus().unwrap_or(1);
        let rq = Runqlat {
            skel,
            attach,
            ncpus,
            offcpu: cfg.offcpu,
        };
        if let (Some(pid), Attach::TpBtf) = (cfg.pid, attach) {
            rq.prepare_storage(pid);
        }
        Ok(rq)
    }

    /// Creates the task-local storage of each thread of `pid` now, from this system
    /// call, so that the hooks only look it up. Created from inside `sched_switch`
    /// instead, it can be refused: interrupts are off there, so the entry comes from a
    /// per-CPU cache that may be empty, and another task's storage operation may hold
    /// this CPU's task-storage busy counter. A refused first creation loses that
    /// task's next off-CPU period or wait (counted in `lost`); that may be how
    /// `tests/offcpu.rs` once counted 19 of 20 sleeps inside the full suite (the run did
    /// not print the lost count; docs/testing.md). Threads started later are
    /// created by the hooks as before. Threads other than the leader need a thread
    /// pidfd (PIDFD_THREAD, Linux 6.9); before that only the leader is prepared.
    fn prepare_storage(&self, pid: u32) {
        let map = if self.offcpu {
            &self.skel.maps.off_ts
        } else {
            &self.skel.maps.start_ts
        };
        let tids: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|dir| {
                dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                    .collect()
            })
            .unwrap_or_else(|_| vec![pid]);
        for tid in tids {
            let Some(fd) = crate::kernel::pidfd_open(tid, tid != pid) else {
                continue;
            };
            let key = std::os::fd::AsRawFd::as_raw_fd(&fd).to_ne_bytes();
            // NOEXIST: a hook that got there first has already stamped it.
            let _ = map.update(&key, &0u64.to_ne_bytes(), MapFlags::NO_EXIST);
        }
    }

    /// Which attachment was chosen.
    pub fn attach_kind(&self) -> Attach {
        self.attach
    }

    /// The cumulative unkeyed histogram of each possible CPU.
    pub fn read_per_cpu(&self) -> io::Result<Vec<Hist>> {
        let key = 0u32.to_ne_bytes();
        let vals = self
            .skel
            .maps
            .hist
            .lookup_percpu(&key, MapFlags::ANY)
            .map_err(io::Error::other)?
            .unwrap_or_default();
        let mut out: Vec<Hist> = vals.iter().map(|v| to_hist(v)).collect();
        out.resize(self.ncpus.max(out.len()), Hist::default());
        Ok(out)
    }

    /// The cumulative keyed histograms, read in batches of 256 (to the map's end).
    pub fn read_keyed(&self) -> io::Result<Vec<(u32, Hist)>> {
        let mut out: Vec<(u32, Hist)> = Vec::new();
        crate::batch::each_entry(&self.skel.maps.keyed, 256, |k, v| {
            let key = u32::from_ne_bytes(k[..4].try_into().expect("4-byte key"));
            out.push((key, to_hist(v)));
        })?;
        out.sort_unstable_by_key(|(k, _)| *k);
        Ok(out)
    }

    /// Removes keyed entries (keys that stopped changing, e.g. exited processes).
    pub fn forget_keys(&self, keys: &[u32]) {
        for k in keys {
            let _ = self.skel.maps.keyed.delete(&k.to_ne_bytes());
        }
    }

    /// The largest latency recorded since the last call (ns), and resets it.
    pub fn take_max_ns(&self) -> io::Result<u64> {
        let key = 0u32.to_ne_bytes();
        let map = &self.skel.maps.max_ns;
        let vals = map
            .lookup_percpu(&key, MapFlags::ANY)
            .map_err(io::Error::other)?
            .unwrap_or_default();
        let max = vals
            .iter()
            .map(|v| u64::from_ne_bytes(v[..8].try_into().expect("8 bytes")))
            .max()
            .unwrap_or(0);
        let zeros = vec![vec![0u8; 8]; vals.len()];
        map.update_percpu(&key, &zeros, MapFlags::ANY)
            .map_err(io::Error::other)?;
        Ok(max)
    }

    /// Enqueue times the programs could not store since load (the map refused a nested
    /// write: see bpf/runqlat.bpf.c `lost`): those tasks' next run was not measured.
    pub fn lost(&self) -> io::Result<u64> {
        let key = 0u32.to_ne_bytes();
        let vals = self
            .skel
            .maps
            .lost
            .lookup_percpu(&key, MapFlags::ANY)
            .map_err(io::Error::other)?
            .unwrap_or_default();
        Ok(vals
            .iter()
            .map(|v| u64::from_ne_bytes(v[..8].try_into().expect("8 bytes")))
            .sum())
    }

    /// Events the kernel skipped since load: a handler was already running on that CPU
    /// when another event arrived (an interrupt's wake-up nested in the handler's run),
    /// so the nested event never reached the program (the programs' recursion_misses).
    pub fn missed(&self) -> u64 {
        self.programs()
            .into_iter()
            .filter_map(|(_, fd)| crate::stats::prog_run_time(fd).ok())
            .map(|t| t.recursion_misses)
            .sum()
    }

    /// The attached programs (for BPF run-time statistics).
    pub fn programs(&self) -> Vec<(&'static str, BorrowedFd<'_>)> {
        let p = &self.skel.progs;
        match self.attach {
            Attach::TpBtf if self.offcpu => vec![("sched_switch", p.rq_switch.as_fd())],
            Attach::TpBtf => vec![
                ("sched_switch", p.rq_switch.as_fd()),
                ("sched_wakeup", p.rq_wakeup.as_fd()),
                ("sched_wakeup_new", p.rq_wakeup_new.as_fd()),
            ],
            _ => vec![
                ("sched_switch", p.rq_switch_raw.as_fd()),
                ("sched_wakeup", p.rq_wakeup_raw.as_fd()),
                ("sched_wakeup_new", p.rq_wakeup_new_raw.as_fd()),
            ],
        }
    }
}
