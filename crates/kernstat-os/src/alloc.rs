//! A global allocator that counts allocations, so `--bench` can report (and tests can
//! assert) that the sampling loop's steady state allocates nothing. One relaxed atomic
//! increment per allocation; the system allocator does the work.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicU64, Ordering};

/// Counts calls to alloc, alloc_zeroed and realloc.
pub struct CountingAlloc;

static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

// SAFETY: every method forwards to the system allocator unchanged.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

/// Allocations so far (in this process, from Rust code).
pub fn allocations() -> u64 {
    ALLOCATIONS.load(Ordering::Relaxed)
}

/// Fixes glibc's malloc thresholds in a process that runs for months (daemon, bar, top),
/// so that memory freed after a burst of processes goes back to the kernel: blocks of
/// `mmap_threshold` bytes or more are mapped and unmapped, and free memory over 256 KiB
/// at a heap's top is returned. The one place kernstat tunes its allocator.
///
/// glibc raises its mmap threshold to the size of the largest mmapped block freed (up to
/// 32 MiB) and its trim threshold to twice that. Loading the BPF programs frees libbpf's
/// parse of the kernel's BTF (blocks of up to 16.7 MB on this 6.18 kernel: `malloc_stats`
/// "max mmap bytes"), so from then on glibc kept up to ~34 MB of freed heap rather than
/// return it. Measured on the daemon (`--interval 1s --metrics --collect
/// runqlat,writes`, release): 3,000 processes started, held 10 s and gone left RssAnon
/// 4.6 MiB above its baseline, 2.5 MiB of it free memory that `malloc_trim` returned;
/// with these two settings (either one turns the dynamic rule off; a 1 MiB mmap
/// threshold there) the same burst leaves 1.7 MiB (the tables sized for the most processes seen).
/// Repeated bursts of the same size add nothing more either way (16 KiB in 7).
pub fn return_freed_memory(mmap_threshold: i32) {
    // SAFETY: mallopt only changes the allocator's tuning; called before other threads.
    #[cfg(target_env = "gnu")]
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, mmap_threshold);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 256 << 10);
    }
}
