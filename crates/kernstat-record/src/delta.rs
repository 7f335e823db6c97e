//! Delta frames keep their counters as differences from the frame before: an idle
//! process's counters are then all zero, so its record is the same bytes as in the
//! frame before, and zstd (which compresses each delta frame with the previous frame's
//! bytes as its prefix) stores it as one match. Measured at 74 quiet processes, 5 s
//! apart: 1.5 KB a frame with the counters themselves (a changed varint breaks every
//! match around it), N with their differences (docs/measured.md).
//!
//! The same entity is found in the frame before by its identity (a process by pid and
//! start time, a group by id, a CPU, an interface or a disk by position and name); a new
//! one keeps its counters. A difference is taken with wrapping arithmetic and stored
//! zigzag-encoded, so that a gauge that went down (memory) stays small and every value
//! comes back exactly, whatever it was.

use crate::frame::{Frame, Group, Proc};

fn zigzag(d: u64) -> u64 {
    let d = d as i64;
    ((d << 1) ^ (d >> 63)) as u64
}

fn unzigzag(z: u64) -> u64 {
    ((z >> 1) as i64 ^ -((z & 1) as i64)) as u64
}

/// Which way a frame is being turned.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    /// Full counters into differences.
    Encode,
    /// Differences back into full counters.
    Decode,
}

impl Way {
    fn apply(self, x: &mut u64, before: u64) {
        *x = match self {
            Way::Encode => zigzag(x.wrapping_sub(before)),
            Way::Decode => before.wrapping_add(unzigzag(*x)),
        }
    }

    fn opt(self, x: &mut Option<u64>, before: Option<u64>) {
        if let (Some(x), Some(b)) = (x.as_mut(), before) {
            self.apply(x, b);
        }
    }

    fn all<const N: usize>(self, x: &mut [u64; N], before: &[u64; N]) {
        for (x, b) in x.iter_mut().zip(before) {
            self.apply(x, *b);
        }
    }

    fn slots(self, x: &mut [u64], before: &[u64]) {
        if x.len() == before.len() {
            for (x, b) in x.iter_mut().zip(before) {
                self.apply(x, *b);
            }
        }
    }
}

/// What the first delta after a key frame is compressed against (as writer and reader
/// both make it): the key frame's differences from itself, every counter zero, which is
/// what an idle process's record looks like in a delta.
pub fn template(key: &Frame) -> Vec<u8> {
    let mut t = encode(key, key);
    pack_ended(&mut t);
    postcard::to_stdvec(&t).unwrap_or_default()
}

/// `cur` with its counters as differences from `prev`'s.
pub fn encode(cur: &Frame, prev: &Frame) -> Frame {
    let mut f = cur.clone();
    turn(&mut f, prev, Way::Encode);
    f
}

/// A delta frame's counters back as full counters, given the frame before it (full).
pub fn decode(mut delta: Frame, prev: &Frame) -> Frame {
    turn(&mut delta, prev, Way::Decode);
    delta
}

fn proc(w: Way, p: &mut Proc, b: &Proc) {
    w.apply(&mut p.cpu_ns, b.cpu_ns);
    w.apply(&mut p.children_cpu_ns, b.children_cpu_ns);
    w.apply(&mut p.run_delay_ns, b.run_delay_ns);
    w.apply(&mut p.read_bytes, b.read_bytes);
    w.apply(&mut p.write_bytes, b.write_bytes);
    w.apply(&mut p.rss_bytes, b.rss_bytes);
    w.apply(&mut p.vsz_bytes, b.vsz_bytes);
    w.apply(&mut p.minflt, b.minflt);
    w.apply(&mut p.majflt, b.majflt);
    if let (Some(n), Some(bn)) = (p.net.as_mut(), b.net.as_ref()) {
        w.all(&mut n[0], &bn[0]);
        w.all(&mut n[1], &bn[1]);
    }
}

fn group(w: Way, g: &mut Group, b: &Group) {
    w.apply(&mut g.read_ns, b.read_ns);
    w.apply(&mut g.cpu_usage_us, b.cpu_usage_us);
    w.apply(&mut g.cpu_user_us, b.cpu_user_us);
    w.apply(&mut g.cpu_system_us, b.cpu_system_us);
    w.opt(&mut g.periods, b.periods);
    w.opt(&mut g.throttled_periods, b.throttled_periods);
    w.opt(&mut g.throttled_us, b.throttled_us);
    w.opt(&mut g.mem_current, b.mem_current);
    if let (Some(io), Some(bio)) = (g.io.as_mut(), b.io.as_ref()) {
        for (d, bd) in io.iter_mut().zip(bio) {
            if (d.major, d.minor) == (bd.major, bd.minor) {
                w.apply(&mut d.rbytes, bd.rbytes);
                w.apply(&mut d.wbytes, bd.wbytes);
                w.apply(&mut d.rios, bd.rios);
                w.apply(&mut d.wios, bd.wios);
            }
        }
    }
    for (p, bp) in g.psi.iter_mut().zip(&b.psi) {
        if let (Some(p), Some(bp)) = (p.as_mut(), bp) {
            w.apply(&mut p.total_us, bp.total_us);
        }
    }
}

fn turn(f: &mut Frame, prev: &Frame, w: Way) {
    // Processes, both lists sorted by pid: the same pid and start is the same process.
    let mut i = 0;
    for p in f.procs.iter_mut() {
        while i < prev.procs.len() && prev.procs[i].pid < p.pid {
            i += 1;
        }
        if let Some(b) = prev.procs[i..]
            .iter()
            .take_while(|b| b.pid == p.pid)
            .find(|b| b.start_ns == p.start_ns)
        {
            proc(w, p, b);
        }
    }
    // Groups by id (parents-first order, not sorted by id: looked up).
    if !f.groups.is_empty() && !prev.groups.is_empty() {
        let by_id: std::collections::HashMap<u64, &Group> =
            prev.groups.iter().map(|g| (g.id, g)).collect();
        for g in f.groups.iter_mut() {
            if let Some(b) = by_id.get(&g.id).filter(|b| b.path == g.path) {
                group(w, g, b);
            }
        }
    }
    let (m, b) = (&mut f.machine, &prev.machine);
    w.apply(&mut m.mono_ns, b.mono_ns);
    w.apply(&mut m.busy_ns, b.busy_ns);
    if m.cores.len() == b.cores.len() {
        for (c, bc) in m.cores.iter_mut().zip(&b.cores) {
            w.apply(&mut c.busy_ns, bc.busy_ns);
            w.apply(&mut c.total_ns, bc.total_ns);
            w.apply(&mut c.steal_ns, bc.steal_ns);
            w.apply(&mut c.irq_ns, bc.irq_ns);
        }
    }
    w.apply(&mut m.swap_in_pages, b.swap_in_pages);
    w.apply(&mut m.swap_out_pages, b.swap_out_pages);
    for (p, bp) in m.psi.iter_mut().zip(&b.psi) {
        if let (Some(p), Some(bp)) = (p.as_mut(), bp) {
            w.apply(&mut p.total_us, bp.total_us);
        }
    }
    if let (Some(s), Some(bs)) = (m.socket_bytes.as_mut(), b.socket_bytes.as_ref()) {
        w.all(&mut s[0], &bs[0]);
        w.all(&mut s[1], &bs[1]);
    }
    w.apply(&mut m.vm.pgfault, b.vm.pgfault);
    w.apply(&mut m.vm.pgmajfault, b.vm.pgmajfault);
    w.apply(&mut m.vm.pgscan, b.vm.pgscan);
    w.apply(&mut m.vm.pgsteal, b.vm.pgsteal);
    w.apply(&mut m.vm.pgscan_direct, b.vm.pgscan_direct);
    w.all(&mut m.softirqs, &b.softirqs);
    w.apply(&mut m.vm.oom_kill, b.vm.oom_kill);
    w.apply(&mut m.tcp.out_segs, b.tcp.out_segs);
    w.apply(&mut m.tcp.retrans_segs, b.tcp.retrans_segs);
    w.apply(&mut m.tcp.active_opens, b.tcp.active_opens);
    w.apply(&mut m.tcp.attempt_fails, b.tcp.attempt_fails);
    for (l, bl) in f.links.iter_mut().zip(&prev.links) {
        if l.name == bl.name {
            w.all(&mut l.rx, &bl.rx);
            w.all(&mut l.tx, &bl.tx);
        }
    }
    for (d, bd) in f.disks.iter_mut().zip(&prev.disks) {
        if d.name == bd.name {
            for (x, bx) in [
                (&mut d.reads, bd.reads),
                (&mut d.writes, bd.writes),
                (&mut d.read_sectors, bd.read_sectors),
                (&mut d.write_sectors, bd.write_sectors),
                (&mut d.read_ms, bd.read_ms),
                (&mut d.write_ms, bd.write_ms),
                (&mut d.io_ms, bd.io_ms),
                (&mut d.queue_ms, bd.queue_ms),
            ] {
                w.apply(x, bx);
            }
        }
    }
    let (h, bh) = (&mut f.hists, &prev.hists);
    if let (Some(x), Some(b)) = (h.runqlat_us.as_mut(), bh.runqlat_us.as_ref()) {
        w.slots(x, b);
    }
    if let (Some(x), Some(b)) = (h.connect_us.as_mut(), bh.connect_us.as_ref()) {
        w.slots(x, b);
    }
    for (x, b) in h.writes.iter_mut().zip(&bh.writes) {
        if (&x.syscall, &x.kind) == (&b.syscall, &b.kind) {
            w.slots(&mut x.slots, &b.slots);
            w.apply(&mut x.bytes, b.bytes);
        }
    }
    for (x, b) in h.biolat.iter_mut().zip(&bh.biolat) {
        if (&x.disk, &x.op) == (&b.disk, &b.op) {
            w.slots(&mut x.slots, &b.slots);
            w.apply(&mut x.bytes, b.bytes);
            w.apply(&mut x.errors, b.errors);
        }
    }
}

/// The ended processes of a frame as written: each one's pid and parent as differences
/// from the entry before's (exits come in bursts of siblings with close pids), its exit
/// time as how long before the frame it ended and its start as how long it lived, each
/// in the coarsest unit that holds it exactly (ns, µs or ms: the recorder keeps the
/// times of a process no frame saw alive to the millisecond), and its peak RSS in pages
/// when it is whole pages. These are the noisy numbers of a frame where processes start
/// and end (~20 a second: a hundred records a frame), and what compression cannot
/// shrink; smaller, a frame of them is about half. Every frame of format 2 is written
/// packed and unpacked when read (any bytes unpack to some frame: nothing here trusts
/// the file).
pub fn pack_ended(f: &mut Frame) {
    let (mut pid, mut ppid) = (0u32, 0u32);
    for e in f.ended.iter_mut() {
        let (p, pp) = (e.pid, e.ppid);
        e.pid = zigzag32(p.wrapping_sub(pid));
        e.ppid = zigzag32(pp.wrapping_sub(ppid));
        (pid, ppid) = (p, pp);
        e.start_ns = in_units(e.exit_ns.wrapping_sub(e.start_ns));
        e.exit_ns = in_units(f.boot_ns.wrapping_sub(e.exit_ns));
        e.maxrss_bytes = if e.maxrss_bytes % PAGE == 0 && e.maxrss_bytes < 1 << 62 {
            (e.maxrss_bytes / PAGE) << 1 | 1
        } else {
            e.maxrss_bytes.min(u64::MAX >> 1) << 1
        };
    }
}

/// [`pack_ended`] undone.
pub fn unpack_ended(f: &mut Frame) {
    let (mut pid, mut ppid) = (0u32, 0u32);
    for e in f.ended.iter_mut() {
        pid = pid.wrapping_add(unzigzag32(e.pid));
        ppid = ppid.wrapping_add(unzigzag32(e.ppid));
        (e.pid, e.ppid) = (pid, ppid);
        e.exit_ns = f.boot_ns.wrapping_sub(from_units(e.exit_ns));
        e.start_ns = e.exit_ns.wrapping_sub(from_units(e.start_ns));
        e.maxrss_bytes = if e.maxrss_bytes & 1 == 1 {
            (e.maxrss_bytes >> 1).wrapping_mul(PAGE)
        } else {
            e.maxrss_bytes >> 1
        };
    }
}

const PAGE: u64 = 4096;
const UNITS: [u64; 3] = [1, 1_000, 1_000_000];

/// A span of ns (a wrapping difference) in the coarsest unit that holds it exactly:
/// zigzag(span / unit) << 2 | the unit's index.
fn in_units(d: u64) -> u64 {
    let d = d as i64;
    for (tag, &unit) in UNITS.iter().enumerate().rev() {
        let unit = unit as i64;
        if d % unit == 0 {
            let z = zigzag((d / unit) as u64);
            if z < 1 << 62 {
                return z << 2 | tag as u64;
            }
        }
    }
    // Beyond 2^61 ns (73 years) either way: never written; saturated.
    ((1u64 << 62) - 1) << 2
}

fn from_units(code: u64) -> u64 {
    let unit = UNITS.get((code & 3) as usize).copied().unwrap_or(1);
    unzigzag(code >> 2).wrapping_mul(unit)
}

fn zigzag32(d: u32) -> u32 {
    let d = d as i32;
    ((d << 1) ^ (d >> 31)) as u32
}

fn unzigzag32(z: u32) -> u32 {
    ((z >> 1) as i32 ^ -((z & 1) as i32)) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::frame::{Core, Link, Psi};

    #[test]
    fn zigzag_round_trips_every_difference() {
        for d in [0u64, 1, 2, u64::MAX, u64::MAX - 1, 1 << 63, 12345] {
            assert_eq!(unzigzag(zigzag(d)), d);
        }
        assert_eq!(zigzag(0), 0);
        assert_eq!(zigzag(u64::MAX), 1, "a decrease of one is small");
    }

    #[test]
    fn a_frame_comes_back_exactly() {
        let p = |pid, start, cpu| Proc {
            pid,
            start_ns: start,
            cpu_ns: cpu,
            rss_bytes: 4096 * cpu,
            net: Some([[cpu, 1, 2, 3], [4, 5, 6, 7]]),
            ..Proc::default()
        };
        let prev = Frame {
            procs: vec![p(1, 10, 5), p(2, 10, 7), p(4, 10, 9)],
            groups: vec![Group {
                id: 7,
                path: "/a".into(),
                cpu_usage_us: 100,
                psi: [Some(Psi::default()), None, None, None, None, None],
                ..Group::default()
            }],
            links: vec![Link {
                name: "eth0".into(),
                rx: [1, 2, 3, 4],
                ..Link::default()
            }],
            ..Frame::default()
        };
        let mut cur = prev.clone();
        cur.procs = vec![p(1, 10, 6), p(2, 11, 1), p(3, 10, 2), p(4, 10, 8)];
        cur.groups[0].cpu_usage_us = 150;
        cur.links[0].rx = [10, 2, 3, 4];
        cur.machine.cores = vec![Core {
            busy_ns: 5,
            ..Core::default()
        }];
        let d = encode(&cur, &prev);
        assert_eq!(d.procs[0].cpu_ns, zigzag(1), "pid 1: a difference");
        assert_eq!(d.procs[1].cpu_ns, 1, "pid 2 restarted: kept");
        assert_eq!(d.procs[3].cpu_ns, zigzag(u64::MAX), "went down by one");
        assert_eq!(d.groups[0].cpu_usage_us, zigzag(50));
        assert_eq!(decode(d, &prev), cur);
    }

    #[test]
    fn spans_in_the_coarsest_exact_unit() {
        for d in [
            0u64,
            1,
            999,
            1000,
            52_000_000,
            52_000_001,
            7 << 40,
            u64::MAX,
            0u64.wrapping_sub(3000),
        ] {
            assert_eq!(from_units(in_units(d)), d, "{d}");
        }
        assert_eq!(in_units(52_000_000), (52 << 1) << 2 | 2, "52 ms in ms");
    }

    #[test]
    fn ended_processes_pack_and_come_back() {
        use crate::frame::Ended;
        let e = |pid, ppid, start_ns, exit_ns| Ended {
            pid,
            ppid,
            start_ns,
            exit_ns,
            ..Ended::default()
        };
        let mut f = Frame {
            boot_ns: 5_000_000_000_000,
            ended: vec![
                e(4000, 10, 4_999_000_000_000, 4_999_500_000_000),
                e(3990, 10, 4_998_000_000_000, 4_999_600_000_000),
                e(u32::MAX, 0, 0, 6_000_000_000_000),
            ],
            ..Frame::default()
        };
        let orig = f.clone();
        pack_ended(&mut f);
        assert_eq!(f.ended[1].pid, 19, "-10, zigzag");
        assert_eq!(f.ended[1].ppid, 0);
        unpack_ended(&mut f);
        assert_eq!(f, orig);
    }
}
