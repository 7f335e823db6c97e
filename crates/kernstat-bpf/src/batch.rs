//! Batched reads of a BPF hash map (`bpf_map_lookup_batch`), to the end of the map.
//!
//! Why not libbpf-rs's `lookup_batch`: its iterator takes a batch that comes back with
//! fewer entries than asked for as the last one. The kernel's hash map batch
//! (`__htab_map_lookup_and_delete_batch`) copies whole buckets, and when the next bucket
//! does not fit in what is left of the batch it returns early, short, without ENOENT:
//! every entry after that bucket was never read. Which readings that hits depends on the
//! map's random hash seed and its size, so it looked like a read that "sometimes comes
//! back short under load" (a process missing from the write-size panel for one refresh).
//! A read here ends only at ENOENT, and a bucket larger than the batch (ENOSPC) grows
//! the buffers instead of ending it. libbpf-rs also refuses batched reads of per-CPU
//! maps, which the network collector needs.

use std::io;
use std::mem::size_of;
use std::os::fd::AsRawFd;

use libbpf_rs::MapCore;

/// Buffers for batched reads of one map, kept between reads. A per-CPU map's value
/// arrives as one slot per possible CPU, each slot rounded up to 8 bytes (the kernel's
/// layout for per-CPU values); a plain map's as one slot.
pub(crate) struct Batch {
    /// Value slots per entry (possible CPUs for a per-CPU map, else 1).
    pub(crate) ncpus: usize,
    /// Bytes per value slot.
    pub(crate) stride: usize,
    key_size: usize,
    batch: usize,
    keys: Vec<u8>,
    values: Vec<u8>,
    /// Batches that came back short of `batch` before the map's end (tests).
    pub(crate) short_batches: u64,
}

impl Batch {
    /// Buffers for `batch` entries at a time.
    pub(crate) fn new(map: &impl MapCore, batch: usize, per_cpu: bool) -> Self {
        let ncpus = if per_cpu {
            libbpf_rs::num_possible_cpus().unwrap_or(1).max(1)
        } else {
            1
        };
        let stride = if per_cpu {
            (map.value_size() as usize).div_ceil(8) * 8
        } else {
            map.value_size() as usize
        };
        let mut b = Batch {
            ncpus,
            stride,
            key_size: map.key_size() as usize,
            batch: 0,
            keys: Vec::new(),
            values: Vec::new(),
            short_batches: 0,
        };
        b.resize(batch.max(1));
        b
    }

    fn resize(&mut self, batch: usize) {
        self.batch = batch;
        self.keys.resize(batch * self.key_size, 0);
        self.values.resize(batch * self.stride * self.ncpus, 0);
    }

    /// Calls `each(key, all CPUs' values)` for every entry.
    pub(crate) fn read(
        &mut self,
        map: &impl MapCore,
        mut each: impl FnMut(&[u8], &[u8]),
    ) -> io::Result<()> {
        let fd = map.as_fd().as_raw_fd();
        let value_len = self.stride * self.ncpus;
        let mut in_batch = [0u8; 8];
        let mut out_batch = [0u8; 8];
        let mut first = true;
        let opts = libbpf_sys::bpf_map_batch_opts {
            sz: size_of::<libbpf_sys::bpf_map_batch_opts>() as _,
            ..Default::default()
        };
        loop {
            let mut count = self.batch as u32;
            // SAFETY: keys and values hold `batch` entries of the map's key size and of
            // value size times CPUs; the batch tokens are 8 bytes (a hash bucket index).
            let rc = unsafe {
                libbpf_sys::bpf_map_lookup_batch(
                    fd,
                    if first {
                        std::ptr::null_mut()
                    } else {
                        in_batch.as_mut_ptr().cast()
                    },
                    out_batch.as_mut_ptr().cast(),
                    self.keys.as_mut_ptr().cast(),
                    self.values.as_mut_ptr().cast(),
                    &mut count,
                    &opts,
                )
            };
            let err = (rc < 0).then_some(-rc);
            match err {
                Some(libc::EINTR) => continue,
                // One bucket holds more entries than a batch: read it again, larger.
                Some(libc::ENOSPC) if self.batch < map.max_entries() as usize => {
                    self.resize(self.batch * 2);
                    continue;
                }
                Some(e) if e != libc::ENOENT => return Err(io::Error::from_raw_os_error(e)),
                _ => {}
            }
            let count = (count as usize).min(self.batch);
            for i in 0..count {
                each(
                    &self.keys[i * self.key_size..(i + 1) * self.key_size],
                    &self.values[i * value_len..(i + 1) * value_len],
                );
            }
            if err == Some(libc::ENOENT) {
                return Ok(());
            }
            if count < self.batch {
                self.short_batches += 1;
            }
            in_batch.copy_from_slice(&out_batch);
            first = false;
        }
    }
}

/// Every entry of a plain (not per-CPU) hash map, `batch` at a time.
pub(crate) fn each_entry(
    map: &impl MapCore,
    batch: usize,
    each: impl FnMut(&[u8], &[u8]),
) -> io::Result<()> {
    Batch::new(map, batch, false).read(map, each)
}

#[cfg(test)]
mod tests {
    use super::*;
    use libbpf_rs::{MapFlags, MapHandle, MapType};

    fn hash_map(entries: u32) -> MapHandle {
        let opts = libbpf_sys::bpf_map_create_opts {
            sz: size_of::<libbpf_sys::bpf_map_create_opts>() as _,
            ..Default::default()
        };
        let m = MapHandle::create(MapType::Hash, Some("ks_batch_test"), 4, 8, 8192, &opts)
            .expect("a hash map (needs root)");
        for k in 0..entries {
            let v = u64::from(k) * 3;
            m.update(&k.to_ne_bytes(), &v.to_ne_bytes(), MapFlags::ANY)
                .expect("update");
        }
        m
    }

    #[test]
    fn every_entry_is_read_across_batches_that_come_back_short() {
        if !kernstat_testkit::bpf_gate() {
            return;
        }
        // 3,000 keys in 8,192 buckets: about a third of the keys share their bucket, so
        // a batch of 16 often ends before a bucket of two that does not fit.
        let map = hash_map(3000);
        let mut seen = vec![0u32; 3000];
        let mut batch = Batch::new(&map, 16, false);
        batch
            .read(&map, |k, v| {
                let k = u32::from_ne_bytes(k.try_into().unwrap());
                assert_eq!(u64::from_ne_bytes(v.try_into().unwrap()), u64::from(k) * 3);
                seen[k as usize] += 1;
            })
            .unwrap();
        assert!(seen.iter().all(|&n| n == 1), "each key once");
        assert!(
            batch.short_batches > 0,
            "the case this reader is for (a short batch before the end) did not occur"
        );
        // A batch of one: a bucket of two does not fit at all (ENOSPC), so it grows.
        let mut n = 0;
        each_entry(&map, 1, |_, _| n += 1).unwrap();
        assert_eq!(n, 3000);
    }
}
