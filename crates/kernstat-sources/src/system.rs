//! Machine-wide counters: /proc/stat (per-CPU busy time), /proc/meminfo, /proc/vmstat
//! (swap pages), /proc/pressure/* and sysinfo(2) (load averages).
//!
//! Per-CPU busy time comes from /proc/stat because the kernel keeps it in the per-CPU
//! variable `kernel_cpustat`, which BPF can read only through a ksym that the kernel must
//! resolve with kallsyms: on kernels built without CONFIG_KALLSYMS_ALL (this project's CI
//! kernel) loading fails with "ldimm64 failed to find the address for kernel symbol
//! 'kernel_cpustat'". Measured here: pread of /proc/stat 1.5 us, /proc/vmstat 6 us,
//! /proc/meminfo 1.2 us, each /proc/pressure file 0.5 us.
//!
//! In a container whose cgroup has a memory limit below the machine's RAM, memory's
//! total and available are the group's ([`MemoryLimit`]), and say so.

use std::io;
use std::path::{Path, PathBuf};

use kernstat_model::raw::MemTotalSource;
use kernstat_model::{CoreTimes, MemInfo, Psi, PsiLine, SystemSample};

use crate::file::{fields, keyed_value, lines, parse_f32, parse_u64, spaced_value, PreadFile};
use crate::Roots;

/// Reads the machine-wide procfs files into a [`SystemSample`].
#[derive(Debug)]
pub struct SystemReader {
    stat: PreadFile,
    meminfo: PreadFile,
    vmstat: Option<PreadFile>,
    /// pswpin and pswpout as last read from /proc/vmstat.
    swap_pages: (u64, u64),
    /// Whether /proc/vmstat is read at the next reading (see `read`).
    vmstat_due: bool,
    psi_cpu: Option<PreadFile>,
    psi_memory: Option<PreadFile>,
    psi_io: Option<PreadFile>,
    mem_limit: Option<MemoryLimit>,
    buf: Vec<u8>,
    ns_per_tick: u64,
    page_size: u64,
}

/// What /proc/stat says beyond the per-CPU lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StatTotals {
    /// Busy time of all CPUs together (the "cpu" line), ns.
    pub busy_ns: u64,
    /// procs_running.
    pub running: u64,
    /// procs_blocked.
    pub blocked: u64,
}

impl SystemReader {
    /// Opens the files under `roots.proc`. /proc/stat and /proc/meminfo must exist; the
    /// others are optional and simply absent from the sample when missing.
    pub fn open(roots: &Roots) -> io::Result<Self> {
        let p = &roots.proc;
        Ok(Self {
            stat: PreadFile::open(p.join("stat"))?,
            meminfo: PreadFile::open(p.join("meminfo"))?,
            vmstat: PreadFile::open_optional(p.join("vmstat")),
            swap_pages: (0, 0),
            vmstat_due: true,
            psi_cpu: PreadFile::open_optional(p.join("pressure/cpu")),
            psi_memory: PreadFile::open_optional(p.join("pressure/memory")),
            psi_io: PreadFile::open_optional(p.join("pressure/io")),
            mem_limit: MemoryLimit::discover(roots),
            // /proc/stat grows with CPUs and interrupts; 256 KiB covers thousands of both.
            buf: vec![0; 256 * 1024],
            ns_per_tick: crate::file::ns_per_tick(),
            page_size: crate::file::page_size(),
        })
    }

    /// Fills everything but `taken_ns` and `busy_ns` (the caller decides which clock and
    /// which busy source to use) and returns /proc/stat's totals.
    pub fn read(&mut self, sys: &mut SystemSample) -> io::Result<StatTotals> {
        let totals = {
            let buf = self.stat.read(&mut self.buf)?;
            parse_stat(buf, self.ns_per_tick, &mut sys.cores)
        };
        sys.ncpus = sys.cores.len().max(1) as u32;
        {
            let buf = self.meminfo.read(&mut self.buf)?;
            sys.mem = parse_meminfo(buf);
        }
        let swap_on = sys.mem.swap_total > 0;
        if let Some(l) = &self.mem_limit {
            l.apply(&mut sys.mem, &mut self.buf);
        }
        sys.page_size = self.page_size;
        // /proc/vmstat (its 180 lines: 10 % of a bar's sample at 70 tasks, `perf record
        // kernstat bar --bench`) is read for pswpin and pswpout, which count pages moved
        // to and from a swap device, so they stand still without one. It is read at the
        // first reading, while SwapTotal is above 0, and once more at the reading that
        // finds it 0 (meminfo is read first: a swapoff's last swap-ins, counted before
        // its pages leave SwapTotal, are in).
        if let Some(f) = self.vmstat.as_ref().filter(|_| self.vmstat_due || swap_on) {
            let buf = f.read(&mut self.buf)?;
            self.swap_pages = (
                spaced_value(buf, b"pswpin").unwrap_or(0),
                spaced_value(buf, b"pswpout").unwrap_or(0),
            );
        }
        self.vmstat_due = swap_on;
        (sys.swap_in_pages, sys.swap_out_pages) = self.swap_pages;
        sys.psi = Psi::default();
        if let Some(f) = &self.psi_cpu {
            (sys.psi.cpu_some, _) = parse_psi(f.read(&mut self.buf)?);
        }
        if let Some(f) = &self.psi_memory {
            (sys.psi.memory_some, sys.psi.memory_full) = parse_psi(f.read(&mut self.buf)?);
        }
        if let Some(f) = &self.psi_io {
            (sys.psi.io_some, sys.psi.io_full) = parse_psi(f.read(&mut self.buf)?);
        }
        sys.load = load_averages();
        Ok(totals)
    }
}

/// The memory limit of the reader's own cgroup, where one is set below the machine's RAM
/// (a container): the smallest `memory.max` (v2) or `memory.limit_in_bytes` (v1) on the
/// way from its group up to the hierarchy's root, with that group's usage file. Found
/// once at start; the two files are then read each sample.
#[derive(Debug)]
pub struct MemoryLimit {
    limit: PreadFile,
    usage: PreadFile,
    /// The group whose limit it is, below the hierarchy's root.
    pub group: PathBuf,
}

impl MemoryLimit {
    /// The limiting group of this process, if any (cgroup v2 first, then v1's memory
    /// controller on hybrid machines).
    pub fn discover(roots: &Roots) -> Option<Self> {
        let own = std::fs::read_to_string(roots.proc.join("self/cgroup")).ok()?;
        let mounts = std::fs::read_to_string(roots.proc.join("self/mounts")).ok()?;
        let memtotal = std::fs::read(roots.proc.join("meminfo"))
            .ok()
            .and_then(|b| keyed_value(&b, b"MemTotal"))
            .map_or(u64::MAX, |kb| kb * 1024);
        let mount_of = |fstype: &str, option: Option<&str>| -> Option<PathBuf> {
            mounts.lines().find_map(|l| {
                let f: Vec<&str> = l.split_whitespace().collect();
                let ok = f.get(2) == Some(&fstype)
                    && option.is_none_or(|o| {
                        f.get(3).is_some_and(|opts| opts.split(',').any(|x| x == o))
                    });
                ok.then(|| PathBuf::from(f[1]))
            })
        };
        let v2 = own
            .lines()
            .find_map(|l| l.strip_prefix("0::"))
            .zip(mount_of("cgroup2", None))
            .map(|(p, m)| (m, p.to_string(), "memory.max", "memory.current"));
        let v1 = own
            .lines()
            .find_map(|l| {
                let mut f = l.splitn(3, ':');
                let (_, ctl, path) = (f.next()?, f.next()?, f.next()?);
                ctl.split(',')
                    .any(|c| c == "memory")
                    .then(|| path.to_string())
            })
            .zip(mount_of("cgroup", Some("memory")))
            .map(|(p, m)| (m, p, "memory.limit_in_bytes", "memory.usage_in_bytes"));
        for (mount, path, limit_file, usage_file) in [v2, v1].into_iter().flatten() {
            let mut best: Option<(u64, PathBuf)> = None;
            let mut rel = PathBuf::from(path.trim_start_matches('/'));
            loop {
                let dir = mount.join(&rel);
                let limit = std::fs::read(dir.join(limit_file))
                    .ok()
                    .and_then(|b| parse_u64(b.trim_ascii()));
                if let Some(l) = limit {
                    if l < memtotal && best.as_ref().is_none_or(|(b, _)| l < *b) {
                        best = Some((l, rel.clone()));
                    }
                }
                if !rel.pop() {
                    break;
                }
            }
            if let Some((_, rel)) = best {
                let dir = mount.join(&rel);
                return Some(MemoryLimit {
                    limit: PreadFile::open(dir.join(limit_file)).ok()?,
                    usage: PreadFile::open(dir.join(usage_file)).ok()?,
                    group: Path::new("/").join(rel),
                });
            }
        }
        None
    }

    /// Makes `mem` the group's: total its limit, available what is left of it (never
    /// more than the machine has available).
    pub fn apply(&self, mem: &mut MemInfo, buf: &mut [u8]) {
        let (Some(limit), Some(usage)) = (self.limit.read_u64(buf), self.usage.read_u64(buf))
        else {
            return;
        };
        if limit >= mem.total {
            return;
        }
        mem.total = limit;
        mem.available = limit.saturating_sub(usage).min(mem.available);
        mem.total_source = MemTotalSource::Cgroup;
    }
}

/// The 1, 5 and 15 minute load averages from sysinfo(2) (no file, no text).
pub fn load_averages() -> [f64; 3] {
    // SAFETY: sysinfo writes into the struct we pass and nothing else.
    let mut si: libc::sysinfo = unsafe { std::mem::zeroed() };
    if unsafe { libc::sysinfo(&mut si) } != 0 {
        return [0.0; 3];
    }
    // Fixed point with SI_LOAD_SHIFT = 16.
    si.loads.map(|l| l as f64 / 65536.0)
}

/// Parses /proc/stat: per-CPU times into `cores` (cleared first), and the totals.
pub fn parse_stat(buf: &[u8], ns_per_tick: u64, cores: &mut Vec<CoreTimes>) -> StatTotals {
    let mut totals = StatTotals::default();
    cores.clear();
    for line in lines(buf) {
        if let Some(rest) = line.strip_prefix(b"cpu") {
            let mut f = fields(rest);
            let name = if rest.first() == Some(&b' ') {
                None
            } else {
                f.next()
            };
            let mut v = [0u64; 8];
            for slot in v.iter_mut() {
                *slot = f.next().and_then(parse_u64).unwrap_or(0);
            }
            let [user, nice, system, idle, iowait, irq, softirq, steal] = v;
            // Saturating: a file with absurd numbers (the fuzz tests make them) must
            // not overflow; real counters are far below 2^64 ns.
            let sum = |xs: &[u64]| xs.iter().fold(0u64, |a, &x| a.saturating_add(x));
            let busy = sum(&[user, nice, system, irq, softirq, steal]).saturating_mul(ns_per_tick);
            let total = busy.saturating_add(sum(&[idle, iowait]).saturating_mul(ns_per_tick));
            match name {
                None => totals.busy_ns = busy,
                Some(_) => cores.push(CoreTimes {
                    busy_ns: busy,
                    total_ns: total,
                }),
            }
        } else if let Some(rest) = line.strip_prefix(b"procs_running ") {
            totals.running = parse_u64(rest.trim_ascii()).unwrap_or(0);
        } else if let Some(rest) = line.strip_prefix(b"procs_blocked ") {
            totals.blocked = parse_u64(rest.trim_ascii()).unwrap_or(0);
        }
    }
    totals
}

/// Parses /proc/meminfo (kB values) into bytes.
pub fn parse_meminfo(buf: &[u8]) -> MemInfo {
    let kb = |key: &[u8]| keyed_value(buf, key).unwrap_or(0).saturating_mul(1024);
    let total = kb(b"MemTotal");
    let free = kb(b"MemFree");
    // Kernels before 3.14 lack MemAvailable; free is the closest lower bound there.
    let available = keyed_value(buf, b"MemAvailable")
        .map(|v| v.saturating_mul(1024))
        .unwrap_or(free);
    MemInfo {
        total,
        available,
        free,
        swap_total: kb(b"SwapTotal"),
        swap_free: kb(b"SwapFree"),
        total_source: MemTotalSource::Machine,
    }
}

/// Parses a /proc/pressure file: the "some" and "full" lines.
pub fn parse_psi(buf: &[u8]) -> (Option<PsiLine>, Option<PsiLine>) {
    let mut some = None;
    let mut full = None;
    for line in lines(buf) {
        let mut f = fields(line);
        let slot = match f.next() {
            Some(b"some") => &mut some,
            Some(b"full") => &mut full,
            _ => continue,
        };
        let mut l = PsiLine::default();
        for kv in f {
            if let Some(v) = kv.strip_prefix(b"avg10=") {
                l.avg10 = parse_f32(v).unwrap_or(0.0);
            } else if let Some(v) = kv.strip_prefix(b"avg60=") {
                l.avg60 = parse_f32(v).unwrap_or(0.0);
            } else if let Some(v) = kv.strip_prefix(b"total=") {
                l.total_us = parse_u64(v).unwrap_or(0);
            }
        }
        *slot = Some(l);
    }
    (some, full)
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAT: &[u8] = b"cpu  100 5 50 1000 10 3 2 1 0 0\n\
cpu0 60 5 30 400 5 2 1 1 0 0\n\
cpu1 40 0 20 600 5 1 1 0 0 0\n\
intr 12345 0 0\n\
ctxt 999\n\
procs_running 3\n\
procs_blocked 1\n";

    #[test]
    fn stat_per_cpu_and_totals() {
        let mut cores = Vec::new();
        let t = parse_stat(STAT, 10_000_000, &mut cores);
        assert_eq!(cores.len(), 2);
        // cpu0: busy = 60+5+30+2+1+1 = 99 ticks, total = 99+400+5 = 504 ticks.
        assert_eq!(cores[0].busy_ns, 99 * 10_000_000);
        assert_eq!(cores[0].total_ns, 504 * 10_000_000);
        assert_eq!(t.busy_ns, (100 + 5 + 50 + 3 + 2 + 1) * 10_000_000);
        assert_eq!(t.running, 3);
        assert_eq!(t.blocked, 1);
    }

    #[test]
    fn meminfo_in_bytes() {
        let m = parse_meminfo(
            b"MemTotal: 1000 kB\nMemFree: 100 kB\nMemAvailable: 600 kB\nSwapTotal: 50 kB\nSwapFree: 20 kB\n",
        );
        assert_eq!(m.total, 1_024_000);
        assert_eq!(m.available, 614_400);
        assert_eq!(m.swap_total - m.swap_free, 30 * 1024);
    }

    #[test]
    fn meminfo_without_memavailable_falls_back_to_free() {
        let m = parse_meminfo(b"MemTotal: 1000 kB\nMemFree: 100 kB\n");
        assert_eq!(m.available, 102_400);
    }

    #[test]
    fn psi_lines() {
        let (some, full) = parse_psi(
            b"some avg10=1.50 avg60=0.25 avg300=0.58 total=4801864\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
        );
        let some = some.unwrap();
        assert!((some.avg10 - 1.5).abs() < 1e-6);
        assert_eq!(some.total_us, 4801864);
        assert_eq!(full.unwrap().total_us, 0);
        // /proc/pressure/cpu before 5.13 has no "full" line.
        let (s, f) = parse_psi(b"some avg10=0.00 avg60=0.00 avg300=0.00 total=7\n");
        assert!(s.is_some() && f.is_none());
    }

    #[test]
    fn vmstat_is_read_while_there_is_swap_and_once_after() {
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("stat"), STAT).unwrap();
        let step = |swap_kb: u64, pswpin: u64| {
            let mem = format!("MemTotal: 1000 kB\nMemAvailable: 600 kB\nSwapTotal: {swap_kb} kB\nSwapFree: 0 kB\n");
            std::fs::write(t.path().join("meminfo"), mem).unwrap();
            let vm = format!("nr_free_pages 1\npswpin {pswpin}\npswpout {}\n", pswpin * 2);
            std::fs::write(t.path().join("vmstat"), vm).unwrap();
        };
        let roots = Roots {
            proc: t.path().to_path_buf(),
            sys: t.path().join("sys"),
        };
        step(0, 5);
        let mut r = SystemReader::open(&roots).unwrap();
        let mut read = || {
            let mut sys = SystemSample::default();
            r.read(&mut sys).unwrap();
            (sys.swap_in_pages, sys.swap_out_pages)
        };
        // The files are changed behind the reader's back to show when it reads vmstat.
        assert_eq!(read(), (5, 10), "the first reading reads it");
        step(0, 7);
        assert_eq!(read(), (5, 10), "no swap: the counts stand still, not read");
        step(100, 7);
        assert_eq!(read(), (7, 14), "swap on");
        step(0, 9);
        assert_eq!(
            read(),
            (9, 18),
            "the reading that finds no swap reads it once more"
        );
        step(0, 11);
        assert_eq!(read(), (9, 18));
    }
}
