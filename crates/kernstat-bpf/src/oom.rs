//! OOM kills (bpf/oom.bpf.c): the hook on `oom:mark_victim` in the form this kernel's
//! tracepoint has (kernel.rs reads its arity), and its ring buffer drained into raw
//! kills (userspace puts the groups' paths and the limit on them: kernstat-collect).

use std::cell::RefCell;
use std::os::fd::{AsFd, BorrowedFd};
use std::rc::Rc;

use crate::loader::{load_skel, LoadError};
use crate::skel::oom::types::ks_oom_event;
use crate::skel::oom::{OomSkel, OomSkelBuilder};

/// One kill as the hook saw it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawKill {
    /// When, CLOCK_BOOTTIME ns.
    pub boot_ns: u64,
    /// The victim (process id).
    pub pid: u32,
    /// Its uid.
    pub uid: u32,
    /// Its command name.
    pub comm: String,
    /// Resident set and virtual size at the kill, bytes (None: the older tracepoint).
    pub rss_bytes: Option<u64>,
    /// See `rss_bytes`.
    pub vm_bytes: Option<u64>,
    /// Its oom_score_adj (None: the older tracepoint).
    pub oom_score_adj: Option<i32>,
    /// Its memory cgroup's id (kernfs node id; None: unknown).
    pub memcg_id: Option<u64>,
    /// The task that invoked the killer.
    pub killer_pid: u32,
    /// Its command name.
    pub killer_comm: String,
}

/// The loaded hook.
pub struct Oom {
    ring: libbpf_rs::RingBuffer<'static>,
    drained: Rc<RefCell<Vec<RawKill>>>,
    skel: OomSkel<'static>,
    pid_only: bool,
}

impl std::fmt::Debug for Oom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Oom")
            .field("pid_only", &self.pid_only)
            .finish()
    }
}

fn text(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    kernstat_model::text::printable(&String::from_utf8_lossy(&b[..end])).into_owned()
}

fn decode(bytes: &[u8], page: u64) -> Option<RawKill> {
    if bytes.len() < std::mem::size_of::<ks_oom_event>() {
        return None;
    }
    // SAFETY: the ring buffer holds one ks_oom_event per record (checked size above);
    // read_unaligned copies it out whatever the record's alignment.
    let e: ks_oom_event = unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) };
    let full = e.pid_only == 0;
    let comm: Vec<u8> = e.comm.iter().map(|&c| c as u8).collect();
    let killer: Vec<u8> = e.killer_comm.iter().map(|&c| c as u8).collect();
    Some(RawKill {
        boot_ns: e.boot_ns,
        pid: e.pid,
        uid: e.uid,
        comm: text(&comm),
        rss_bytes: full.then(|| e.rss_pages.saturating_mul(page)),
        vm_bytes: full.then(|| e.total_vm_pages.saturating_mul(page)),
        oom_score_adj: full.then_some(e.oom_score_adj),
        memcg_id: (e.memcg_id != 0).then_some(e.memcg_id),
        killer_pid: e.killer_pid,
        killer_comm: text(&killer),
    })
}

impl Oom {
    /// Loads and attaches the hook (the tracepoint's new form where the kernel has it).
    pub fn load() -> Result<Self, LoadError> {
        let f = crate::kernel::features();
        let full = f.tp_btf && f.tracepoint_arity("mark_victim").is_some_and(|n| n >= 2);
        let skel = load_skel(OomSkelBuilder::default(), "oom", |open| {
            open.progs.oom_victim.set_autoload(full);
            open.progs.oom_victim_pid.set_autoload(!full);
            Ok(())
        })?;
        let drained = Rc::new(RefCell::new(Vec::new()));
        let sink = Rc::clone(&drained);
        // SAFETY: sysconf has no memory preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
        let mut builder = libbpf_rs::RingBufferBuilder::new();
        builder
            .add(&skel.maps.events, move |bytes: &[u8]| {
                if let Some(k) = decode(bytes, page) {
                    sink.borrow_mut().push(k);
                }
                0
            })
            .map_err(|e| crate::loader::failed("opening the oom ring buffer", e))?;
        let ring = builder
            .build()
            .map_err(|e| crate::loader::failed("opening the oom ring buffer", e))?;
        Ok(Oom {
            ring,
            drained,
            skel,
            pid_only: !full,
        })
    }

    /// Every kill since the last call.
    pub fn drain(&mut self) -> std::io::Result<Vec<RawKill>> {
        self.ring
            .consume()
            .map_err(|e| std::io::Error::other(format!("reading the oom ring buffer: {e}")))?;
        Ok(std::mem::take(&mut *self.drained.borrow_mut()))
    }

    /// The ring buffer's descriptor, to wait on (epoll) for a kill.
    pub fn ring_fd(&self) -> i32 {
        self.ring.epoll_fd()
    }

    /// The attached program (for BPF run-time statistics).
    pub fn programs(&self) -> Vec<(&'static str, BorrowedFd<'_>)> {
        let p = &self.skel.progs;
        vec![(
            "mark_victim",
            if self.pid_only {
                p.oom_victim_pid.as_fd()
            } else {
                p.oom_victim.as_fd()
            },
        )]
    }
}
