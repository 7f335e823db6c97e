//! The cgroup reader's pressure figures on the real kernel, in groups the test creates
//! below the machine's cgroup v2 hierarchy and removes again: a group where two
//! spinning processes share one CPU (so each waits for it: CPU pressure), and a quiet
//! subtree whose files the reader keeps (its parent does not stall), until the spinners
//! visit one of its groups. Every figure must lie between the files read just before
//! and just after each reading.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kernstat_sources::cgroup::{cgroup2_mount, CgroupReader, CgroupWant, LIMITS_EVERY};
use kernstat_sources::Roots;
use kernstat_testkit::{gate, Workload};

const FILES: [&str; 3] = ["cpu.pressure", "memory.pressure", "io.pressure"];

/// The test's groups, removed (children first) after its processes are killed.
struct Groups {
    dirs: Vec<PathBuf>,
    workloads: Vec<Workload>,
}

impl Drop for Groups {
    fn drop(&mut self) {
        self.workloads.clear();
        for d in self.dirs.iter().rev() {
            for _ in 0..50 {
                if std::fs::remove_dir(d).is_ok() || !d.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// The "some" line of each pressure file of `dir`: (avg10 %, total µs).
fn some(dir: &Path) -> [(f32, u64); 3] {
    FILES.map(|f| {
        let text = std::fs::read_to_string(dir.join(f)).expect("pressure file");
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix("some "))
            .expect("some");
        let field = |k: &str| {
            line.split_whitespace()
                .find_map(|kv| kv.strip_prefix(k))
                .unwrap_or_else(|| panic!("{k} in {line}"))
                .to_string()
        };
        (
            field("avg10=").parse().unwrap(),
            field("total=").parse().unwrap(),
        )
    })
}

/// The reader's figures for every group, each between its files read just before and
/// just after the reading: a total within [before - 1 µs, after] (a kept one may trail
/// by the parent's 1 µs resolution), avg10 one of the two (the kernel recomputes
/// averages every 2 s, so at most one change falls between). Returns the pressure files
/// the reading read.
fn read_and_check(reader: &mut CgroupReader, groups: &[(String, PathBuf)]) -> u64 {
    let reads = reader.pressure_files_read();
    let before: Vec<_> = groups.iter().map(|(_, d)| some(d)).collect();
    let tree = reader.read(CgroupWant::default(), None).unwrap();
    let after: Vec<_> = groups.iter().map(|(_, d)| some(d)).collect();
    for (i, (path, _)) in groups.iter().enumerate() {
        let g = tree
            .groups
            .iter()
            .find(|g| &g.path == path)
            .unwrap_or_else(|| panic!("{path} not read"));
        let read = [&g.psi_cpu, &g.psi_memory, &g.psi_io].map(|p| p.some.unwrap());
        for r in 0..3 {
            let ((a0, t0), (a1, t1)) = (before[i][r], after[i][r]);
            let (avg, total) = (read[r].avg10, read[r].total_us);
            assert!(
                t0.saturating_sub(1) <= total && total <= t1,
                "{path} {}: total {total} µs read, files {t0} µs before and {t1} µs after",
                FILES[r]
            );
            assert!(
                (avg - a0).abs() < 0.005 || (avg - a1).abs() < 0.005,
                "{path} {}: avg10 {avg} read, files {a0} before and {a1} after",
                FILES[r]
            );
        }
    }
    reader.pressure_files_read() - reads
}

fn move_to(group: &Path, pids: &[u32]) {
    for pid in pids {
        std::fs::write(group.join("cgroup.procs"), pid.to_string()).expect("move a spinner");
    }
}

#[test]
fn pressure_kept_for_a_quiet_subtree_is_what_the_files_say() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let mount = cgroup2_mount(&Roots::default());
    let psi = mount
        .as_ref()
        .is_some_and(|m| std::fs::read_to_string(m.join("cgroup.procs")).is_ok())
        && std::fs::read_to_string("/proc/pressure/cpu").is_ok();
    if !gate("root, cgroup v2 and PSI", root && psi, || {
        "needs root, a cgroup2 mount and /proc/pressure".into()
    }) {
        return;
    }
    let top = mount
        .unwrap()
        .join(format!("kernstat-psi-test-{}", std::process::id()));
    let busy = top.join("busy");
    let calm = top.join("calm");
    let burst = calm.join("c0");
    let mut groups = Groups {
        dirs: vec![top.clone(), busy.clone(), calm.clone()],
        workloads: Vec::new(),
    };
    groups
        .dirs
        .extend((0..10).map(|i| calm.join(format!("c{i}"))));
    for d in &groups.dirs {
        std::fs::create_dir(d).expect("create the test's group");
    }
    // Two spinners on CPU 0: each waits for the other, so their group stalls on CPU.
    let mut spinners = Vec::new();
    for _ in 0..2 {
        let w = Workload::start(&["spin"]);
        let pid = w.pid();
        // SAFETY: a zeroed cpu_set_t is valid; CPU_SET and sched_setaffinity take it by
        // pointer for this call only.
        unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(0, &mut set);
            assert_eq!(
                libc::sched_setaffinity(pid as i32, std::mem::size_of_val(&set), &set),
                0
            );
        }
        spinners.push(pid);
        groups.workloads.push(w);
    }
    move_to(&busy, &spinners);
    let paths: Vec<(String, PathBuf)> = groups
        .dirs
        .iter()
        .map(|d| {
            let rel = d.strip_prefix(&top).unwrap().display().to_string();
            (format!("/{rel}"), d.clone())
        })
        .collect();
    let mut reader = CgroupReader::at(top.clone(), false);
    // Reading 0 reads every file, as does every LIMITS_EVERY-th.
    assert_eq!(read_and_check(&mut reader, &paths), 3 * 13);
    let first = Instant::now();
    let busy_start = some(&busy)[0].1;
    let (mut reading, mut quiet_readings) = (1u64, 0);
    let mut previous = Instant::now();
    while first.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
        let started = Instant::now();
        let reads = read_and_check(&mut reader, &paths);
        if reading.is_multiple_of(LIMITS_EVERY) {
            assert_eq!(reads, 3 * 13, "reading {reading} reads every file");
        } else if previous.duration_since(first) > Duration::from_millis(3100) {
            // Three seconds after their first reading, the quiet subtree's ten groups
            // are kept: the top, busy and calm groups' files at most are read.
            assert!(reads <= 9, "reading {reading}: {reads} pressure files read");
            quiet_readings += 1;
        }
        previous = started;
        reading += 1;
    }
    assert!(
        quiet_readings >= 5,
        "{quiet_readings} readings checked quiet"
    );
    let stalled = some(&busy)[0].1 - busy_start;
    assert!(
        stalled > 100_000,
        "two spinners on one CPU stalled their group {stalled} µs"
    );
    // A burst in one of the kept groups: it is read again (its parent's total moves),
    // and its averages, which follow up to 2 s later, are read too, not kept at 0.00.
    let burst_start = some(&burst)[0].1;
    move_to(&burst, &spinners);
    let moved_at = Instant::now();
    while moved_at.elapsed() < Duration::from_millis(300) {
        std::thread::sleep(Duration::from_millis(50));
        read_and_check(&mut reader, &paths);
    }
    move_to(&busy, &spinners);
    assert!(
        some(&burst)[0].1 - burst_start > 50_000,
        "the burst stalled its group"
    );
    let ended = Instant::now();
    while ended.elapsed() < Duration::from_secs(3) {
        std::thread::sleep(Duration::from_millis(50));
        read_and_check(&mut reader, &paths);
    }
    let tree = reader.read(CgroupWant::default(), None).unwrap();
    let shown = tree.groups.iter().find(|g| g.path == "/calm/c0").unwrap();
    assert!(
        shown.psi_cpu.some.unwrap().avg10 > 0.0,
        "the burst's average, 3 s after it: {:?}",
        shown.psi_cpu
    );
}
