//! Unit tests of `mod.rs`.

use super::*;

#[test]
fn a_sample_is_encoded_once_whatever_the_scrapes() {
    let e = Exporter::new(10);
    e.publish(MetricsSample::default());
    let (a, b) = (e.encode_text().unwrap(), e.encode_text().unwrap());
    assert!(!a.is_empty());
    assert_eq!(
        a.as_ptr(),
        b.as_ptr(),
        "the second scrape is served the same bytes"
    );
    let (c, d) = (
        e.encode_classic_text().unwrap(),
        e.encode_classic_text().unwrap(),
    );
    assert_eq!(c.as_ptr(), d.as_ptr());
    let (p, q) = (e.encode_protobuf().unwrap(), e.encode_protobuf().unwrap());
    assert_eq!(p.as_ptr(), q.as_ptr());
    assert_eq!(e.scrapes(), 6);
    e.publish(MetricsSample::default());
    let fresh = e.encode_text().unwrap();
    assert_ne!(fresh.as_ptr(), a.as_ptr(), "a new sample is encoded again");
}

#[test]
fn monotonic_counters_never_go_back() {
    let mut m = Monotonic::default();
    assert_eq!(m.observe(100), 100);
    assert_eq!(m.observe(150), 150);
    assert_eq!(m.observe(120), 150, "a lower reading adds nothing");
    assert_eq!(m.observe(130), 160, "and counts on from it");
}

#[test]
fn top_by_keeps_the_largest_user_processes() {
    let p = |pid, rss, kthread| ProcRate {
        pid,
        rss_bytes: rss,
        kthread,
        ..Default::default()
    };
    let procs = [
        p(1, 10, false),
        p(2, 30, false),
        p(3, 99, true),
        p(4, 30, false),
    ];
    let top: Vec<u32> = top_by(&procs, 2, |p| p.rss_bytes as f64)
        .iter()
        .map(|p| p.pid)
        .collect();
    assert_eq!(top, [2, 4]);
}

#[test]
fn whole_values_are_written_as_integers_and_fractions_as_floats() {
    let e = Exporter::new(10);
    let mut s = MetricsSample {
        sample_us: 250.0,
        self_rss_bytes: 9_007_199_254_740_993, // above 2^53: not exact as f64
        ..MetricsSample::default()
    };
    s.model.ncpus = 2;
    e.publish(s);
    let text = e.encode_text().unwrap();
    let text = std::str::from_utf8(&text).unwrap();
    let line = |name: &str| {
        text.lines()
            .find(|l| l.split(' ').next() == Some(name))
            .unwrap_or_else(|| panic!("{name} in {text}"))
            .to_string()
    };
    assert_eq!(line("kernstat_cpus_online"), "kernstat_cpus_online 2");
    assert_eq!(
        line("kernstat_sample_duration_seconds"),
        "kernstat_sample_duration_seconds 0.00025"
    );
    assert_eq!(
        line("kernstat_self_resident_memory_bytes"),
        "kernstat_self_resident_memory_bytes 9007199254740992.0"
    );
}

/// Counts the allocations of the thread that asks (tests run on threads of their own,
/// side by side), so one test can count what one encoding allocates.
mod counting {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    thread_local! {
        static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    }

    pub struct PerThread;

    fn count() {
        // A const-initialised Cell has no destructor: this never allocates or fails.
        let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
    }

    // SAFETY: every method forwards to the system allocator unchanged.
    unsafe impl GlobalAlloc for PerThread {
        unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
            count();
            unsafe { System.alloc(layout) }
        }
        unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
            count();
            unsafe { System.alloc_zeroed(layout) }
        }
        unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
            count();
            unsafe { System.realloc(ptr, layout, new_size) }
        }
        unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    #[global_allocator]
    static GLOBAL: PerThread = PerThread;

    /// Allocations this thread made while `f` ran.
    pub fn allocations_of(f: impl FnOnce()) -> u64 {
        let before = ALLOCATIONS.with(Cell::get);
        f();
        ALLOCATIONS.with(Cell::get) - before
    }
}

/// A sample with every kind of series: `n` of each thing that has one series per item
/// (CPUs, processes, interfaces, disks, control groups, write kinds, programs).
fn sample_of(n: usize) -> MetricsSample {
    use kernstat_model::biolat::{BioOp, DiskOp};
    use kernstat_model::cgroup::{CgroupMemory, CgroupRate, IoDevice, Pressure};
    use kernstat_model::counters::DiskStat;
    use kernstat_model::raw::PsiLine;
    let mut hist = Hist::default();
    for v in [0, 3, 40, 700, 9_000, 120_000] {
        hist.record(v);
    }
    let line = Some(PsiLine {
        total_us: 1_500_000,
        ..PsiLine::default()
    });
    let mut s = MetricsSample {
        sample_us: 180.0,
        runq: Some(hist.clone()),
        runq_per_cpu: vec![hist.clone(); n],
        tcp_connect: Some(hist.clone()),
        bpf_stats: true,
        ..MetricsSample::default()
    };
    s.model.ncpus = n as u32;
    s.counters.core_busy_ns = vec![Monotonic::default(); n];
    s.counters.socket_bytes = Some([[1_000; 4]; 2]);
    for i in 0..n {
        let pid = 1000 + i as u32;
        let comm = format!("worker-{i}");
        s.model.procs.push(ProcRate {
            pid,
            comm: kernstat_model::text::ShortStr::from_str_lossy(&comm),
            cpu_ns: 5_000_000 * i as u64,
            cpu_percent: i as f64,
            rss_bytes: 4096 * i as u64,
            read_bps: i as f64,
            read_bytes: 512 * i as u64,
            net_rx_bps: Some(i as f64),
            net_rx_bytes: Some(100 + i as u64),
            net_tx_bytes: Some(7),
            ..ProcRate::default()
        });
        s.model.links.push(LinkRate {
            name: kernstat_model::text::ShortStr::from_str_lossy(&format!("veth{i}")),
            rx_bytes: 10 * i as u64,
            ..LinkRate::default()
        });
        s.model.cgroups.push(CgroupRate {
            path: format!("/kernstat-test/group-{i}"),
            memory: Some(CgroupMemory {
                current: 1 << 20,
                max: Some(1 << 30),
                ..CgroupMemory::default()
            }),
            io: Some(vec![IoDevice {
                rbytes: 4096,
                ..IoDevice::default()
            }]),
            pids: Some(3),
            psi_cpu: Pressure {
                some: line,
                full: line,
            },
            psi_memory: Pressure {
                some: line,
                full: line,
            },
            psi_io: Pressure {
                some: line,
                full: None,
            },
            cpu: kernstat_model::cgroup::CgroupCpu {
                user_us: 10,
                throttled_us: Some(5),
                throttled_periods: Some(1),
                ..Default::default()
            },
            ..CgroupRate::default()
        });
        s.writes.push(SizeSeries {
            syscall: format!("write{i}"),
            kind: "file".into(),
            slots: [3; SIZE_SLOTS],
            bytes: 99_999,
        });
        s.biolat.push(DiskOp {
            disk: format!("loop{i}"),
            major: 7,
            minor: i as u32,
            op: if i % 2 == 0 {
                BioOp::Read
            } else {
                BioOp::Other(12)
            },
            flags: 0,
            hist: hist.clone(),
            count: 6,
            bytes: 4096,
            errors: 1,
        });
        s.kernel.disks.push(DiskStat {
            name: format!("loop{i}"),
            reads: 10,
            ..DiskStat::default()
        });
        s.tcp_retrans.push((pid, comm, 2));
        s.programs.push(ProgramStats {
            collector: "sampler",
            program: format!("prog{i}"),
            run_time_ns: 1000,
            run_count: 10,
        });
    }
    s.kernel.read = true;
    s.map_entries = vec![("sampler", "net", 10, 8192)];
    s.model.psi.cpu_some = line;
    s.model.psi.io_full = line;
    let findings: Vec<serde_json::Value> = (0..n)
        .map(|i| serde_json::json!({"resource": format!("r{i}"), "score": 0.5}))
        .collect();
    s.model.why = Some(serde_json::json!({ "findings": findings }));
    s
}

#[test]
fn encoding_a_sample_allocates_nothing_per_series() {
    // Two samples with the same families, one with 8 and one with 200 of every
    // item: thousands of series more, and not one allocation more.
    let (small, large) = (sample_of(8), sample_of(200));
    let e = Exporter::new(200);
    let encode = |s: &MetricsSample| {
        e.publish(s.clone());
        let mut text = Bytes::new();
        let n = counting::allocations_of(|| text = e.encode_classic_text().unwrap());
        (n, text)
    };
    // The large one first: the output buffer is sized from the previous exposition,
    // so a larger one than the last grows it (a few times, however many series).
    encode(&large);
    let (n_large, large_text) = encode(&large);
    let (n_small, small_text) = encode(&small);
    let series = |t: &Bytes| {
        std::str::from_utf8(t)
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with('#'))
            .count()
    };
    let (series_small, series_large) = (series(&small_text), series(&large_text));
    assert!(
        series_large > series_small + 5_000,
        "{series_small} vs {series_large} series"
    );
    assert!(n_small > 0, "the counter counts");
    assert_eq!(
        n_large, n_small,
        "allocations encoding {series_large} series vs {series_small}"
    );
}
