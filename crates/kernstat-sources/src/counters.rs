//! The kernel's own cumulative counters an incident starts with (kernstat-model's
//! counters.rs): /proc/softirqs, /proc/vmstat (faults, reclaim, OOM kills),
//! /proc/net/snmp (TCP) and /proc/diskstats. Read only by those who show or keep them
//! (the daemon, the recorder): not on the status bar's path. Measured here: the four
//! preads and parses take ~40 µs together at 2 CPUs and 20 block devices.

use std::collections::HashSet;
use std::path::PathBuf;

use kernstat_model::counters::{DiskStat, KernelCounters, SOFTIRQS};

use crate::file::{fields, lines, parse_u64, spaced_value, PreadFile};
use crate::Roots;

/// Reads the counters' files.
#[derive(Debug)]
pub struct CountersReader {
    softirqs: Option<PreadFile>,
    vmstat: Option<PreadFile>,
    snmp: Option<PreadFile>,
    diskstats: Option<PreadFile>,
    sys_block: PathBuf,
    /// Names known to be partitions (/sys/class/block/NAME/partition), and those known
    /// not to be.
    partitions: HashSet<String>,
    whole: HashSet<String>,
    buf: Vec<u8>,
}

impl CountersReader {
    /// Opens what exists under `roots`.
    pub fn open(roots: &Roots) -> Self {
        let p = &roots.proc;
        CountersReader {
            softirqs: PreadFile::open_optional(p.join("softirqs")),
            vmstat: PreadFile::open_optional(p.join("vmstat")),
            snmp: PreadFile::open_optional(p.join("net/snmp")),
            diskstats: PreadFile::open_optional(p.join("diskstats")),
            sys_block: roots.sys.join("class/block"),
            partitions: HashSet::new(),
            whole: HashSet::new(),
            buf: vec![0; 128 * 1024],
        }
    }

    /// Reads every counter into `out` (a missing file leaves its counters at 0).
    pub fn read(&mut self, out: &mut KernelCounters) {
        out.read = true;
        if let Some(Ok(b)) = self.softirqs.as_ref().map(|f| f.read(&mut self.buf)) {
            out.softirqs = parse_softirqs(b);
        }
        if let Some(Ok(b)) = self.vmstat.as_ref().map(|f| f.read(&mut self.buf)) {
            let v = |k: &[u8]| spaced_value(b, k).unwrap_or(0);
            out.pgfault = v(b"pgfault");
            out.pgmajfault = v(b"pgmajfault");
            out.pgscan_direct = v(b"pgscan_direct");
            out.pgscan = v(b"pgscan_kswapd") + out.pgscan_direct + v(b"pgscan_khugepaged");
            out.pgsteal = v(b"pgsteal_kswapd") + v(b"pgsteal_direct") + v(b"pgsteal_khugepaged");
            out.oom_kill = v(b"oom_kill");
        }
        if let Some(Ok(b)) = self.snmp.as_ref().map(|f| f.read(&mut self.buf)) {
            let tcp = parse_snmp_tcp(b);
            out.tcp_out_segs = tcp[0];
            out.tcp_retrans_segs = tcp[1];
            out.tcp_active_opens = tcp[2];
            out.tcp_attempt_fails = tcp[3];
        }
        out.disks.clear();
        if let Some(f) = self.diskstats.as_ref() {
            let Ok(b) = f.read(&mut self.buf) else {
                return;
            };
            let (part, whole, sys) = (&mut self.partitions, &mut self.whole, &self.sys_block);
            parse_diskstats(b, &mut out.disks, &mut |name| {
                if whole.contains(name) {
                    return false;
                }
                if part.contains(name) {
                    return true;
                }
                let is_part = sys.join(name).join("partition").exists();
                if is_part {
                    part.insert(name.to_string());
                } else {
                    whole.insert(name.to_string());
                }
                is_part
            });
        }
    }
}

/// Each kind's count summed over CPUs ("  NET_RX:  10  20").
pub fn parse_softirqs(buf: &[u8]) -> [u64; 10] {
    let mut out = [0u64; 10];
    for line in lines(buf) {
        let mut f = fields(line);
        let Some(name) = f.next().and_then(|n| n.strip_suffix(b":")) else {
            continue;
        };
        let name = String::from_utf8_lossy(name).to_ascii_lowercase();
        if let Some(i) = SOFTIRQS.iter().position(|k| *k == name) {
            out[i] = f.filter_map(parse_u64).sum();
        }
    }
    out
}

/// Tcp's OutSegs, RetransSegs, ActiveOpens and AttemptFails (a header line of names,
/// then a line of values).
pub fn parse_snmp_tcp(buf: &[u8]) -> [u64; 4] {
    let mut it = lines(buf).filter(|l| l.starts_with(b"Tcp:"));
    let (Some(names), Some(values)) = (it.next(), it.next()) else {
        return [0; 4];
    };
    let mut out = [0u64; 4];
    for (n, v) in fields(names).zip(fields(values)).skip(1) {
        let i = match n {
            b"OutSegs" => 0,
            b"RetransSegs" => 1,
            b"ActiveOpens" => 2,
            b"AttemptFails" => 3,
            _ => continue,
        };
        out[i] = parse_u64(v).unwrap_or(0);
    }
    out
}

/// The devices of /proc/diskstats that did I/O, whole disks only (`is_partition`
/// decides by name).
pub fn parse_diskstats(
    buf: &[u8],
    out: &mut Vec<DiskStat>,
    is_partition: &mut dyn FnMut(&str) -> bool,
) {
    for line in lines(buf) {
        let f: Vec<&[u8]> = fields(line).take(14).collect();
        if f.len() < 14 {
            continue;
        }
        let n = |i: usize| parse_u64(f[i]).unwrap_or(0);
        let name = String::from_utf8_lossy(f[2]);
        if n(3) + n(7) == 0 || is_partition(&name) {
            continue;
        }
        out.push(DiskStat {
            name: kernstat_model::text::printable(&name).into_owned(),
            major: n(0) as u32,
            minor: n(1) as u32,
            reads: n(3),
            read_sectors: n(5),
            read_ms: n(6),
            writes: n(7),
            write_sectors: n(9),
            write_ms: n(10),
            in_flight: n(11),
            io_ms: n(12),
            queue_ms: n(13),
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_as_the_kernel_writes_them() {
        let soft = b"                    CPU0       CPU1\n          HI:          1          2\n       TIMER:      10         20\n      NET_RX:     100        200\n         RCU:       5          5\n";
        let s = parse_softirqs(soft);
        assert_eq!((s[0], s[1], s[3], s[9]), (3, 30, 300, 10));
        let snmp = b"Ip: Forwarding DefaultTTL\nIp: 1 64\nTcp: RtoAlgorithm RtoMin RtoMax MaxConn ActiveOpens PassiveOpens AttemptFails EstabResets CurrEstab InSegs OutSegs RetransSegs InErrs OutRsts InCsumErrors\nTcp: 1 200 120000 -1 42 7 3 1 2 1000 2000 17 0 5 0\n";
        assert_eq!(parse_snmp_tcp(snmp), [2000, 17, 42, 3]);
        let disks = b"   7       0 loop0 10 0 80 5 20 0 160 7 0 9 12 0 0 0 0 0 0\n   8       0 sda 100 1 800 50 200 2 1600 70 1 90 120 0 0 0 0\n   8       1 sda1 100 1 800 50 200 2 1600 70 1 90 120\n   7       1 loop1 0 0 0 0 0 0 0 0 0 0 0\n";
        let mut out = Vec::new();
        parse_diskstats(disks, &mut out, &mut |n| n == "sda1");
        let names: Vec<&str> = out.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["loop0", "sda"]);
        assert_eq!(
            (out[1].reads, out[1].writes, out[1].io_ms, out[1].queue_ms),
            (100, 200, 90, 120)
        );
    }
}
