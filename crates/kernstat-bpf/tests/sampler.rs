//! The BPF sampler against independent sources: /proc (stat, statm, io, the pid list)
//! and workloads with known answers. Runs as root; skips elsewhere, fails under CI=true.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use kernstat_bpf::Sampler;
use kernstat_model::TaskTable;
use kernstat_testkit::{
    bpf_gate, ncpus, proc_cpu_ns, proc_io, proc_rss_bytes, proc_stat_busy_ns, proc_stat_task_ns,
    tool_gate, Workload,
};

fn sampler() -> Option<Sampler> {
    if !bpf_gate() {
        return None;
    }
    Some(Sampler::load().expect("load the BPF sampler"))
}

fn proc_pids() -> BTreeSet<u32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

#[test]
fn sees_the_same_processes_as_proc() {
    let Some(mut s) = sampler() else { return };
    let _idle = kernstat_testkit::IdleProcs::spawn(20).unwrap();
    let mut t = TaskTable::default();
    let before = proc_pids();
    s.sample(&mut t).unwrap();
    let after = proc_pids();
    let ours: BTreeSet<u32> = t.procs.iter().map(|p| p.pid).collect();
    // Alive during both /proc reads, so alive during the walk: must be seen.
    let missing: Vec<u32> = before
        .intersection(&after)
        .filter(|p| !ours.contains(p))
        .copied()
        .collect();
    // PID 1 is the one known difference in sandboxes where it is not in our pid
    // namespace's view of the task iterator; see docs/limits.md.
    let missing: Vec<u32> = missing.into_iter().filter(|&p| p != 1).collect();
    assert!(
        missing.is_empty(),
        "in /proc but not in the walk: {missing:?}"
    );
    // Seen by the walk but in neither /proc read: only processes that already exited.
    let extra: Vec<u32> = ours
        .iter()
        .filter(|p| !before.contains(p) && !after.contains(p))
        .filter(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
        .copied()
        .collect();
    assert!(extra.is_empty(), "in the walk but not in /proc: {extra:?}");
    assert!(t.tasks >= t.procs.len() as u64);
}

#[test]
fn cpu_time_of_all_threads_live_and_exited_matches_proc() {
    let Some(mut s) = sampler() else { return };
    // 2 threads burn 150 ms and exit; then 3 threads burn 200 ms and stay.
    let w = Workload::start(&["burn", "3", "200", "2", "150"]);
    let mut t = TaskTable::default();
    let lo = proc_cpu_ns(w.pid());
    s.sample(&mut t).unwrap();
    let hi = proc_cpu_ns(w.pid());
    let ours = t.get(w.pid()).expect("workload in the walk").cpu_ns;
    // /proc/PID/stat is in clock ticks (10 ms) for utime and stime separately.
    let tick = 10_000_000;
    assert!(
        ours + 2 * tick >= lo && ours <= hi + 2 * tick,
        "ours {ours} ns, /proc {lo}..{hi} ns"
    );
    assert!(
        ours >= 800_000_000,
        "at least 2x150 + 3x200 ms of work: {ours}"
    );
}

#[test]
fn rss_matches_statm() {
    let Some(mut s) = sampler() else { return };
    let w = Workload::start(&["alloc", "64"]);
    let mut t = TaskTable::default();
    s.sample(&mut t).unwrap();
    let theirs = proc_rss_bytes(w.pid());
    let ours = t.get(w.pid()).unwrap().rss_bytes;
    // mm->rss_stat counters are percpu_counters: the shared count we (and get_mm_counter)
    // read lags the per-CPU deltas by at most batch (32 pages here) per CPU and counter.
    let slack = 3 * 32 * ncpus() * 4096;
    assert!(
        ours.abs_diff(theirs) <= slack,
        "ours {ours}, statm {theirs}, slack {slack}"
    );
    assert!(ours >= 64 << 20, "64 MiB touched: {ours}");
}

#[test]
fn storage_writes_match_proc_io() {
    let Some(mut s) = sampler() else { return };
    let dir = tempfile::tempdir_in(
        std::env::var("CARGO_TARGET_TMPDIR").unwrap_or_else(|_| "/var/tmp".into()),
    )
    .unwrap();
    let path = dir.path().join("eight-mib");
    let w = Workload::start(&["write", &(8u64 << 20).to_string(), path.to_str().unwrap()]);
    let mut t = TaskTable::default();
    s.sample(&mut t).unwrap();
    let (_, wr) = proc_io(w.pid());
    let ours = t.get(w.pid()).unwrap();
    assert_eq!(ours.write_bytes, wr, "same counter as /proc/PID/io");
    assert!(
        ours.write_bytes >= 8 << 20,
        "8 MiB written and fsynced: {}",
        ours.write_bytes
    );
}

/// The machine's busy share over `d`: the sampler's (tasks' run time) and /proc/stat's,
/// the latter as tasks' time (user, nice, system) and as everything but idle (also irq,
/// softirq and steal, which no task owns).
struct Busy {
    ours: f64,
    tasks: f64,
    all: f64,
}

impl Busy {
    /// The sampler's figure lies between /proc/stat's task time and its whole busy time,
    /// within 3 points of tick rounding: where the host steals CPU from this VM (seen:
    /// 4 points under a suite run beside other VMs' load), or the kernel charges interrupt
    /// time apart, tasks' run time is short of /proc/stat's busy time by just that.
    fn agrees(&self) -> bool {
        self.ours >= self.tasks - 3.0 && self.ours <= self.all + 3.0
    }
}

impl std::fmt::Display for Busy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ours {:.1}%, /proc/stat tasks {:.1}%, all busy {:.1}%",
            self.ours, self.tasks, self.all
        )
    }
}

fn busy_over(s: &mut Sampler, d: Duration) -> Busy {
    let mut t = TaskTable::default();
    let a = s.sample(&mut t).unwrap();
    let (pa, ta) = (proc_stat_busy_ns(), proc_stat_task_ns());
    std::thread::sleep(d);
    let b = s.sample(&mut t).unwrap();
    let (pb, tb) = (proc_stat_busy_ns(), proc_stat_task_ns());
    let wall = (b.ktime_ns - a.ktime_ns) as f64 * ncpus() as f64;
    Busy {
        ours: (b.busy_ns - a.busy_ns) as f64 / wall * 100.0,
        tasks: (tb - ta) as f64 / wall * 100.0,
        all: (pb - pa) as f64 / wall * 100.0,
    }
}

#[test]
fn machine_cpu_percent_matches_proc_stat_under_load() {
    let Some(mut s) = sampler() else { return };
    if !tool_gate("stress-ng") {
        return;
    }
    let mut load = std::process::Command::new("stress-ng")
        .args(["--cpu", "1", "--timeout", "10"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let busy = busy_over(&mut s, Duration::from_secs(2));
    kernstat_testkit::terminate(&mut load);
    assert!(busy.agrees(), "{busy}");
    assert!(
        busy.ours > 100.0 / ncpus() as f64 * 0.8,
        "one CPU busy: {busy}"
    );
}

#[test]
fn a_fork_storm_still_adds_up() {
    let Some(mut s) = sampler() else { return };
    if !tool_gate("stress-ng") {
        return;
    }
    let mut load = std::process::Command::new("stress-ng")
        .args(["--fork", "2", "--timeout", "10"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let started = Instant::now();
    let busy = busy_over(&mut s, Duration::from_secs(2));
    kernstat_testkit::terminate(&mut load);
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "storm ran during the window"
    );
    // Every forked child lives and dies between two samples: only the exit and free
    // hooks see its time. Without them this reads far lower than /proc/stat.
    assert!(busy.agrees(), "{busy}");
    assert!(busy.all > 50.0, "the storm kept the machine busy: {busy}");
}
