//! Block I/O latency (bpf/biolat.bpf.c): choose tp_btf or raw_tp and the single-hook or
//! pair form before load, set the options, load, attach, and read the cumulative
//! histograms (per device and operation) and per-group counts.

use std::io;
use std::os::fd::{AsFd, BorrowedFd};

use libbpf_rs::{MapCore, MapFlags};

use kernstat_model::biolat::{split_dev, BioOp, DiskOp, GroupIo};
use kernstat_model::hist::{Hist, SLOTS};

use crate::kernel::Attach;
use crate::loader::{load_skel, LoadError};
use crate::skel::biolat::types::{ks_bio_cg, ks_bio_cg_key, ks_bio_hist, ks_bio_key};
use crate::skel::biolat::{BiolatSkel, BiolatSkelBuilder};

// The model's slot count is the generated type's (bpf/hist.h), checked at build time.
// SAFETY: ks_bio_hist is plain old data; all zeroes is a valid value.
const _: () = assert!(unsafe { std::mem::zeroed::<ks_bio_hist>() }.slots.len() == SLOTS);

/// How to trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// From the request's making (queued time, -Q), not its issue to the device.
    pub queued: bool,
    /// A histogram per request flags too (-F).
    pub per_flags: bool,
    /// Stamp each request at issue in a hash (libbpf-tools' form) instead of reading the
    /// request's own stamp at completion.
    pub pair: bool,
    /// Counts per control group.
    pub per_cgroup: bool,
    /// Only this disk: (major, minor).
    pub disk: Option<(u32, u32)>,
    /// Raw tracepoints even where tp_btf works (to test the fallback).
    pub force_raw_tp: bool,
}

/// The loaded tracer.
pub struct Biolat {
    skel: BiolatSkel<'static>,
    attach: Attach,
    pair: bool,
}

impl std::fmt::Debug for Biolat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Biolat")
            .field("attach", &self.attach)
            .field("pair", &self.pair)
            .finish()
    }
}

/// A cumulative reading of one key, before names are put on it.
fn plain<T: Default>(bytes: &[u8]) -> T {
    let mut v = T::default();
    let n = std::mem::size_of::<T>().min(bytes.len());
    // SAFETY: T is a generated plain-old-data BPF type (all bit patterns valid); at
    // most its size is copied from the map's value bytes.
    unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), (&mut v as *mut T).cast::<u8>(), n) };
    v
}

impl Biolat {
    /// Loads and attaches with `cfg`.
    pub fn load(cfg: &Config) -> Result<Self, LoadError> {
        let attach = if !cfg.force_raw_tp && crate::kernel::features().tp_btf {
            Attach::TpBtf
        } else {
            Attach::RawTp
        };
        let skel = load_skel(BiolatSkelBuilder::default(), "biolat", |open| {
            let btf = attach == Attach::TpBtf;
            open.progs.bio_complete.set_autoload(btf);
            open.progs.bio_complete_raw.set_autoload(!btf);
            open.progs.bio_issue.set_autoload(btf && cfg.pair);
            open.progs.bio_issue_raw.set_autoload(!btf && cfg.pair);
            let rodata = open
                .maps
                .rodata_data
                .as_deref_mut()
                .expect("biolat has rodata");
            rodata.queued = cfg.queued;
            rodata.per_flags = cfg.per_flags;
            rodata.pair = cfg.pair;
            rodata.per_cgroup = cfg.per_cgroup;
            rodata.targ_dev = cfg.disk.map_or(0, |(ma, mi)| ma << 20 | mi);
            Ok(())
        })?;
        Ok(Biolat {
            skel,
            attach,
            pair: cfg.pair,
        })
    }

    /// Which attachment was chosen.
    pub fn attach_kind(&self) -> Attach {
        self.attach
    }

    /// Every device and operation seen, cumulative; `name` names a (major, minor).
    pub fn read(&self, name: &mut dyn FnMut(u32, u32) -> String) -> io::Result<Vec<DiskOp>> {
        let mut out: Vec<DiskOp> = Vec::new();
        crate::batch::each_entry(&self.skel.maps.hists, 64, |k, v| {
            let key: ks_bio_key = plain(k);
            let h: ks_bio_hist = plain(v);
            let (major, minor) = split_dev(key.dev);
            out.push(DiskOp {
                disk: name(major, minor),
                major,
                minor,
                op: BioOp::from_raw(key.op),
                flags: key.flags,
                hist: Hist::from_slots(&h.slots),
                count: h.count,
                bytes: h.bytes,
                errors: h.errors,
            });
        })?;
        out.sort_by(|a, b| (&a.disk, a.op, a.flags).cmp(&(&b.disk, b.op, b.flags)));
        Ok(out)
    }

    /// Per control group, cumulative (with `per_cgroup`).
    pub fn read_groups(
        &self,
        name: &mut dyn FnMut(u32, u32) -> String,
    ) -> io::Result<Vec<GroupIo>> {
        let mut out = Vec::new();
        crate::batch::each_entry(&self.skel.maps.groups, 256, |k, v| {
            let key: ks_bio_cg_key = plain(k);
            let g: ks_bio_cg = plain(v);
            let (major, minor) = split_dev(key.dev);
            out.push(GroupIo {
                cgroup: key.cgroup,
                path: String::new(),
                disk: name(major, minor),
                op: BioOp::from_raw(key.op),
                count: g.count,
                bytes: g.bytes,
                latency_ns: g.latency_ns,
            });
        })?;
        Ok(out)
    }

    fn missed(&self, which: u32) -> u64 {
        self.skel
            .maps
            .missed
            .lookup_percpu(&which.to_ne_bytes(), MapFlags::ANY)
            .ok()
            .flatten()
            .unwrap_or_default()
            .iter()
            .map(|v| u64::from_ne_bytes(v[..8].try_into().expect("8 bytes")))
            .sum()
    }

    /// Requests completed without the stamp asked for since load (not measured: their
    /// queue keeps no I/O statistics; `--pair` measures them).
    pub fn unstamped(&self) -> u64 {
        self.missed(0)
    }

    /// Keys or stamps that did not fit their map since load.
    pub fn overflowed(&self) -> u64 {
        self.missed(1)
    }

    /// The attached programs (for BPF run-time statistics).
    pub fn programs(&self) -> Vec<(&'static str, BorrowedFd<'_>)> {
        let p = &self.skel.progs;
        let mut v = match self.attach {
            Attach::TpBtf => vec![("block_rq_complete", p.bio_complete.as_fd())],
            _ => vec![("block_rq_complete", p.bio_complete_raw.as_fd())],
        };
        if self.pair {
            v.push(match self.attach {
                Attach::TpBtf => ("block_rq_issue", p.bio_issue.as_fd()),
                _ => ("block_rq_issue", p.bio_issue_raw.as_fd()),
            });
        }
        v
    }
}
