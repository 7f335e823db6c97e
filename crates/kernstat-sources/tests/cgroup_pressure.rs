//! The cgroup reader's pressure figures on the real kernel, in groups the test creates
//! below the machine's cgroup v2 hierarchy and removes again: a group where two
//! spinning processes share one CPU (so each waits for it: CPU pressure), and a quiet
//! subtree whose files the reader keeps from its first reading (its parent does not
//! stall). Every figure must lie between the file read just before and just after the
//! reading.

use std::path::{Path, PathBuf};
use std::time::Duration;

use kernstat_sources::cgroup::{cgroup2_mount, CgroupReader, CgroupWant};
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

/// The "some" total of each pressure file of `dir`, µs.
fn totals(dir: &Path) -> [u64; 3] {
    FILES.map(|f| {
        let text = std::fs::read_to_string(dir.join(f)).expect("pressure file");
        text.lines()
            .find_map(|l| l.strip_prefix("some "))
            .and_then(|l| {
                l.split_whitespace()
                    .find_map(|kv| kv.strip_prefix("total="))
            })
            .and_then(|v| v.parse().ok())
            .expect("some total=")
    })
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
    // Two spinners on CPU 0: each waits for the other, so the group stalls on CPU.
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
        std::fs::write(busy.join("cgroup.procs"), pid.to_string()).expect("move the spinner");
        groups.workloads.push(w);
    }
    let mut reader = CgroupReader::at(top.clone(), false);
    let paths: Vec<(String, &PathBuf)> = groups
        .dirs
        .iter()
        .map(|d| {
            let rel = d.strip_prefix(&top).unwrap().display().to_string();
            (format!("/{rel}"), d)
        })
        .collect();
    reader.read(CgroupWant::default(), None).unwrap();
    let first_reads = reader.pressure_files_read();
    assert_eq!(
        first_reads,
        3 * 13,
        "every group's files at the first reading"
    );
    let busy_start = totals(&busy)[0];
    let readings = 20;
    for _ in 0..readings {
        std::thread::sleep(Duration::from_millis(50));
        let before: Vec<[u64; 3]> = paths.iter().map(|(_, d)| totals(d)).collect();
        let tree = reader.read(CgroupWant::default(), None).unwrap();
        let after: Vec<[u64; 3]> = paths.iter().map(|(_, d)| totals(d)).collect();
        for (i, (path, _)) in paths.iter().enumerate() {
            let g = tree
                .groups
                .iter()
                .find(|g| &g.path == path)
                .unwrap_or_else(|| panic!("{path} not read"));
            let read = [&g.psi_cpu, &g.psi_memory, &g.psi_io].map(|p| p.some.unwrap().total_us);
            for r in 0..3 {
                // A kept figure may trail the file by the parent's 1 µs resolution.
                assert!(
                    before[i][r].saturating_sub(1) <= read[r] && read[r] <= after[i][r],
                    "{path} {}: {} µs read, files {} µs before and {} µs after",
                    FILES[r],
                    read[r],
                    before[i][r],
                    after[i][r]
                );
            }
        }
    }
    let stalled = totals(&busy)[0] - busy_start;
    assert!(
        stalled > 100_000,
        "two spinners on one CPU stalled their group {stalled} µs in {readings} readings"
    );
    // The top, busy and calm groups at most: the calm subtree's ten are not read again.
    let later = reader.pressure_files_read() - first_reads;
    assert!(
        later <= 9 * readings,
        "{later} pressure files read in {readings} readings"
    );
}
