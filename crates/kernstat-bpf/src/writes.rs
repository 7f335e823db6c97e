//! Write- and read-size tracing (bpf/writes.bpf.c): choose the attachment, set the
//! filters, load, attach, read the per-(process, syscall, kind) counters.
//!
//! The cheaper attachment, fexit on the syscall wrappers, is tried first; a kernel that
//! refuses BPF trampolines (EPERM: this project's CI kernel) gets the per-syscall
//! tracepoints instead, with tracefs mounted if it is not. The counters are cumulative;
//! callers take intervals by difference.

use std::io;
use std::mem::size_of;
use std::os::fd::RawFd;
use std::path::Path;

use libbpf_rs::skel::{OpenSkel, Skel};
use libbpf_rs::MapCore;

use kernstat_model::writes::{FileKind, SizeStats, Syscall, SIZE_SLOTS};

use crate::kernel::Attach;
use crate::loader::{load_skel, log_tail, LoadError};
use crate::skel::writes::types::{ks_wr_key, ks_wr_val};
use crate::skel::writes::{OpenWritesSkel, WritesSkel, WritesSkelBuilder};

// The model's slot count is the generated type's (bpf/writes.h), checked when this crate
// is built: a change to one side that misses the other does not compile.
// SAFETY: ks_wr_val is plain old data; all zeroes is a valid value.
const _: () = assert!(unsafe { std::mem::zeroed::<ks_wr_val>() }.asked.len() == SIZE_SLOTS);

/// Which family of syscalls.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Family {
    /// write, pwrite64, writev, pwritev(2), sendto, sendmsg.
    #[default]
    Writes,
    /// read, pread64, readv, preadv(2), recvfrom, recvmsg.
    Reads,
}

impl Family {
    fn syscalls(self) -> &'static [&'static str] {
        match self {
            Family::Writes => &[
                "write", "pwrite64", "writev", "pwritev", "pwritev2", "sendto", "sendmsg",
            ],
            Family::Reads => &[
                "read", "pread64", "readv", "preadv", "preadv2", "recvfrom", "recvmsg",
            ],
        }
    }
}

/// What to trace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// Only these processes (at most 8); empty: every process.
    pub pids: Vec<u32>,
    /// Only processes with this command name.
    pub comm: Option<String>,
    /// Writes or reads.
    pub family: Family,
    /// Use the syscall tracepoints even where fexit works (to test that path).
    pub force_tracepoints: bool,
}

/// The loaded tracer.
pub struct Writes {
    skel: WritesSkel<'static>,
    attach: Attach,
    family: Family,
}

impl std::fmt::Debug for Writes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Writes")
            .field("attach", &self.attach)
            .finish()
    }
}

fn ensure_tracefs() {
    let p = Path::new("/sys/kernel/tracing");
    if p.join("events").exists() {
        return;
    }
    // SAFETY: valid NUL-terminated strings; no data argument.
    unsafe {
        libc::mount(
            c"tracefs".as_ptr(),
            c"/sys/kernel/tracing".as_ptr(),
            c"tracefs".as_ptr(),
            0,
            std::ptr::null(),
        );
    }
}

fn open_and_load(cfg: &Config, attach: Attach) -> Result<WritesSkel<'static>, LoadError> {
    load_skel(WritesSkelBuilder::default(), "writes", |open| {
        configure(open, cfg, attach)
    })
}

/// Chooses the programs of `attach` for the family's syscalls and sets the filters.
fn configure(
    open: &mut OpenWritesSkel<'static>,
    cfg: &Config,
    attach: Attach,
) -> Result<(), LoadError> {
    let wanted = cfg.family.syscalls();
    for mut prog in open.open_object_mut().progs_mut() {
        let name = prog.name().to_string_lossy().into_owned();
        let (kind_ok, sys) = if let Some(s) = name.strip_prefix("fx_") {
            (attach == Attach::Fexit, s.to_string())
        } else if let Some(s) = name
            .strip_prefix("tp_enter_")
            .or(name.strip_prefix("tp_exit_"))
        {
            (attach == Attach::Tracepoints, s.to_string())
        } else {
            (false, String::new())
        };
        let load = kind_ok && wanted.contains(&sys.as_str());
        prog.set_autoload(load);
        if load && attach == Attach::Fexit {
            // The syscall wrapper of this architecture (bpf/arch.h reads its registers).
            let target = crate::kernel::syscall_function(&sys);
            prog.set_attach_target(0, Some(target))
                .map_err(|e| crate::loader::failed(format!("choosing the hook of {sys}"), e))?;
        }
    }
    let rodata = open
        .maps
        .rodata_data
        .as_deref_mut()
        .expect("writes has rodata");
    for (i, pid) in cfg.pids.iter().take(8).enumerate() {
        rodata.targ_pids[i] = *pid;
    }
    rodata.n_pids = cfg.pids.len().min(8) as u32;
    if let Some(c) = &cfg.comm {
        for (i, b) in c.bytes().take(15).enumerate() {
            rodata.targ_comm[i] = b as i8;
        }
        rodata.filter_comm = true;
    }
    rodata.self_tgid = std::process::id();
    Ok(())
}

impl Writes {
    /// Loads and attaches: fexit if the kernel allows it, else the syscall tracepoints.
    pub fn load(cfg: &Config) -> Result<Self, LoadError> {
        if !cfg.force_tracepoints {
            match open_and_load(cfg, Attach::Fexit) {
                Ok(skel) => {
                    return Ok(Writes {
                        skel,
                        attach: Attach::Fexit,
                        family: cfg.family,
                    })
                }
                Err(e) => {
                    if std::env::var_os("KERNSTAT_DEBUG").is_some() {
                        eprintln!(
                            "kernstat: fexit unavailable ({e}); using syscall tracepoints\n{}",
                            log_tail(4)
                        );
                    }
                }
            }
        }
        ensure_tracefs();
        let skel = open_and_load(cfg, Attach::Tracepoints)?;
        Ok(Writes {
            skel,
            attach: Attach::Tracepoints,
            family: cfg.family,
        })
    }

    /// Whether the kernel lets the fexit programs load and attach (BPF trampolines),
    /// trying nothing else: unlike [`Writes::load`] it never falls back to the syscall
    /// tracepoints, and so never mounts tracefs (`kernstat doctor` reports the system
    /// as it is and must not change it). The programs are detached on return.
    pub fn fexit_available(cfg: &Config) -> Result<(), LoadError> {
        open_and_load(cfg, Attach::Fexit).map(drop)
    }

    /// Which attachment is in use.
    pub fn attach(&self) -> Attach {
        self.attach
    }

    /// The family traced.
    pub fn family(&self) -> Family {
        self.family
    }

    /// Every counter, cumulative since load (batches of 256, to the map's end).
    pub fn read(&self) -> io::Result<Vec<SizeStats>> {
        let mut out = Vec::new();
        crate::batch::each_entry(&self.skel.maps.stats, 256, |k, v| {
            if k.len() < size_of::<ks_wr_key>() || v.len() < size_of::<ks_wr_val>() {
                return;
            }
            // SAFETY: lengths checked; plain old data in the generated layouts.
            let key: ks_wr_key = unsafe { std::ptr::read_unaligned(k.as_ptr().cast()) };
            let val: ks_wr_val = unsafe { std::ptr::read_unaligned(v.as_ptr().cast()) };
            let Some(sys) = Syscall::from_index(key.sys) else {
                return;
            };
            // SAFETY: [i8; 16] and [u8; 16] have the same layout.
            let comm: [u8; 16] = unsafe { std::mem::transmute(val.comm) };
            let end = comm.iter().position(|&b| b == 0).unwrap_or(16);
            let mut asked = [0u64; SIZE_SLOTS];
            let mut done = [0u64; SIZE_SLOTS];
            asked.copy_from_slice(&val.asked[..SIZE_SLOTS]);
            done.copy_from_slice(&val.done[..SIZE_SLOTS]);
            out.push(SizeStats {
                pid: key.tgid,
                comm: String::from_utf8_lossy(&comm[..end]).into_owned(),
                sys,
                kind: FileKind::from_index(key.kind),
                calls: val.calls,
                errors: val.errors,
                asked_bytes: val.asked_bytes,
                done_bytes: val.done_bytes,
                asked,
                done,
            });
        })?;
        out.sort_by_key(|s| (s.pid, s.sys, s.kind));
        Ok(out)
    }

    /// Entries the per-(process, syscall, kind) map holds at most.
    pub fn capacity(&self) -> u64 {
        u64::from(self.skel.maps.stats.max_entries())
    }

    /// Deletes the counters of processes for which `gone` says so (exited ones), so that
    /// a long-running reader does not fill the map; returns how many were deleted.
    pub fn forget(&self, gone: impl Fn(u32) -> bool) -> usize {
        let map = &self.skel.maps.stats;
        let doomed: Vec<Vec<u8>> = map
            .keys()
            .filter(|k| {
                k.len() >= size_of::<ks_wr_key>() && {
                    // SAFETY: length checked; plain old data.
                    let key: ks_wr_key = unsafe { std::ptr::read_unaligned(k.as_ptr().cast()) };
                    gone(key.tgid)
                }
            })
            .collect();
        doomed.iter().filter(|k| map.delete(k).is_ok()).count()
    }

    /// The loaded programs' names and fds (valid while `self` lives), for BPF run-time
    /// statistics.
    pub fn programs(&self) -> Vec<(String, RawFd)> {
        crate::loader::program_fds(self.skel.object())
    }
}
