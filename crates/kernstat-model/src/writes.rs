//! Write-size (and read-size) statistics per process, syscall and file kind, and the
//! small-write verdict.
//!
//! A process has small-write syndrome when it makes many calls per second and most of
//! them move few bytes: each call costs a user/kernel round trip, so thousands of 25-byte
//! writes cost far more than the 16 writes of 8 KiB that carry the same data. The
//! thresholds are the caller's (flags of `kernstat writes`).

use std::collections::BTreeMap;

use serde::Serialize;

/// Number of log2 size slots (bpf/writes.h): slot 0 holds 0 and 1, slot k [2^k, 2^(k+1)).
pub const SIZE_SLOTS: usize = 34;

/// The syscall family member.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Syscall {
    /// write / read.
    Write,
    /// pwrite64 / pread64.
    Pwrite64,
    /// writev / readv.
    Writev,
    /// pwritev, pwritev2 / preadv, preadv2.
    Pwritev,
    /// sendto / recvfrom.
    Sendto,
    /// sendmsg / recvmsg.
    Sendmsg,
}

impl Syscall {
    /// From the BPF index (enum ks_wr_sys).
    pub fn from_index(i: u8) -> Option<Self> {
        Some(match i {
            0 => Syscall::Write,
            1 => Syscall::Pwrite64,
            2 => Syscall::Writev,
            3 => Syscall::Pwritev,
            4 => Syscall::Sendto,
            5 => Syscall::Sendmsg,
            _ => return None,
        })
    }

    /// The syscall's name in the write family or the read family.
    pub fn name(self, reads: bool) -> &'static str {
        match (self, reads) {
            (Syscall::Write, false) => "write",
            (Syscall::Pwrite64, false) => "pwrite64",
            (Syscall::Writev, false) => "writev",
            (Syscall::Pwritev, false) => "pwritev",
            (Syscall::Sendto, false) => "sendto",
            (Syscall::Sendmsg, false) => "sendmsg",
            (Syscall::Write, true) => "read",
            (Syscall::Pwrite64, true) => "pread64",
            (Syscall::Writev, true) => "readv",
            (Syscall::Pwritev, true) => "preadv",
            (Syscall::Sendto, true) => "recvfrom",
            (Syscall::Sendmsg, true) => "recvmsg",
        }
    }
}

/// What the file descriptor refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FileKind {
    /// A regular file.
    File,
    /// A pipe or FIFO.
    Pipe,
    /// A socket.
    Socket,
    /// A terminal.
    Tty,
    /// Anything else (other character devices, eventfds, ...).
    Other,
}

impl FileKind {
    /// From the BPF index (enum ks_wr_kind).
    pub fn from_index(i: u8) -> Self {
        match i {
            0 => FileKind::File,
            1 => FileKind::Pipe,
            2 => FileKind::Socket,
            3 => FileKind::Tty,
            _ => FileKind::Other,
        }
    }

    /// Its name, as JSON and labels spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            FileKind::File => "file",
            FileKind::Pipe => "pipe",
            FileKind::Socket => "socket",
            FileKind::Tty => "tty",
            FileKind::Other => "other",
        }
    }
}

/// Counters for one (process, syscall, file kind), cumulative or over an interval.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SizeStats {
    /// Process id.
    pub pid: u32,
    /// Command name.
    pub comm: String,
    /// Which syscall.
    pub sys: Syscall,
    /// Which kind of file.
    pub kind: FileKind,
    /// Calls.
    pub calls: u64,
    /// Calls that failed.
    pub errors: u64,
    /// Bytes asked for.
    pub asked_bytes: u64,
    /// Bytes moved.
    pub done_bytes: u64,
    /// Calls per log2 slot of the size asked.
    pub asked: [u64; SIZE_SLOTS],
    /// Calls per log2 slot of the size moved (successful calls).
    pub done: [u64; SIZE_SLOTS],
}

impl SizeStats {
    /// These counters minus an earlier reading of the same key.
    pub fn since(&self, earlier: &SizeStats) -> SizeStats {
        let mut d = self.clone();
        d.calls = self.calls.saturating_sub(earlier.calls);
        d.errors = self.errors.saturating_sub(earlier.errors);
        d.asked_bytes = self.asked_bytes.saturating_sub(earlier.asked_bytes);
        d.done_bytes = self.done_bytes.saturating_sub(earlier.done_bytes);
        for i in 0..SIZE_SLOTS {
            d.asked[i] = self.asked[i].saturating_sub(earlier.asked[i]);
            d.done[i] = self.done[i].saturating_sub(earlier.done[i]);
        }
        d
    }
}

/// The lower bound of size slot `i`.
pub fn slot_lo(i: usize) -> u64 {
    if i == 0 {
        0
    } else {
        1 << i
    }
}

/// The upper bound of size slot `i`.
pub fn slot_hi(i: usize) -> u64 {
    (1u64 << (i + 1)) - 1
}

/// When a process is said to have small-write syndrome.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Thresholds {
    /// A call moving fewer bytes than this is small.
    pub small_bytes: u64,
    /// ...and the process makes at least this many calls per second,
    pub min_rate: f64,
    /// ...of which at least this share are small.
    pub small_share: f64,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            small_bytes: 512,
            min_rate: 100.0,
            small_share: 0.8,
        }
    }
}

/// A process's figures over an interval, and what they mean.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Verdict {
    /// Process id.
    pub pid: u32,
    /// Command name.
    pub comm: String,
    /// Calls over the interval.
    pub calls: u64,
    /// Calls per second.
    pub calls_per_s: f64,
    /// Bytes moved per second.
    pub bytes_per_s: f64,
    /// Mean bytes per call.
    pub mean_bytes: f64,
    /// Share of calls asking for fewer than `small_bytes`.
    pub small_share: f64,
    /// True when the thresholds say small-write syndrome.
    pub small_writes: bool,
    /// What to do about it (empty when nothing).
    pub advice: String,
}

/// Judges one process from its per-(syscall, kind) stats over `seconds`.
pub fn judge(stats: &[&SizeStats], seconds: f64, t: &Thresholds, reads: bool) -> Option<Verdict> {
    let first = stats.first()?;
    let calls: u64 = stats.iter().map(|s| s.calls).sum();
    let bytes: u64 = stats.iter().map(|s| s.done_bytes).sum();
    // Slots wholly below the small threshold (a slot straddling it counts as not small).
    let small: u64 = stats
        .iter()
        .map(|s| {
            (0..SIZE_SLOTS)
                .filter(|&i| slot_hi(i) < t.small_bytes)
                .map(|i| s.asked[i])
                .sum::<u64>()
        })
        .sum();
    let secs = seconds.max(1e-9);
    let calls_per_s = calls as f64 / secs;
    let small_share = if calls == 0 {
        0.0
    } else {
        small as f64 / calls as f64
    };
    let small_writes = calls_per_s >= t.min_rate && small_share >= t.small_share;
    let mean = if calls == 0 {
        0.0
    } else {
        bytes as f64 / calls as f64
    };
    let what = if reads { "reads" } else { "writes" };
    let advice = if !small_writes {
        String::new()
    } else if stats.iter().any(|s| s.kind == FileKind::Tty) && !reads {
        format!(
            "{calls_per_s:.0} {what}/s averaging {mean:.0} bytes, {:.0}% under {} bytes: output to a terminal is \
             line-buffered; batch the lines (one write per screen update), or send bulk output to a file",
            small_share * 100.0,
            t.small_bytes
        )
    } else if reads {
        format!(
            "{calls_per_s:.0} reads/s averaging {mean:.0} bytes, {:.0}% under {} bytes: read through a buffer \
             (BufReader, fread) so that one syscall fetches many records",
            small_share * 100.0,
            t.small_bytes
        )
    } else {
        format!(
            "{calls_per_s:.0} writes/s averaging {mean:.0} bytes, {:.0}% under {} bytes: buffer the writes \
             (BufWriter, setvbuf) and do not flush after every record; each call costs a kernel round trip",
            small_share * 100.0,
            t.small_bytes
        )
    };
    Some(Verdict {
        pid: first.pid,
        comm: first.comm.clone(),
        calls,
        calls_per_s,
        bytes_per_s: bytes as f64 / secs,
        mean_bytes: mean,
        small_share,
        small_writes,
        advice,
    })
}

/// A process's verdict over an interval and its per-(syscall, kind) counters.
pub type ProcessReport = (Verdict, Vec<SizeStats>);

/// The kernel's cumulative counters turned into differences: each (process, syscall,
/// kind) key's increase since its previous reading (a key seen for the first time counts
/// from zero). Shared by `kernstat writes` and the daemon's write-size histograms.
#[derive(Clone, Debug, Default)]
pub struct Deltas {
    prev: BTreeMap<(u32, Syscall, FileKind), SizeStats>,
}

impl Deltas {
    /// The keys with calls since the previous reading, with their increases. A key
    /// missing from one reading keeps its previous one (only [`Deltas::retain`] forgets
    /// it, when its kernel entry is deleted): a reading that came back short must not
    /// make the next one count a key's whole history as one interval (seen in CI: 1,175
    /// write calls/s for a writer of 200, when libbpf-rs's batched read still ended at
    /// the first batch the kernel returned short: kernstat-bpf's `batch` module).
    pub fn next(&mut self, cur: Vec<SizeStats>) -> Vec<SizeStats> {
        let deltas = cur
            .iter()
            .map(|s| match self.prev.get(&(s.pid, s.sys, s.kind)) {
                Some(p) => s.since(p),
                None => s.clone(),
            })
            .filter(|d| d.calls > 0)
            .collect();
        for s in cur {
            self.prev.insert((s.pid, s.sys, s.kind), s);
        }
        deltas
    }

    /// Forgets the previous readings of processes `keep` rejects (their kernel entries
    /// were deleted: a reused key then counts from zero again).
    pub fn retain(&mut self, keep: impl Fn(u32) -> bool) {
        self.prev.retain(|k, _| keep(k.0));
    }
}

/// Turns the kernel's cumulative counters into interval reports.
#[derive(Clone, Debug, Default)]
pub struct Intervals {
    deltas: Deltas,
    /// Seconds since the first reading (the sum of the intervals given).
    clock: f64,
    /// Each key's clock at the last reading that had it: a key a reading missed has its
    /// next increase judged over the time since then, not over one interval (`top`'s
    /// writes panel showed 400 calls/s for a writer of 200 after a short reading).
    seen: BTreeMap<(u32, Syscall, FileKind), f64>,
}

impl Intervals {
    /// Forgets the previous readings of processes `keep` rejects (see [`Deltas::retain`]).
    pub fn retain(&mut self, keep: impl Fn(u32) -> bool) {
        self.deltas.retain(&keep);
        self.seen.retain(|k, _| keep(k.0));
    }

    /// The processes with calls since the previous reading, judged over `seconds`,
    /// busiest first (by calls, then pid), at most `top` of them.
    pub fn next(
        &mut self,
        cur: Vec<SizeStats>,
        seconds: f64,
        t: &Thresholds,
        reads: bool,
        top: usize,
    ) -> Vec<ProcessReport> {
        let last = self.clock;
        self.clock += seconds;
        let keys: Vec<_> = cur.iter().map(|s| (s.pid, s.sys, s.kind)).collect();
        // Each process's increases are judged over the longest time since one of its
        // keys was last read (one interval, unless a reading missed it).
        let mut by_pid: BTreeMap<u32, (f64, Vec<SizeStats>)> = BTreeMap::new();
        for d in self.deltas.next(cur) {
            let since = self
                .seen
                .get(&(d.pid, d.sys, d.kind))
                .copied()
                .unwrap_or(last);
            let entry = by_pid.entry(d.pid).or_insert((0.0, Vec::new()));
            entry.0 = entry.0.max(self.clock - since);
            entry.1.push(d);
        }
        for k in keys {
            self.seen.insert(k, self.clock);
        }
        let mut reports: Vec<ProcessReport> = by_pid
            .into_values()
            .filter_map(|(window, v)| {
                let refs: Vec<&SizeStats> = v.iter().collect();
                judge(&refs, window, t, reads).map(|j| (j, v))
            })
            .collect();
        reports.sort_by(|a, b| b.0.calls.cmp(&a.0.calls).then(a.0.pid.cmp(&b.0.pid)));
        reports.truncate(top);
        reports
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(kind: FileKind, sizes: &[(u64, u64)]) -> SizeStats {
        let mut s = SizeStats {
            pid: 7,
            comm: "w".into(),
            sys: Syscall::Write,
            kind,
            calls: 0,
            errors: 0,
            asked_bytes: 0,
            done_bytes: 0,
            asked: [0; SIZE_SLOTS],
            done: [0; SIZE_SLOTS],
        };
        for &(size, n) in sizes {
            let slot = if size < 2 {
                0
            } else {
                63 - size.leading_zeros() as usize
            };
            s.calls += n;
            s.asked_bytes += size * n;
            s.done_bytes += size * n;
            s.asked[slot] += n;
            s.done[slot] += n;
        }
        s
    }

    /// A reading that came back without a key (a short read) does not make the
    /// next count the key's whole history; a deleted entry (retain) counts from zero.
    #[test]
    fn a_key_missing_from_one_reading_keeps_its_baseline() {
        let mut d = Deltas::default();
        assert_eq!(
            d.next(vec![stats(FileKind::File, &[(64, 1000)])])[0].calls,
            1000
        );
        assert!(d.next(Vec::new()).is_empty());
        let after = d.next(vec![stats(FileKind::File, &[(64, 1200)])]);
        assert_eq!(after[0].calls, 200);
        d.retain(|pid| pid != 7);
        assert_eq!(d.next(vec![stats(FileKind::File, &[(64, 5)])])[0].calls, 5);
    }

    #[test]
    fn five_thousand_small_writes_are_small_write_syndrome() {
        let s = stats(FileKind::File, &[(25, 5000)]);
        let v = judge(&[&s], 1.0, &Thresholds::default(), false).unwrap();
        assert!(v.small_writes);
        assert!(v.advice.contains("buffer the writes"), "{}", v.advice);
        assert_eq!(v.small_share, 1.0);
    }

    #[test]
    fn eight_kib_blocks_are_healthy() {
        let s = stats(FileKind::File, &[(8192, 15), (2120, 1)]);
        let v = judge(&[&s], 1.0, &Thresholds::default(), false).unwrap();
        assert!(!v.small_writes);
        assert!(v.advice.is_empty());
    }

    #[test]
    fn a_slow_trickle_of_small_writes_is_not_a_problem() {
        let s = stats(FileKind::File, &[(25, 10)]);
        let v = judge(&[&s], 1.0, &Thresholds::default(), false).unwrap();
        assert!(!v.small_writes, "10 writes/s is below the rate threshold");
    }

    #[test]
    fn terminals_get_their_own_advice() {
        let s = stats(FileKind::Tty, &[(20, 1000)]);
        let v = judge(&[&s], 1.0, &Thresholds::default(), false).unwrap();
        assert!(v.advice.contains("terminal"), "{}", v.advice);
    }

    #[test]
    fn slot_bounds() {
        assert_eq!((slot_lo(0), slot_hi(0)), (0, 1));
        assert_eq!((slot_lo(4), slot_hi(4)), (16, 31));
        assert_eq!((slot_lo(13), slot_hi(13)), (8192, 16383));
    }

    #[test]
    fn intervals_report_differences_busiest_first() {
        let stats = |pid: u32, calls: u64| SizeStats {
            pid,
            comm: format!("p{pid}"),
            sys: Syscall::Write,
            kind: FileKind::from_index(0),
            calls,
            errors: 0,
            asked_bytes: calls * 10,
            done_bytes: calls * 10,
            asked: {
                let mut a = [0; SIZE_SLOTS];
                a[3] = calls;
                a
            },
            done: [0; SIZE_SLOTS],
        };
        let t = Thresholds::default();
        let mut iv = Intervals::default();
        let first = iv.next(vec![stats(1, 10), stats(2, 50)], 1.0, &t, false, 10);
        assert_eq!(
            first
                .iter()
                .map(|r| (r.0.pid, r.0.calls))
                .collect::<Vec<_>>(),
            [(2, 50), (1, 10)]
        );
        let second = iv.next(vec![stats(1, 110), stats(2, 50)], 1.0, &t, false, 10);
        assert_eq!(
            second.len(),
            1,
            "a process without calls in the interval is left out"
        );
        assert_eq!((second[0].0.pid, second[0].0.calls), (1, 100));
        assert_eq!(second[0].1[0].asked[3], 100);
        let third = iv.next(vec![stats(1, 120), stats(2, 80)], 1.0, &t, false, 1);
        assert_eq!(third.len(), 1, "top 1");
        assert_eq!(third[0].0.pid, 2);
        // A reading that misses process 1: its next increase spans two intervals and is
        // judged over both, not as twice the rate over one.
        iv.next(vec![stats(2, 90)], 1.0, &t, false, 10);
        let fifth = iv.next(vec![stats(1, 320), stats(2, 100)], 1.0, &t, false, 10);
        let rate = |pid: u32| {
            fifth
                .iter()
                .find(|r| r.0.pid == pid)
                .map(|r| (r.0.calls, r.0.calls_per_s))
        };
        assert_eq!(rate(1), Some((200, 100.0)));
        assert_eq!(rate(2), Some((10, 10.0)));
    }
}
