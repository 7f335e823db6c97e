//! The BPF sampler behind `kernstat bar` and `snapshot`: loads bpf/sampler.bpf.c, and on
//! each sample reads every process with one walk of the task iterator.
//!
//! One sample is one run of `sample_run` by BPF_PROG_RUN (6.7+: the open-coded task
//! iterator writes the records into a mapped buffer, walk.rs), or, where that cannot run
//! or its records did not fit: create an iterator fd from the kept link, read(2) it into
//! a kept buffer until EOF (one read holds ~500 processes; the kernel never splits a
//! record across reads), close it. Both then read the walk summary from the program's
//! mmap-ed .bss. Nothing is allocated once the buffers have grown to the machine's size.

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
    /// Whether `sample_run` works here (cleared for good the first time it cannot run).
    run: bool,
    /// The size of its buffer (`.data.walk`).
    walk_cap: u32,
    /// Walks that fell back to the iterator because the buffer was too small.
    overflows: u64,
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
        Self::load_sized(crate::walk::buffer_size(RECORD_BOUND))
    }

    /// [`Sampler::load`] with a walk buffer of `walk_cap` bytes (a multiple of the page
    /// size, at least 4096) instead of one sized for the machine: for tests of a walk
    /// that does not fit.
    #[doc(hidden)]
    pub fn load_sized(walk_cap: u32) -> Result<Self, LoadError> {
        let run = crate::walk::wanted();
        let skel = load_skel(SamplerSkelBuilder::default(), "the sampler", |open| {
            open.progs.sample_run.set_autoload(run);
            let rodata = open
                .maps
                .rodata_data
                .as_deref_mut()
                .expect("the sampler has rodata");
            if run {
                crate::walk::size_buffer(&mut open.maps.data_walk, &mut rodata.walk_cap, walk_cap)?;
            }
            if let Some(inum) = crate::loader::reader_pid_namespace() {
                rodata.reader_pidns_inum = inum;
            }
            Ok(())
        })?;
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let mut s = Sampler {
            skel,
            run,
            walk_cap,
            overflows: 0,
            buf: Vec::new(),
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
        let ran = self.run && crate::walk::run(&self.skel.progs.sample_run);
        if self.run && !ran {
            self.run = false;
        }
        let mut stream = None;
        if ran {
            let maps = &self.skel.maps;
            let bss = maps.bss_data.as_deref().expect("the sampler has a .bss");
            let start = maps
                .data_walk_data
                .as_deref()
                .expect("the sampler has a .data.walk");
            // SAFETY: this object's .data.walk, sized to walk_cap at load, and its .bss.
            stream =
                unsafe { crate::walk::stream(start, self.walk_cap, &bss.walk_len, &bss.walk_full) };
            if stream.is_none() {
                // The buffer cannot grow without a reload that would lose the busy-time
                // credit: this machine outgrew it, and is read by the iterator from now.
                self.overflows += 1;
                self.run = false;
            }
        }
        let bytes = match stream {
            Some(bytes) => bytes,
            None => {
                if self.buf.is_empty() {
                    self.buf.resize(256 * 1024, 0);
                }
                let link = self
                    .skel
                    .links
                    .sample_tasks
                    .as_ref()
                    .expect("attach() created the iterator link");
                let len = crate::loader::read_iterator(link, &mut self.buf)?;
                &self.buf[..len]
            }
        };
        table.clear();
        self.net.clear();
        let partial = parse_walk(bytes, table, &mut self.net, self.page_size)?;
        table.finish();
        let mut s = self.summary();
        s.partial_procs = partial;
        table.tasks = s.tasks;
        table.running = s.running;
        table.blocked = s.blocked;
        Ok(s)
    }

    /// Whether samples run `sample_run` (where it was loaded and this kernel can) or read
    /// the iterator: for comparing the two.
    pub fn set_run(&mut self, on: bool) {
        self.run = on && crate::walk::wanted();
    }

    /// How walks run here: "run" (BPF_PROG_RUN over the open-coded task iterator) or
    /// "iterator" (read(2) of the task iterator), and how many runs did not fit their
    /// buffer and read the iterator instead.
    pub fn walk_mode(&self) -> (&'static str, u64) {
        (if self.run { "run" } else { "iterator" }, self.overflows)
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

    /// The walk programs, the iterator's and the run's (for benchmarks that separate
    /// kernel-side cost); both run inside this process's own system calls.
    pub fn walk_programs(&self) -> [BorrowedFd<'_>; 2] {
        [
            self.skel.progs.sample_tasks.as_fd(),
            self.skel.progs.sample_run.as_fd(),
        ]
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

/// The most one process can add to the stream: its record and its network counters.
const RECORD_BOUND: usize = size_of::<ks_proc_rec>() + NET_HEADER + crate::net::LIVE_RECORD;

/// Parses one walk's stream into `table` and `net`; returns how many processes were
/// partial (more threads than the walk adds up).
fn parse_walk(
    bytes: &[u8],
    table: &mut TaskTable,
    net: &mut Vec<NetProcSample>,
    page_size: u64,
) -> Result<u64, libbpf_rs::Error> {
    let len = bytes.len();
    let mut partial = 0;
    let mut off = 0;
    while off < len {
        match bytes[off] {
            REC_PROC if off + size_of::<ks_proc_rec>() <= len => {
                // SAFETY: the range is in bounds; the record is plain old data written by
                // the kernel with the layout of the generated type.
                let r: ks_proc_rec = unsafe { ptr::read_unaligned(bytes[off..].as_ptr().cast()) };
                partial += (r.flags & FLAG_PARTIAL != 0) as u64;
                table.procs.push(proc_sample(&r, page_size));
                off += size_of::<ks_proc_rec>();
            }
            REC_NET if off + NET_HEADER + crate::net::LIVE_RECORD <= len => {
                let at = off + NET_HEADER;
                net.extend(crate::net::live_record(
                    &bytes[at..at + crate::net::LIVE_RECORD],
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
    Ok(partial)
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
