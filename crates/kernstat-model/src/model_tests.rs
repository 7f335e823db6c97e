//! The model's unit tests, on made-up samples.

use super::*;
use crate::raw::{CoreTimes, GpuSample, ProcSample};

fn proc(pid: u32, start: u64, cpu_ns: u64, rss: u64) -> ProcSample {
    ProcSample {
        pid,
        start,
        cpu_ns,
        rss_bytes: rss,
        state: b'S',
        comm: Comm::from_str_lossy("p"),
        ..Default::default()
    }
}

fn sample(t_ns: u64, busy_ns: u64, procs: Vec<ProcSample>) -> RawSample {
    let mut s = RawSample::default();
    s.sys.taken_ns = t_ns;
    s.sys.busy_ns = busy_ns;
    s.sys.ncpus = 2;
    s.sys.mem = MemInfo {
        total: 1000,
        available: 400,
        ..Default::default()
    };
    s.tasks.procs = procs;
    s.tasks.finish();
    s
}

#[test]
fn cpu_percent_is_busy_over_elapsed_times_cpus() {
    let a = sample(1_000_000_000, 10_000_000_000, vec![]);
    let b = sample(3_000_000_000, 11_000_000_000, vec![]);
    let mut m = Model::default();
    m.update(&a, &b, &ModelOptions::default());
    // 1 s busy over 2 s on 2 CPUs = 25 %.
    assert!((m.cpu_percent - 25.0).abs() < 1e-9);
    assert!((m.interval_s - 2.0).abs() < 1e-9);
}

#[test]
fn memory_used_is_total_minus_available() {
    let a = sample(0, 0, vec![]);
    let mut m = Model::default();
    m.update(&a, &a, &ModelOptions::default());
    assert_eq!(m.mem.used_bytes, 600);
    assert!((m.mem.used_percent - 60.0).abs() < 1e-9);
}

#[test]
fn per_process_rates_and_pid_reuse() {
    let a = sample(
        0,
        0,
        vec![proc(10, 1, 1_000_000_000, 5), proc(20, 7, 50, 9)],
    );
    // pid 20 was reused (different start): its whole cpu_ns is new.
    let b = sample(
        1_000_000_000,
        0,
        vec![proc(10, 1, 1_500_000_000, 5), proc(20, 8, 200_000_000, 9)],
    );
    let mut m = Model::default();
    m.update(&a, &b, &ModelOptions::default());
    assert!((m.procs[0].cpu_percent - 50.0).abs() < 1e-9);
    assert!((m.procs[1].cpu_percent - 20.0).abs() < 1e-9);
    let top: Vec<u32> = m.top_cpu.as_slice().iter().map(|e| e.pid).collect();
    assert_eq!(top, vec![10, 20]);
}

#[test]
fn counters_go_to_their_owner_and_root_only() {
    let mut a = proc(10, 1, 0, 5);
    a.uid = 1000;
    a.euid = 1000;
    let mut b = proc(20, 1, 0, 5);
    b.uid = 1001;
    b.euid = 1001;
    let mut setuid = proc(30, 1, 0, 5);
    setuid.uid = 1000;
    setuid.euid = 0;
    let before = sample(0, 0, vec![a, b, setuid]);
    for p in [&mut a, &mut b, &mut setuid] {
        p.write_bytes = 1 << 20;
    }
    let after = sample(1_000_000_000, 0, vec![a, b, setuid]);
    let mut m = Model::default();
    m.update(&before, &after, &ModelOptions::default());
    let io_top = |m: &Model| -> Vec<u32> { m.top_io.as_slice().iter().map(|e| e.pid).collect() };
    assert_eq!(io_top(&m), [10, 20, 30]);
    let mut mine = m.clone();
    mine.restrict_counters(crate::Viewer::Uid(1000));
    assert_eq!(io_top(&mine), [10], "a setuid process is root's to inspect");
    assert!(!mine.procs[0].counters_hidden);
    assert!(mine.procs[1].counters_hidden && mine.procs[1].write_bytes == 0);
    assert!(mine.procs[2].counters_hidden);
    let mut root = m.clone();
    root.restrict_counters(crate::Viewer::Uid(0));
    assert_eq!(io_top(&root), [10, 20, 30]);
    let mut public = m.clone();
    public.restrict_counters(crate::Viewer::Nobody);
    assert!(public.top_io.is_empty());
    assert!(public
        .procs
        .iter()
        .all(|p| p.counters_hidden && p.write_bps == 0.0));
    assert_eq!(
        public.procs[1].rss_bytes, 5,
        "what /proc/PID/stat shows stays"
    );
}

#[test]
fn retransmits_and_why_io_parties_go_to_their_owner_and_root_only() {
    let mut a = proc(10, 1, 0, 5);
    a.uid = 1000;
    a.euid = 1000;
    let mut b = proc(20, 1, 0, 5);
    b.uid = 1001;
    b.euid = 1001;
    let s = sample(0, 0, vec![a, b]);
    let mut m = Model::default();
    m.update(&s, &s, &ModelOptions::default());
    m.tcp = Some(crate::tcp::TcpModel {
        top: vec![(10, "a".into(), 3), (20, "b".into(), 4)],
        peers: vec![("10.0.0.1:443".into(), 7)],
        ..Default::default()
    });
    let party = |pid: Option<u32>| serde_json::json!({"pid": pid, "comm": "x", "cgroup": "/g", "share": 0.5});
    m.why = Some(serde_json::json!({"findings": [
        {"resource": "io", "culprits": [party(Some(10)), party(Some(20)), party(None)], "victims": [party(Some(20))]},
        {"resource": "cpu", "culprits": [party(Some(20))], "victims": []}
    ]}));
    let pids = |m: &Model, i: usize, side: &str| -> Vec<Option<u64>> {
        m.why.as_ref().unwrap()["findings"][i][side]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["pid"].as_u64())
            .collect()
    };
    let mut mine = m.clone();
    mine.restrict_counters(crate::Viewer::Uid(1000));
    assert_eq!(
        pids(&mine, 0, "culprits"),
        [Some(10), None],
        "own process and the group"
    );
    assert!(pids(&mine, 0, "victims").is_empty());
    assert_eq!(
        pids(&mine, 1, "culprits"),
        [Some(20)],
        "CPU time is ps's to show"
    );
    let t = mine.tcp.as_ref().unwrap();
    assert_eq!(t.top.len(), 1);
    assert!(t.peers.is_empty());
    let mut public = m.clone();
    public.restrict_counters(crate::Viewer::Nobody);
    assert_eq!(pids(&public, 0, "culprits"), [None]);
    assert!(public.tcp.as_ref().unwrap().top.is_empty());
    let mut root = m.clone();
    root.restrict_counters(crate::Viewer::Uid(0));
    assert_eq!(pids(&root, 0, "culprits").len(), 3);
}

#[test]
fn kernel_threads_leave_top_lists_unless_asked() {
    let mut k = proc(2, 1, 0, 0);
    k.kthread = true;
    let mut k2 = k;
    k2.cpu_ns = 500_000_000;
    let a = sample(0, 0, vec![k]);
    let b = sample(1_000_000_000, 0, vec![k2]);
    let mut m = Model::default();
    m.update(&a, &b, &ModelOptions::default());
    assert!(m.top_cpu.is_empty());
    let opts = ModelOptions {
        include_kthreads: true,
        ..Default::default()
    };
    m.update(&a, &b, &opts);
    assert_eq!(m.top_cpu.as_slice()[0].pid, 2);
}

#[test]
fn blocked_and_zombies_are_counted() {
    let mut d = proc(5, 1, 0, 0);
    d.has_d_thread = true;
    let mut z = proc(6, 1, 0, 0);
    z.state = b'Z';
    let a = sample(0, 0, vec![d, z]);
    let mut m = Model::default();
    m.update(&a, &a, &ModelOptions::default());
    assert_eq!(m.blocked_procs, 1);
    assert_eq!(m.zombie_procs, 1);
    assert_eq!(m.blocked.as_slice()[0].pid, 5);
}

#[test]
fn level_takes_the_worst_metric() {
    let a = sample(0, 0, vec![]);
    let mut b = sample(1_000_000_000, 1_900_000_000, vec![]);
    b.sys.hw.temp_c = Some(85.0);
    let mut m = Model::default();
    m.update(&a, &b, &ModelOptions::default());
    // CPU 95 % is critical; temperature only warning.
    assert_eq!(m.level, Level::Critical);
    assert_eq!(m.alert, Alert::Cpu);
}

#[test]
fn core_percent_from_busy_and_total() {
    let mut a = sample(0, 0, vec![]);
    a.sys.cores = vec![CoreTimes {
        busy_ns: 100,
        total_ns: 1000,
    }];
    let mut b = a.clone();
    b.sys.cores = vec![CoreTimes {
        busy_ns: 400,
        total_ns: 2000,
    }];
    let mut m = Model::default();
    m.update(&a, &b, &ModelOptions::default());
    assert!((m.cores_percent[0] - 30.0).abs() < 1e-9);
}

#[test]
fn i915_busy_from_rc6_residency() {
    let mut a = sample(0, 0, vec![]);
    a.sys.hw.gpu = Some(GpuSample {
        rc6_ms: Some(10_000),
        ..Default::default()
    });
    let mut b = sample(2_000_000_000, 0, vec![]);
    b.sys.hw.gpu = Some(GpuSample {
        rc6_ms: Some(11_500),
        ..Default::default()
    });
    let mut m = Model::default();
    m.update(&a, &b, &ModelOptions::default());
    // 1.5 s idle out of 2 s: 25 % busy.
    assert!((m.gpu_busy_percent.unwrap() - 25.0).abs() < 1e-9);
}
