//! Surviving a snapshot file that shrinks under its mappings.
//!
//! A mapping of a file covers the file's pages; an access to a page past the file's end
//! (the owner truncated it, or a copy was cut) raises SIGBUS, whose default action
//! kills the process — every `watch`, `bar --daemon` and the daemon itself (shared/
//! security M3: `truncate -s 0 snapshot` killed all of them). Wayland compositors face
//! the same with client buffers and answer it the same way (libwayland's
//! `wl_shm_buffer_begin_access`): a SIGBUS handler that, when the faulting address lies
//! in one of our snapshot mappings, maps a page of zeros over it and returns, so the
//! access completes and reads zeros. Readers then see a layout that no longer checks
//! out (a zero magic, a moved generation) or are told by `faults()` to re-open; the
//! daemon rebuilds its file. A fault anywhere else goes to the handler that was there
//! before (Rust's stack-overflow report) or the default action, as if we were absent.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Once;

/// Mappings watched at once (a process maps one snapshot, two while it re-maps).
const SLOTS: usize = 16;

static STARTS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static LENS: [AtomicUsize; SLOTS] = [const { AtomicUsize::new(0) }; SLOTS];
static FAULTS: AtomicU64 = AtomicU64::new(0);
/// The page size, read once before the handler can run (sysconf is not
/// async-signal-safe).
static PAGE: AtomicUsize = AtomicUsize::new(4096);
static INSTALL: Once = Once::new();
/// The handler before ours (a `libc::sigaction` stored as bytes, read in the handler).
static mut PREVIOUS: Option<libc::sigaction> = None;

/// SIGBUS faults absorbed so far in this process: a reader that sees this move since it
/// mapped its file re-opens it.
pub fn faults() -> u64 {
    FAULTS.load(Ordering::Acquire)
}

/// Registers `[start, start + len)` as a snapshot mapping (installing the handler the
/// first time). Returns its slot for [`forget`]; None when every slot is taken (the
/// mapping then is not protected).
pub fn watch(start: usize, len: usize) -> Option<usize> {
    INSTALL.call_once(install);
    for (i, s) in STARTS.iter().enumerate() {
        if s.compare_exchange(0, start, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            LENS[i].store(len, Ordering::Release);
            return Some(i);
        }
    }
    None
}

/// Stops watching the mapping in `slot` (before it is unmapped).
pub fn forget(slot: usize) {
    LENS[slot].store(0, Ordering::Release);
    STARTS[slot].store(0, Ordering::Release);
}

fn install() {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    PAGE.store((page as usize).max(4096), Ordering::Release);
    // SAFETY: sigaction with a zeroed struct filled in; the previous action is kept
    // before any fault can reach the handler (the handler only reads it).
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = handler as *const () as usize;
        sa.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
        libc::sigemptyset(&mut sa.sa_mask);
        let mut old: libc::sigaction = std::mem::zeroed();
        if libc::sigaction(libc::SIGBUS, &sa, &mut old) == 0 {
            *std::ptr::addr_of_mut!(PREVIOUS) = Some(old);
        }
    }
}

/// Async-signal-safe: atomics, mmap and sigaction only.
extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    for i in 0..SLOTS {
        let start = STARTS[i].load(Ordering::Acquire);
        let len = LENS[i].load(Ordering::Acquire);
        if start != 0 && addr >= start && addr < start + len {
            let page = addr & !(page_size() - 1);
            // SAFETY: replaces one page of our own mapping with anonymous zeros.
            let p = unsafe {
                libc::mmap(
                    page as *mut libc::c_void,
                    page_size(),
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                    -1,
                    0,
                )
            };
            if p != libc::MAP_FAILED {
                FAULTS.fetch_add(1, Ordering::AcqRel);
                return;
            }
        }
    }
    // Not ours: as if this handler were not there.
    // SAFETY: PREVIOUS was written once before the handler was installed.
    let previous = unsafe { *std::ptr::addr_of!(PREVIOUS) };
    match previous {
        Some(old) if old.sa_sigaction != libc::SIG_DFL && old.sa_sigaction != libc::SIG_IGN => {
            if old.sa_flags & libc::SA_SIGINFO != 0 {
                // SAFETY: the previous handler was installed with SA_SIGINFO: this is
                // its signature.
                let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                    unsafe { std::mem::transmute(old.sa_sigaction) };
                f(sig, info, ctx);
            } else {
                // SAFETY: a plain handler's signature.
                let f: extern "C" fn(libc::c_int) =
                    unsafe { std::mem::transmute(old.sa_sigaction) };
                f(sig);
            }
        }
        _ => {
            // The default action: re-raised when the faulting access runs again.
            // SAFETY: resetting SIGBUS to its default.
            unsafe {
                let mut dfl: libc::sigaction = std::mem::zeroed();
                dfl.sa_sigaction = libc::SIG_DFL;
                libc::sigaction(libc::SIGBUS, &dfl, std::ptr::null_mut());
            }
        }
    }
}

fn page_size() -> usize {
    PAGE.load(Ordering::Acquire)
}
