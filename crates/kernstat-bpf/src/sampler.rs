//! The BPF sampler behind `kernstat bar` and `snapshot`: loads bpf/sampler.bpf.c, and on
//! each sample reads every process with one walk of the task iterator.
//!
//! One sample is: create an iterator fd from the kept link, read(2) it into a kept buffer
//! until EOF (one read holds ~500 processes; the kernel never splits a record across
//! reads), close it, and read the walk summary from the program's mmap-ed .bss. Nothing
//! is allocated once the buffers have grown to the machine's size.

use std::mem::size_of;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::ptr;

use libbpf_rs::Link;

use kernstat_model::net::NetProcSample;
use kernstat_model::{Comm, ProcSample, TaskTable};

use crate::loader::{failed, load_skel, LoadError};
use crate::skel::sampler::types::{ks_proc_flags, ks_proc_rec, ks_rec_kind, ks_walk_summary};
use crate::skel::sampler::{SamplerSkel, SamplerSkelBuilder};

const REC_PROC: u8 = ks_rec_kind::KS_REC_PROC.0 as u8;
const REC_NET: u8 = ks_rec_kind::KS_REC_NET.0 as u8;
/// The network record's header: its kind, then zeroes.
const NET_HEADER: usize = 8;
const FLAG_KTHREAD: u8 = ks_proc_flags::KS_PROC_KTHREAD.0 as u8;
const FLAG_PARTIAL: u8 = ks_proc_flags::KS_PROC_PARTIAL.0 as u8;
const FLAG_D_THREAD: u8 = ks_proc_flags::KS_PROC_D_THREAD.0 as u8;

/// Totals of one walk, from the program's .bss.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WalkSummary {
    /// Completed walks since load (strictly increases with every sample).
    pub walks: u64,
    /// CLOCK_MONOTONIC ns at the end of the walk.
    pub ktime_ns: u64,
    /// All CPU time credited to tasks since load (plus tasks' time before it), ns.
    pub busy_ns: u64,
    /// Tasks (threads) visited.
    pub tasks: u64,
    /// Processes visited.
    pub procs: u64,
    /// Tasks in R.
    pub running: u64,
    /// Tasks in D.
    pub blocked: u64,
    /// Processes in Z.
    pub zombies: u64,
    /// Tasks the kernel could not give task-local storage (memory pressure): their time
    /// since then is missing from `busy_ns`.
    pub storage_failures: u64,
    /// Processes with more threads than the walk adds up (lower-bound counters).
    pub partial_procs: u64,
}

/// The loaded and attached sampler.
pub struct Sampler {
    skel: SamplerSkel<'static>,
    buf: Vec<u8>,
    page_size: u64,
    /// The live processes' network counters the last walk wrote (when net.bpf.c shares
    /// this sampler's storage), its buffer kept.
    net: Vec<NetProcSample>,
}

impl std::fmt::Debug for Sampler {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sampler").finish_non_exhaustive()
    }
}

impl Sampler {
    /// Loads, verifies and attaches the sampler, and walks once so that every task alive
    /// now has its runtime credited: the first sample's busy time then starts from here.
    pub fn load() -> Result<Self, LoadError> {
        let skel = load_skel(SamplerSkelBuilder::default(), "the sampler", |open| {
            if let Some(inum) = crate::loader::reader_pid_namespace() {
                let rodata = open
                    .maps
                    .rodata_data
                    .as_deref_mut()
                    .expect("the sampler has rodata");
                rodata.reader_pidns_inum = inum;
            }
            Ok(())
        })?;
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let mut s = Sampler {
            skel,
            buf: vec![0; 256 * 1024],
            page_size: if page > 0 { page as u64 } else { 4096 },
            net: Vec::new(),
        };
        let mut warm = TaskTable::default();
        s.sample(&mut warm)
            .map_err(|e| failed("reading the task iterator", e))?;
        Ok(s)
    }

    fn link(&self) -> &Link {
        self.skel
            .links
            .sample_tasks
            .as_ref()
            .expect("attach() created the iterator link")
    }

    /// Reads every process into `table` (cleared, then sorted by pid).
    pub fn sample(&mut self, table: &mut TaskTable) -> Result<WalkSummary, libbpf_rs::Error> {
        let len = self.read_walk()?;
        table.clear();
        self.net.clear();
        let mut partial = 0;
        let mut off = 0;
        while off < len {
            match self.buf[off] {
                REC_PROC if off + size_of::<ks_proc_rec>() <= len => {
                    // SAFETY: the range is in bounds; the record is plain old data written
                    // by the kernel with the layout of the generated type.
                    let r: ks_proc_rec =
                        unsafe { ptr::read_unaligned(self.buf[off..].as_ptr().cast()) };
                    partial += (r.flags & FLAG_PARTIAL != 0) as u64;
                    table.procs.push(proc_sample(&r, self.page_size));
                    off += size_of::<ks_proc_rec>();
                }
                REC_NET if off + NET_HEADER + crate::net::LIVE_RECORD <= len => {
                    let at = off + NET_HEADER;
                    self.net.extend(crate::net::live_record(
                        &self.buf[at..at + crate::net::LIVE_RECORD],
                    ));
                    off = at + crate::net::LIVE_RECORD;
                }
                other => {
                    return Err(libbpf_rs::Error::from(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!("unknown sampler record kind {other} at offset {off} of {len}"),
                    )))
                }
            }
        }
        table.finish();
        let mut s = self.summary();
        s.partial_procs = partial;
        table.tasks = s.tasks;
        table.running = s.running;
        table.blocked = s.blocked;
        Ok(s)
    }

    /// Runs one walk, leaving its records in `self.buf`; returns their length.
    fn read_walk(&mut self) -> Result<usize, libbpf_rs::Error> {
        let link = self
            .skel
            .links
            .sample_tasks
            .as_ref()
            .expect("attach() created the iterator link");
        Ok(crate::loader::read_iterator(link, &mut self.buf)?)
    }

    fn summary(&self) -> WalkSummary {
        let bss = self
            .skel
            .maps
            .bss_data
            .as_deref()
            .expect("the sampler has a .bss");
        // SAFETY: the .bss is mmap-ed memory the kernel writes; read it as a volatile copy.
        let s: ks_walk_summary = unsafe { ptr::read_volatile(&bss.summary) };
        WalkSummary {
            walks: s.walks,
            ktime_ns: s.ktime_ns,
            busy_ns: s.busy_ns,
            tasks: s.tasks,
            procs: s.procs,
            running: s.running,
            blocked: s.blocked,
            zombies: s.zombies,
            storage_failures: s.storage_failures,
            partial_procs: 0,
        }
    }

    /// The programs that run in other tasks' context (the exit and free hooks), whose
    /// run time the kernel's BPF statistics can report. The iterator program runs inside
    /// our own read(2) and is already part of this process's CPU time.
    pub fn hook_programs(&self) -> [BorrowedFd<'_>; 2] {
        [
            self.skel.progs.sample_exit.as_fd(),
            self.skel.progs.sample_free.as_fd(),
        ]
    }

    /// The iterator program (for benchmarks that separate kernel-side cost).
    pub fn iterator_program(&self) -> BorrowedFd<'_> {
        self.skel.progs.sample_tasks.as_fd()
    }

    /// The task-local storage the walk reads network counters from, for
    /// [`crate::net::Net::load_with`]; the walk reads it once [`Sampler::read_net`]
    /// says so.
    pub fn net_storage(&self) -> BorrowedFd<'_> {
        self.skel.maps.net_live.as_fd()
    }

    /// Whether the walk writes the network counters (a `Net` shares the storage and
    /// they are shown): otherwise it looks up no storage for them.
    pub fn read_net(&mut self, on: bool) {
        if let Some(bss) = self.skel.maps.bss_data.as_deref_mut() {
            bss.net_shared = u32::from(on);
        }
        if !on {
            self.net.clear();
        }
    }

    /// The live processes' network counters the last walk read (empty unless a `Net`
    /// shares [`Sampler::net_storage`]).
    pub fn net_records(&self) -> &[NetProcSample] {
        &self.net
    }

    /// Raw fd of the iterator link (for tests).
    pub fn link_fd(&self) -> i32 {
        self.link().as_fd().as_raw_fd()
    }
}

fn proc_sample(r: &ks_proc_rec, page_size: u64) -> ProcSample {
    // SAFETY: [i8; 16] and [u8; 16] have the same layout.
    let comm: [u8; 16] = unsafe { std::mem::transmute(r.comm) };
    ProcSample {
        pid: r.tgid,
        start: r.start_ns,
        cpu_ns: r.cpu_ns,
        read_bytes: r.read_bytes,
        write_bytes: r.write_bytes,
        rss_bytes: r.rss_pages * page_size,
        state: r.state,
        has_d_thread: r.flags & FLAG_D_THREAD != 0,
        kthread: r.flags & FLAG_KTHREAD != 0,
        comm: Comm::from_bytes(&comm),
        uid: r.uid,
        euid: r.euid,
        ppid: r.ppid,
        children_cpu_ns: r.children_cpu_ns,
        run_delay_ns: r.run_delay_ns,
    }
}
