//! Userspace half of bpf/walk.bpf.h: a task walk run by `BPF_PROG_RUN` over the kernel's
//! open-coded task iterator (6.7+), whose byte stream lands in a buffer this process has
//! mapped, instead of a task iterator's fd read with read(2).
//!
//! Both write the same stream, so a collector parses one format and takes it from
//! whichever ran. The run costs a fraction of the iterator (no fd to create and close, no
//! per-task pid lookup and reference, no copy through the seq_file: 30.5 -> 3.2 µs of
//! CPU at 68 tasks, 6.4-7.8 -> 1.9-2.5 ms at ~10,000, bpf/walk.bpf.h), so a collector runs
//! it first and reads its iterator only when the kernel has no such iterator or the
//! stream did not fit the buffer.

use libbpf_rs::{OpenMapMut, ProgramInput, ProgramMut};

use crate::loader::{failed, LoadError};

/// The program's return value when the kernel lacks the open-coded task iterator.
const UNSUPPORTED: i32 = 1;
/// The buffer is never smaller than this, nor larger than [`MAX_BUFFER`].
const MIN_BUFFER: usize = 64 * 1024;
/// 16 MiB: ~90,000 threads of ps records. The walk holds the RCU read lock throughout
/// (~0.5 µs a task): a machine beyond this reads the iterator, which lets go between reads.
const MAX_BUFFER: usize = 16 * 1024 * 1024;

/// The buffer size for a walk writing at most `per_task` bytes per task: room for twice
/// the tasks alive now (the `nr_threads` of /proc/loadavg), in whole pages. The kernel
/// allocates it when the map is created, so it follows the machine rather than a worst
/// case; a machine that outgrows it reads the iterator instead (still correct, slower).
pub fn buffer_size(per_task: usize) -> u32 {
    let tasks = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| threads_in_loadavg(&s))
        .unwrap_or(1024);
    let want = (tasks * 2).saturating_mul(per_task);
    let bytes = want.clamp(MIN_BUFFER, MAX_BUFFER).next_multiple_of(4096);
    bytes as u32
}

/// The task count of /proc/loadavg ("0.00 0.01 0.05 1/123 4567": the 123). Not the
/// `procs` of sysinfo(2), which the load averages come from (kernstat-sources): that is
/// an unsigned short, and wraps at 65,536 threads, where a buffer matters most.
fn threads_in_loadavg(s: &str) -> Option<usize> {
    let field = s.split_whitespace().nth(3)?;
    field.split_once('/')?.1.parse().ok()
}

/// Whether to load the walk programs at all: not where the kernel has no `syscall`
/// programs (before 5.14; the object would not load), nor with `KERNSTAT_WALK=iterator`
/// (to compare the two ways, and a way out should a kernel's open-coded iterator
/// misbehave). Between 5.14 and 6.6 they load and say they cannot run.
pub fn wanted() -> bool {
    std::env::var_os("KERNSTAT_WALK").is_none_or(|v| v != "iterator")
        && crate::kernel::syscall_programs()
}

/// Sizes the `.data.walk` datasec of an open object to `bytes`, and gives the program
/// the same number in its read-only `walk_cap`, which the verifier bounds every write
/// with.
pub fn size_buffer(
    map: &mut OpenMapMut<'_>,
    walk_cap: &mut u32,
    bytes: u32,
) -> Result<(), LoadError> {
    map.set_value_size(bytes)
        .map_err(|e| failed("sizing the walk buffer", e))?;
    *walk_cap = bytes;
    Ok(())
}

/// Runs one walk program. `Ok(false)`: this kernel cannot (no open-coded task iterator,
/// or BPF_PROG_RUN refused), and the caller should stop trying.
pub fn run(prog: &ProgramMut<'_>) -> bool {
    match prog.test_run(ProgramInput::default()) {
        Ok(out) => out.return_value as i32 != UNSUPPORTED,
        Err(_) => false,
    }
}

/// The stream a run left in `.data.walk`, whose mapping starts at `start` and is `cap`
/// bytes long (the size [`size_buffer`] gave it): its first `len` bytes, or None when
/// `full` (it did not fit). `len` and `full` are the program's `walk_len` and `walk_full`
/// in its mapped .bss.
///
/// # Safety
/// `start` must be the skeleton's view of the `.data.walk` mapping, sized to `cap`, and
/// `len` and `full` the same object's .bss variables.
pub unsafe fn stream<'a, T>(start: &'a T, cap: u32, len: &u32, full: &u32) -> Option<&'a [u8]> {
    // SAFETY: mapped memory the kernel wrote during the run, which has returned.
    let (len, full) = unsafe { (std::ptr::read_volatile(len), std::ptr::read_volatile(full)) };
    if full != 0 || len > cap {
        return None;
    }
    // SAFETY: the caller promises `cap` mapped bytes from `start`; len <= cap, and
    // nothing writes them while we read.
    Some(unsafe { std::slice::from_raw_parts((start as *const T).cast::<u8>(), len as usize) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_task_count_is_the_fourth_fields_denominator() {
        assert_eq!(threads_in_loadavg("0.18 0.09 0.03 1/123 456\n"), Some(123));
        assert_eq!(threads_in_loadavg("0.18 0.09 0.03"), None);
        assert_eq!(threads_in_loadavg("0.18 0.09 0.03 1-123 456"), None);
    }

    #[test]
    fn the_buffer_is_whole_pages_within_its_bounds() {
        let b = buffer_size(200) as usize;
        assert!((MIN_BUFFER..=MAX_BUFFER).contains(&b));
        assert_eq!(b % 4096, 0);
        assert_eq!(buffer_size(usize::MAX) as usize, MAX_BUFFER);
    }
}
