//! Processes that ended (bpf/exits.bpf.c): load, attach, and drain the ring buffer of
//! their final counters. The flight recorder keeps them, so that a process that lived
//! between two samples is still in the record.

use std::cell::RefCell;
use std::rc::Rc;

use libbpf_rs::skel::Skel;

use kernstat_model::exits::ExitedProcess;

use crate::loader::{load_skel, LoadError};
use crate::skel::exits::types::ks_exit;
use crate::skel::exits::{ExitsSkel, ExitsSkelBuilder};

/// The loaded hook and its ring buffer.
pub struct Exits {
    // Declared before `skel`: the ring buffer is freed first.
    ring: libbpf_rs::RingBuffer<'static>,
    drained: Rc<RefCell<Vec<ExitedProcess>>>,
    skel: ExitsSkel<'static>,
}

impl std::fmt::Debug for Exits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exits").finish_non_exhaustive()
    }
}

fn decode(bytes: &[u8], page_size: u64) -> Option<ExitedProcess> {
    if bytes.len() < std::mem::size_of::<ks_exit>() {
        return None;
    }
    // SAFETY: the ring buffer record is a ks_exit (the only type the program submits),
    // at least as long as one; read_unaligned copes with any alignment.
    let e: ks_exit = unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) };
    let comm = e
        .comm
        .iter()
        .take_while(|&&c| c != 0)
        .map(|&c| c as u8)
        .collect::<Vec<u8>>();
    Some(ExitedProcess {
        pid: e.tgid,
        ppid: e.ppid,
        uid: e.uid,
        comm: String::from_utf8_lossy(&comm).into_owned(),
        start_ns: e.start_ns,
        exit_ns: e.exit_ns,
        exit_unix_ns: 0,
        cpu_ns: e.cpu_ns,
        read_bytes: e.read_bytes,
        write_bytes: e.write_bytes,
        maxrss_bytes: e.maxrss_pages.saturating_mul(page_size),
        exit_code: e.exit_code,
        cmd: String::new(),
    })
}

impl Exits {
    /// Loads and attaches the exit hook.
    pub fn load() -> Result<Self, LoadError> {
        let skel: ExitsSkel<'static> = load_skel(ExitsSkelBuilder::default(), "exits", |open| {
            if let Some(inum) = crate::loader::reader_pid_namespace() {
                open.maps
                    .rodata_data
                    .as_deref_mut()
                    .expect("exits has rodata")
                    .reader_pidns_inum = inum;
            }
            Ok(())
        })?;
        let drained = Rc::new(RefCell::new(Vec::new()));
        let sink = Rc::clone(&drained);
        // SAFETY: sysconf has no memory preconditions.
        let page_size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
        let mut builder = libbpf_rs::RingBufferBuilder::new();
        builder
            .add(&skel.maps.exits, move |bytes: &[u8]| {
                if let Some(e) = decode(bytes, page_size) {
                    sink.borrow_mut().push(e);
                }
                0
            })
            .map_err(|e| crate::loader::failed("opening the exits ring buffer", e))?;
        let ring = builder
            .build()
            .map_err(|e| crate::loader::failed("opening the exits ring buffer", e))?;
        Ok(Exits {
            ring,
            drained,
            skel,
        })
    }

    /// Every process that ended since the last call, in the order they ended.
    pub fn drain(&mut self) -> std::io::Result<Vec<ExitedProcess>> {
        self.ring
            .consume()
            .map_err(|e| std::io::Error::other(format!("reading the exits ring buffer: {e}")))?;
        Ok(std::mem::take(&mut *self.drained.borrow_mut()))
    }

    /// Exits not recorded because the ring buffer was full.
    pub fn lost(&self) -> u64 {
        self.skel.maps.bss_data.as_deref().map_or(0, |b| b.lost)
    }

    /// The loaded program's name and fd, for BPF run-time statistics.
    pub fn program_fds(&self) -> Vec<(String, std::os::fd::RawFd)> {
        crate::loader::program_fds(self.skel.object())
    }
}
