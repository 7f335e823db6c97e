//! Every control group in one read (bpf/cgroups.bpf.c): a sleepable cgroup iterator
//! (Linux 6.1+) attached to a hierarchy's root directory, walking its descendants in
//! pre-order and writing each group's id, parent, name and CPU time after flushing the
//! kernel's per-CPU counters, as reading cpu.stat would.

use std::io::{self, Read};
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;

use libbpf_rs::skel::OpenSkel;
use libbpf_rs::{CgroupIterOpts, CgroupIterOrder, IterOpts, Link};

use kernstat_model::cgroup::CgroupCounters;

use crate::loader::{load_skel, LoadError};
use crate::skel::cgroups::types::ks_cgroup_rec;
use crate::skel::cgroups::{CgroupsSkel, CgroupsSkelBuilder};

/// The loaded iterator, attached to one hierarchy's root.
pub struct CgroupIter {
    link: Link,
    skel: CgroupsSkel<'static>,
    _root: OwnedFd,
    buf: Vec<u8>,
}

impl std::fmt::Debug for CgroupIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CgroupIter").finish_non_exhaustive()
    }
}

impl CgroupIter {
    /// Loads the iterator and attaches it to the group whose directory is `root` (a
    /// cgroup2 mount, or a group in it).
    pub fn load(root: &Path) -> Result<Self, LoadError> {
        let skel: CgroupsSkel<'static> =
            load_skel(CgroupsSkelBuilder::default(), "cgroups", |open| {
                for mut prog in open.open_object_mut().progs_mut() {
                    // Attached below, to the root asked for (not the kernel's default).
                    prog.set_autoattach(false);
                }
                Ok(())
            })?;
        let dir = std::fs::File::open(root)
            .map_err(|e| crate::loader::failed(format!("opening {}", root.display()), e.into()))?;
        let root_fd = OwnedFd::from(dir);
        let mut opts = CgroupIterOpts::from_fd(root_fd.as_fd());
        opts.order = CgroupIterOrder::DescendantsPre;
        let link = skel
            .progs
            .cgroup_stats
            .attach_iter_with_opts(IterOpts::Cgroup(opts))
            .map_err(|e| crate::loader::failed("attaching the cgroup iterator", e))?;
        Ok(CgroupIter {
            link,
            skel,
            _root: root_fd,
            buf: Vec::with_capacity(64 * 1024),
        })
    }

    /// Every group below the root (the root first), parents before children.
    ///
    /// The kernel's cgroup iterator cannot resume a walk in a second read (it returns
    /// EOPNOTSUPP, since cgroup_mutex was dropped in between): the whole walk must fit
    /// in the first, whose buffer is the kernel's 32 KiB (8 pages) for iterators, about
    /// 290 groups of these records. So one read of a buffer larger than that, and
    /// EOPNOTSUPP means a tree too large for this reader.
    pub fn read(&mut self) -> io::Result<Vec<CgroupCounters>> {
        self.buf.clear();
        self.buf.resize(64 * 1024, 0);
        let mut it = libbpf_rs::Iter::new(&self.link).map_err(io::Error::other)?;
        let n = it.read(&mut self.buf)?;
        self.buf.truncate(n);
        if it.read(&mut [0u8; 16])? != 0 {
            return Err(io::Error::other(
                "the cgroup iterator wrote more than one read",
            ));
        }
        let size = std::mem::size_of::<ks_cgroup_rec>();
        Ok(self
            .buf
            .chunks_exact(size)
            .map(|c| {
                // SAFETY: the stream is whole ks_cgroup_rec records (the only thing the
                // program writes); read_unaligned copes with the Vec's alignment.
                let r: ks_cgroup_rec = unsafe { std::ptr::read_unaligned(c.as_ptr().cast()) };
                let len = (r.name_len as usize).min(r.name.len());
                let name: Vec<u8> = r.name[..len].iter().map(|&b| b as u8).collect();
                CgroupCounters {
                    id: r.id,
                    parent_id: r.parent_id,
                    level: r.level,
                    name: String::from_utf8_lossy(&name).into_owned(),
                    usage_ns: r.usage_ns,
                    user_ns: r.user_ns,
                    system_ns: r.system_ns,
                }
            })
            .collect())
    }

    /// Records the program could not write.
    pub fn failed(&self) -> u64 {
        self.skel.maps.bss_data.as_deref().map_or(0, |b| b.failed)
    }
}
