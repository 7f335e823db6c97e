//! Per-process network bytes (bpf/net.bpf.c): choose the attachment, load, attach, read
//! the live processes' counters (a task iterator over their task-local storage) and the
//! exited ones' (a hash map), forget the exited once read twice.
//!
//! The socket layer's tracepoints (Linux 6.3+) are tried first; an older kernel gets
//! fexit on the send and receive functions ([`send_function`], sock_recvmsg), where
//! BPF trampolines are allowed. Both count in
//! the caller's context, so the attribution is the same: the process that called. The
//! counters are cumulative; callers take intervals by difference.
//!
//! The maps of processes that exited (and the per-user overflow) are read by
//! [`Batch`] (`crate::batch`: libbpf-rs refuses batched lookups of per-CPU maps), one
//! system call per 1024 entries, where a lookup per key would be two per entry.

use std::io;
use std::mem::size_of;
use std::os::fd::{BorrowedFd, RawFd};

use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::{MapCore, MapFlags};

use kernstat_model::net::{
    Attribution, CrowdedUser, NetCounters, NetProcSample, NetSample, UNKNOWN_UID,
};
use kernstat_model::raw::Comm;

use crate::batch::Batch;
use crate::kernel::Attach;
use crate::loader::{load_skel, log_tail, LoadError};
use crate::skel::net::types::{ks_net_key, ks_net_proc, ks_net_val};
use crate::skel::net::{NetSkel, NetSkelBuilder};

/// Entries of the exited processes' map read per system call.
const BATCH: usize = 1024;

// The model's four kinds are the generated type's (bpf/net.h), checked at build time.
// SAFETY: ks_net_val is plain old data; all zeroes is a valid value.
const _: () = assert!(unsafe { std::mem::zeroed::<ks_net_val>() }.bytes[0].len() == 4);

/// The loaded counter.
pub struct Net {
    skel: NetSkel<'static>,
    attach: Attach,
    /// Whether walks use net_run (cleared for good the first time it cannot run).
    run: bool,
    /// Its buffer's size.
    walk_cap: u32,
    /// The live processes' records, as the walk wrote them (kept between reads).
    walk: Vec<u8>,
    /// The exited processes' map.
    batch: Batch,
    /// Entries the exited map held at the last read.
    exited_entries: u64,
    /// Entries this reader deleted from it: when the kernel has added as many, the map
    /// is empty and is not read.
    deleted: u64,
    /// Processes found gone at the last read, with their calls then: deleted at the
    /// next read if still gone and unchanged (so their last bytes were read once).
    gone_before: Vec<(ProcKey, u64)>,
    /// The next read's `gone_before`, its buffer kept (a sampler allocates nothing in
    /// its steady state).
    gone_now: Vec<(ProcKey, u64)>,
    /// The per-user overflow map (read only once something overflowed).
    crowded: Batch,
    /// Entries deleted per user since loading (uid, entries), sorted: the kernel's
    /// `freed_for`, so that exits free room in a user's share.
    freed: Vec<(u32, u64)>,
}

type ProcKey = (u32, u64);

impl std::fmt::Debug for Net {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Net").field("attach", &self.attach).finish()
    }
}

/// The function every send goes through, for fexit. Linux 6.1.56+ (and 6.5+) moved
/// the body of sock_sendmsg into a static __sock_sendmsg that the send syscalls and
/// write(2) on a socket call directly, leaving sock_sendmsg to in-kernel callers:
/// hooking sock_sendmsg there counts no send at all (measured on Debian 12's
/// 6.1.0-56: 0 of 400,000 bytes over TCP, UDP and Unix sockets). Where the static
/// function exists in BTF it is the one to hook; sock_sendmsg calls it too.
fn send_function() -> &'static str {
    if crate::kernel::features().split_sock_sendmsg {
        "__sock_sendmsg"
    } else {
        "sock_sendmsg"
    }
}

fn open_and_load(
    attach: Attach,
    share: Option<BorrowedFd<'_>>,
    walk_cap: Option<u32>,
) -> Result<NetSkel<'static>, LoadError> {
    load_skel(NetSkelBuilder::default(), "net", |open| {
        if let Some(fd) = share {
            // Both objects call the map `net_live`: a reused map takes the name the
            // kernel has for it, and the skeleton finds its maps by name.
            open.maps
                .net_live
                .reuse_fd(fd)
                .map_err(|e| crate::loader::failed("sharing the sampler's storage", e))?;
        }
        let rodata = open
            .maps
            .rodata_data
            .as_deref_mut()
            .expect("net has rodata");
        if let Some(cap) = walk_cap {
            crate::walk::size_buffer(&mut open.maps.data_walk, &mut rodata.walk_cap, cap)?;
        }
        if let Some(inum) = crate::loader::reader_pid_namespace() {
            rodata.reader_pidns_inum = inum;
        }
        for mut prog in open.open_object_mut().progs_mut() {
            let name = prog.name().to_string_lossy().into_owned();
            // The send and receive hooks come in two forms; the iterator and the exit
            // hook are the same for both.
            let wanted = match attach {
                Attach::TpBtf => !name.starts_with("fx_"),
                _ => !name.starts_with("tp_"),
            };
            prog.set_autoload(wanted && (name != "net_run" || walk_cap.is_some()));
            if wanted && name == "fx_send" {
                prog.set_attach_target(0, Some(send_function().to_string()))
                    .map_err(|e| crate::loader::failed("choosing the send hook", e))?;
            }
        }
        Ok(())
    })
}

impl Net {
    /// Loads and attaches: the tracepoints if the kernel has them, else fexit.
    /// `force_fexit` skips the tracepoints (to test that path where both work).
    pub fn load(force_fexit: bool) -> Result<Self, LoadError> {
        Self::load_with(force_fexit, None)
    }

    /// Loads with the counters in `share` (the sampler's `net_live`, see
    /// [`crate::sampler::Sampler::net_storage`]), so that the sampler's walk reads them:
    /// then [`Net::read_with`] takes its records instead of walking the tasks again.
    pub fn load_with(force_fexit: bool, share: Option<BorrowedFd<'_>>) -> Result<Self, LoadError> {
        let mut first_error = None;
        let order: &[Attach] = if force_fexit {
            &[Attach::Fexit]
        } else {
            if crate::kernel::features().sock_length_tracepoints {
                &[Attach::TpBtf, Attach::Fexit]
            } else {
                &[Attach::Fexit]
            }
        };
        // The walk runs (walk.rs) unless the sampler's walk reads the counters instead.
        let walk_cap = (share.is_none() && crate::walk::wanted())
            .then(|| crate::walk::buffer_size(LIVE_RECORD));
        for &attach in order {
            match open_and_load(attach, share, walk_cap) {
                Ok(skel) => {
                    let batch = Batch::new(&skel.maps.exited, BATCH, false);
                    let crowded = Batch::new(&skel.maps.crowded, 64, true);
                    return Ok(Net {
                        skel,
                        attach,
                        run: walk_cap.is_some(),
                        walk_cap: walk_cap.unwrap_or(0),
                        walk: vec![0; 64 * LIVE_RECORD],
                        batch,
                        exited_entries: 0,
                        deleted: 0,
                        gone_before: Vec::new(),
                        gone_now: Vec::new(),
                        crowded,
                        freed: Vec::new(),
                    });
                }
                Err(e @ (LoadError::NoBtf(_) | LoadError::NotPermitted)) => return Err(e),
                Err(e) => {
                    if std::env::var_os("KERNSTAT_DEBUG").is_some() {
                        eprintln!(
                            "kernstat: net {} unavailable ({e})\n{}",
                            attach.as_str(),
                            log_tail(4)
                        );
                    }
                    first_error.get_or_insert(e);
                }
            }
        }
        Err(first_error.expect("at least one attachment was tried"))
    }

    /// Which hooks are in use.
    pub fn attach(&self) -> Attach {
        self.attach
    }

    /// The kernel function the send side hooks with fexit (see [`send_function`]).
    pub fn send_hook(&self) -> &'static str {
        send_function()
    }

    /// Whose bytes they are: both hooks run in the caller's context.
    pub fn attribution(&self) -> Attribution {
        Attribution::Caller
    }

    /// Reads every process's counters into `out` (procs and lost; links are not ours):
    /// the live ones from their storage, the exited ones from their map (a process
    /// that just exited can be in both, with the same counters: it is listed once).
    /// Then forgets the exited that `alive(pid, start_ns)` says are gone, once they were
    /// gone and unchanged at two reads in a row (their last bytes were reported).
    pub fn read(
        &mut self,
        out: &mut NetSample,
        alive: impl Fn(u32, u64) -> bool,
    ) -> io::Result<()> {
        out.procs.clear();
        let len = self.read_walk()?;
        out.procs.extend(
            self.walk[..len]
                .chunks_exact(LIVE_RECORD)
                .filter_map(live_record),
        );
        self.read_exited(out, alive)
    }

    /// As [`Net::read`], with the live processes' counters as the sampler's walk wrote
    /// them (when loaded with its storage: [`Net::load_with`]).
    pub fn read_with(
        &mut self,
        out: &mut NetSample,
        alive: impl Fn(u32, u64) -> bool,
        live: &[NetProcSample],
    ) -> io::Result<()> {
        out.procs.clear();
        out.procs.extend_from_slice(live);
        self.read_exited(out, alive)
    }

    /// Adds the exited processes to the live ones in `out.procs`, and the rest.
    fn read_exited(
        &mut self,
        out: &mut NetSample,
        alive: impl Fn(u32, u64) -> bool,
    ) -> io::Result<()> {
        out.attribution = Some(self.attribution());
        let bss = self.skel.maps.bss_data.as_deref();
        out.lost = bss.map_or(0, |b| b.overflow);
        let added = bss.map_or(u64::MAX, |b| b.exited_added);
        let (ncpus, stride) = (self.batch.ncpus, self.batch.stride);
        let mut exited = 0;
        // Empty (every entry the kernel added, this reader deleted): nothing to read.
        // An exit copies its process here before the process leaves the task list, so
        // one that left before the walk was counted in `added` before this look.
        let empty = added == self.deleted;
        if !empty {
            self.batch.read(&self.skel.maps.exited, |k, v| {
                if k.len() < size_of::<ks_net_key>() {
                    return;
                }
                exited += 1;
                // SAFETY: length checked; plain old data in the generated layout.
                let key: ks_net_key = unsafe { std::ptr::read_unaligned(k.as_ptr().cast()) };
                let (counters, comm, uid) = sum_cpus(v, ncpus, stride);
                out.procs.push(NetProcSample {
                    pid: key.tgid,
                    start_ns: key.start_ns,
                    comm,
                    uid,
                    counters,
                });
            })?;
        }
        self.exited_entries = exited;
        out.procs.sort_unstable_by_key(|p| (p.pid, p.start_ns));
        // A process whose last thread exited but which is not reaped yet: its storage
        // and its exited copy. Counters only grow, so the larger is the later.
        out.procs.dedup_by(|later, kept| {
            let same = (later.pid, later.start_ns) == (kept.pid, kept.start_ns);
            if same && calls(&later.counters) > calls(&kept.counters) {
                std::mem::swap(later, kept);
            }
            same
        });
        if out.lost > 0 {
            self.read_crowded(out)?;
        }
        self.forget_gone(out, alive);
        Ok(())
    }

    /// Runs one walk into `self.walk`; returns the bytes written: net_run's stream where
    /// it runs and fits (walk.rs), else a read of the iterator.
    fn read_walk(&mut self) -> io::Result<usize> {
        if self.run && !crate::walk::run(&self.skel.progs.net_run) {
            self.run = false;
        }
        if self.run {
            let maps = &self.skel.maps;
            let bss = maps.bss_data.as_deref().expect("net has a .bss");
            let start = maps
                .data_walk_data
                .as_deref()
                .expect("net has a .data.walk");
            // SAFETY: this object's .data.walk, sized to walk_cap at load, and its .bss.
            if let Some(stream) =
                unsafe { crate::walk::stream(start, self.walk_cap, &bss.walk_len, &bss.walk_full) }
            {
                self.walk.clear();
                self.walk.extend_from_slice(stream);
                return Ok(stream.len());
            }
            // Outgrew its buffer (sized at load): the iterator from now.
            self.run = false;
        }
        let link = self
            .skel
            .links
            .net_walk
            .as_ref()
            .expect("attach() created the iterator link");
        crate::loader::read_iterator(link, &mut self.walk)
    }

    /// The per-user counters of processes without an entry of their own.
    fn read_crowded(&mut self, out: &mut NetSample) -> io::Result<()> {
        let (ncpus, stride) = (self.crowded.ncpus, self.crowded.stride);
        self.crowded.read(&self.skel.maps.crowded, |k, v| {
            let Some(uid) = k
                .get(..4)
                .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
            else {
                return;
            };
            let (counters, _, _) = sum_cpus(v, ncpus, stride);
            out.crowded.push(CrowdedUser { uid, counters });
        })?;
        if let Ok(Some(slots)) = self
            .skel
            .maps
            .uncounted
            .lookup_percpu(&0u32.to_ne_bytes(), MapFlags::ANY)
        {
            let mut all = Vec::with_capacity(ncpus * stride);
            for slot in &slots {
                all.extend_from_slice(slot);
                all.resize(all.len().div_ceil(stride) * stride, 0);
            }
            let (counters, _, _) = sum_cpus(&all, slots.len(), stride);
            if counters != NetCounters::default() {
                out.crowded.push(CrowdedUser {
                    uid: UNKNOWN_UID,
                    counters,
                });
            }
        }
        out.crowded.sort_unstable_by_key(|c| c.uid);
        Ok(())
    }

    /// Deletes the entries of processes gone at two reads in a row, and tells the
    /// kernel how many of each user's it deleted (root's are not limited nor counted).
    fn forget_gone(&mut self, sample: &NetSample, alive: impl Fn(u32, u64) -> bool) {
        let mut gone_now = std::mem::take(&mut self.gone_now);
        gone_now.clear();
        // Sized with the table read: it grows only when the table does.
        gone_now.reserve(sample.procs.len());
        for p in &sample.procs {
            if alive(p.pid, p.start_ns) {
                continue;
            }
            let key = (p.pid, p.start_ns);
            let n = calls(&p.counters);
            // Sorted below: a binary search, not a scan per gone process (churn makes
            // both lists long).
            let unchanged = self
                .gone_before
                .binary_search_by_key(&key, |&(k, _)| k)
                .is_ok_and(|i| self.gone_before[i].1 == n);
            if unchanged {
                let raw = ks_net_key {
                    tgid: p.pid,
                    _pad: 0,
                    start_ns: p.start_ns,
                };
                let bytes = as_bytes(&raw);
                // A live process's storage is not in the map: nothing to delete.
                if self.skel.maps.exited.delete(bytes).is_ok() {
                    self.deleted += 1;
                    if p.uid != 0 {
                        self.free(p.uid);
                    }
                }
            } else {
                gone_now.push((key, n));
            }
        }
        gone_now.sort_unstable_by_key(|&(k, _)| k);
        self.gone_now = std::mem::replace(&mut self.gone_before, gone_now);
    }

    /// One more of `uid`'s entries deleted.
    fn free(&mut self, uid: u32) {
        let i = match self.freed.binary_search_by_key(&uid, |f| f.0) {
            Ok(i) => i,
            Err(i) => {
                self.freed.insert(i, (uid, 0));
                i
            }
        };
        self.freed[i].1 += 1;
        let map = &self.skel.maps.freed_for;
        let _ = map.update(
            &uid.to_ne_bytes(),
            &self.freed[i].1.to_ne_bytes(),
            MapFlags::ANY,
        );
    }

    /// Exited processes the map holds at most.
    pub fn capacity(&self) -> u64 {
        u64::from(self.skel.maps.exited.max_entries())
    }

    /// Exited processes the map held at the last read.
    pub fn exited_entries(&self) -> u64 {
        self.exited_entries
    }

    /// The loaded programs' names and fds (valid while `self` lives), for BPF run-time
    /// statistics.
    pub fn programs(&self) -> Vec<(String, RawFd)> {
        crate::loader::program_fds(self.skel.object())
    }
}

/// A live process's counters as an iterator wrote them: the key and counters that
/// begin a `struct ks_net_proc` (KS_NET_REC_LEN bytes).
pub(crate) fn live_record(rec: &[u8]) -> Option<NetProcSample> {
    if rec.len() < LIVE_RECORD {
        return None;
    }
    // SAFETY: length checked; plain old data in the generated layouts, the key first.
    let key: ks_net_key = unsafe { std::ptr::read_unaligned(rec.as_ptr().cast()) };
    let val = &rec[size_of::<ks_net_key>()..LIVE_RECORD];
    let (counters, comm, uid) = sum_cpus(val, 1, size_of::<ks_net_val>());
    Some(NetProcSample {
        pid: key.tgid,
        start_ns: key.start_ns,
        comm,
        uid,
        counters,
    })
}

/// Bytes of one live record (KS_NET_REC_LEN in bpf/net.h): a key and its counters, as
/// they begin a `struct ks_net_proc`.
pub(crate) const LIVE_RECORD: usize = size_of::<ks_net_key>() + size_of::<ks_net_val>();
const _: () = assert!(std::mem::offset_of!(ks_net_proc, val) == size_of::<ks_net_key>());

/// All sends' and receives' calls: counters only grow, so of two readings of one process
/// the one with more is the later.
fn calls(c: &NetCounters) -> u64 {
    c.rx_calls.iter().chain(c.tx_calls.iter()).sum()
}

/// Plain old data viewed as its bytes.
fn as_bytes<T>(v: &T) -> &[u8] {
    // SAFETY: any initialised value can be read as bytes for its exact size.
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), size_of::<T>()) }
}

/// One entry's counters summed over the CPUs' slots, its name and its owner (each
/// set on the slot of the CPU that first saw the process).
fn sum_cpus(v: &[u8], ncpus: usize, stride: usize) -> (NetCounters, Comm, u32) {
    let mut c = NetCounters::default();
    let mut comm = Comm::default();
    let mut uid = 0;
    for cpu in 0..ncpus {
        let at = cpu * stride;
        let Some(raw) = v.get(at..at + size_of::<ks_net_val>()) else {
            break;
        };
        // SAFETY: length checked; plain old data.
        let val: ks_net_val = unsafe { std::ptr::read_unaligned(raw.as_ptr().cast()) };
        for k in 0..4 {
            c.rx_bytes[k] += val.bytes[0][k];
            c.tx_bytes[k] += val.bytes[1][k];
            c.rx_calls[k] += val.calls[0][k];
            c.tx_calls[k] += val.calls[1][k];
        }
        if comm.is_empty() && val.comm[0] != 0 {
            // SAFETY: [i8; 16] and [u8; 16] have the same layout.
            let bytes: [u8; 16] = unsafe { std::mem::transmute(val.comm) };
            let end = bytes.iter().position(|&b| b == 0).unwrap_or(16);
            comm = Comm::from_bytes(&bytes[..end]);
        }
        uid = uid.max(val.uid);
    }
    (c, comm, uid)
}
