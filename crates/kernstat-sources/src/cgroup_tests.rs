//! Unit tests of `cgroup.rs`.

use super::*;

#[test]
fn paths_of_a_tree_by_inode() {
    let t = tempfile::tempdir().unwrap();
    let svc = t.path().join("system.slice/cron.service");
    std::fs::create_dir_all(&svc).unwrap();
    let paths = CgroupPaths::scan_dir(t.path());
    let ino = |p: &Path| std::fs::metadata(p).unwrap().ino();
    assert_eq!(paths.path(ino(t.path())), "/");
    assert_eq!(paths.path(ino(&svc)), "/system.slice/cron.service");
    assert_eq!(paths.path(0), "");
    assert_eq!(paths.path(u64::MAX), format!("#{}", u64::MAX));
}

#[test]
fn the_mount_comes_from_the_mounts_table() {
    let t = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(t.path().join("self")).unwrap();
    std::fs::write(
        t.path().join("self/mounts"),
        "proc /proc proc rw 0 0\ncgroup2 /sys/fs/cgroup/unified cgroup2 rw,nosuid 0 0\n",
    )
    .unwrap();
    let roots = Roots {
        proc: t.path().to_path_buf(),
        ..Roots::default()
    };
    assert_eq!(
        cgroup2_mount(&roots),
        Some(PathBuf::from("/sys/fs/cgroup/unified"))
    );
}

#[test]
fn a_plain_directory_is_not_a_target() {
    let t = tempfile::tempdir().unwrap();
    assert!(matches!(target(t.path()), Err(TargetError::NotCgroup2(_))));
    assert!(matches!(
        target(&t.path().join("missing")),
        Err(TargetError::Io(..))
    ));
}

fn write(dir: &Path, files: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).unwrap();
    for (name, text) in files {
        std::fs::write(dir.join(name), text).unwrap();
    }
}

#[test]
fn a_v2_tree_with_controllers_and_a_hybrid_one_without() {
    let t = tempfile::tempdir().unwrap();
    let psi = "some avg10=1.50 avg60=0.00 avg300=0.00 total=12345\nfull avg10=0.50 avg60=0.00 avg300=0.00 total=2345\n";
    write(
        t.path(),
        &[
            ("cgroup.controllers", "cpu io memory pids\n"),
            (
                "cpu.stat",
                "usage_usec 900\nuser_usec 600\nsystem_usec 300\n",
            ),
            (
                "io.stat",
                "8:0 rbytes=4096 wbytes=0 rios=1 wios=0 dbytes=0 dios=0\n",
            ),
            ("cpu.pressure", psi),
        ],
    );
    let svc = t.path().join("system.slice/web.service");
    write(
        &t.path().join("system.slice"),
        &[
            ("cgroup.controllers", "cpu memory\n"),
            ("cpu.stat", "usage_usec 50\nuser_usec 0\nsystem_usec 50\n"),
        ],
    );
    write(
        &svc,
        &[
            ("cgroup.controllers", "cpu io memory pids\n"),
            ("cpu.stat", "usage_usec 40\nuser_usec 30\nsystem_usec 10\nnr_periods 10\nnr_throttled 4\nthrottled_usec 800\n"),
            ("cpu.max", "20000 100000\n"),
            ("cpu.weight", "100\n"),
            ("memory.current", "1048576\n"),
            ("memory.max", "max\n"),
            ("memory.high", "2097152\n"),
            ("memory.events", "low 0\nhigh 3\nmax 0\noom 1\noom_kill 1\noom_group_kill 0\n"),
            ("memory.stat", "anon 1000\nfile 2000\nkernel 300\nkernel_stack 100\nsock 7\nanon_thp 0\n"),
            ("io.stat", "8:0 rbytes=10 wbytes=67108864 rios=1 wios=512 dbytes=0 dios=0\n253:1 rbytes=5 wbytes=5 rios=1 wios=1\n"),
            ("pids.current", "3\n"),
            ("pids.max", "max\n"),
            ("memory.pressure", psi),
        ],
    );
    let mut r = CgroupReader::at(t.path().to_path_buf(), false);
    let tree = r.read(CgroupWant { memory_stat: true }, None).unwrap();
    let paths: Vec<&str> = tree.groups.iter().map(|g| g.path.as_str()).collect();
    assert_eq!(paths, ["/", "/system.slice", "/system.slice/web.service"]);
    assert_eq!(tree.layout, "v2");
    let root = &tree.groups[0];
    assert_eq!(root.cpu.usage_us, 900);
    assert_eq!(root.psi_cpu.some.unwrap().total_us, 12345);
    assert!(
        root.missing
            .iter()
            .any(|m| m.contains("not kept for the root")),
        "{:?}",
        root.missing
    );
    let slice = &tree.groups[1];
    assert!(
        slice
            .missing
            .iter()
            .any(|m| m.starts_with("io: the io controller is not enabled")),
        "{:?}",
        slice.missing
    );
    let web = &tree.groups[2];
    assert_eq!(web.depth, 2);
    assert_eq!(web.cpu.throttled_periods, Some(4));
    assert_eq!(
        (web.cpu.max_us, web.cpu.period_us),
        (Some(20_000), Some(100_000))
    );
    let m = web.memory.unwrap();
    assert_eq!((m.current, m.max, m.high), (1 << 20, None, Some(2 << 20)));
    assert_eq!((m.oom, m.oom_kill, m.high_events), (1, 1, 3));
    assert_eq!(
        (m.anon, m.file, m.kernel, m.sock),
        (Some(1000), Some(2000), Some(300), Some(7))
    );
    let io = web.io.as_ref().unwrap();
    assert_eq!(io.len(), 2);
    assert_eq!(
        (io[0].major, io[0].minor, io[0].wbytes, io[0].wios),
        (8, 0, 64 << 20, 512)
    );
    assert_eq!((web.pids, web.pids_max), (Some(3), None));
    assert!(web.missing.is_empty(), "{:?}", web.missing);
    assert_eq!(web.psi_memory.full.unwrap().avg10, 0.5);
    // The depth limit.
    let shallow = r.read(CgroupWant::default(), Some(1)).unwrap();
    assert_eq!(shallow.groups.len(), 2);
    let cheap = r.read(CgroupWant::default(), None).unwrap();
    assert!(
        cheap.groups[2].memory.unwrap().anon.is_none(),
        "memory.stat only when wanted"
    );

    // Hybrid: the v2 hierarchy has no controllers, every group still has cpu.stat
    // and pressure.
    let h = tempfile::tempdir().unwrap();
    write(
        h.path(),
        &[
            ("cgroup.controllers", ""),
            ("cpu.stat", "usage_usec 5\nuser_usec 3\nsystem_usec 2\n"),
            ("io.pressure", psi),
        ],
    );
    let tree = CgroupReader::at(h.path().to_path_buf(), true)
        .read(CgroupWant::default(), None)
        .unwrap();
    assert_eq!(tree.layout, "hybrid");
    let g = &tree.groups[0];
    assert_eq!(g.cpu.usage_us, 5);
    assert!(g.memory.is_none() && g.io.is_none() && g.pids.is_none());
    assert!(
        g.missing
            .iter()
            .all(|m| m.contains("on cgroup v1 here (hybrid layout)")),
        "{:?}",
        g.missing
    );
    assert_eq!(g.missing.len(), 3);
    assert_eq!(g.psi_io.some.unwrap().avg10, 1.5);
}

fn group_dir(dir: &Path, usage: u64) {
    write(
        dir,
        &[
            ("cgroup.controllers", ""),
            (
                "cpu.stat",
                &format!("usage_usec {usage}\nuser_usec 0\nsystem_usec 0\n"),
            ),
        ],
    );
}

#[test]
fn thousands_of_groups_are_read_within_bounds_shallow_first() {
    let t = tempfile::tempdir().unwrap();
    group_dir(t.path(), 1);
    // A crowded delegated subtree ("aaa", first by name) and a service beside it.
    for i in 0..300 {
        group_dir(&t.path().join(format!("aaa/g{i:04}")), 2);
    }
    group_dir(&t.path().join("system.slice/cron.service"), 3);
    let mut r = CgroupReader::at(t.path().to_path_buf(), false).with_bounds(CgroupBounds {
        max_groups: 100,
        max_children: 50,
    });
    let tree = r.read(CgroupWant::default(), None).unwrap();
    let paths: Vec<&str> = tree.groups.iter().map(|g| g.path.as_str()).collect();
    assert!(tree.groups.len() <= 100, "{}", tree.groups.len());
    assert!(paths.contains(&"/system.slice/cron.service"), "{paths:?}");
    let aaa = tree.groups.iter().find(|g| g.path == "/aaa").unwrap();
    assert_eq!(aaa.truncated, 250, "300 children, 50 read");
    assert_eq!(paths[0], "/");
    assert_eq!(paths[1], "/aaa");
    assert_eq!(*paths.last().unwrap(), "/system.slice/cron.service");
    // Parents before children, siblings by name, whatever order they were read in.
    let mut sorted = tree.groups.clone();
    sorted.sort_by(|a, b| tree_order(&a.path, &b.path));
    assert_eq!(sorted, tree.groups);
}

#[test]
fn kept_descriptors_stay_within_the_budget() {
    let t = tempfile::tempdir().unwrap();
    group_dir(t.path(), 1);
    for i in 0..40 {
        group_dir(&t.path().join(format!("g{i:02}")), 2);
    }
    let mut r = CgroupReader::at(t.path().to_path_buf(), false).with_fd_budget(100);
    for _ in 0..3 {
        let tree = r.read(CgroupWant::default(), None).unwrap();
        assert_eq!(tree.groups.len(), 41, "every group read");
        assert!(tree.groups.iter().all(|g| g.cpu.usage_us > 0));
        assert!(r.open_descriptors() <= 100, "{}", r.open_descriptors());
    }
}

#[test]
fn names_that_are_not_utf8_are_read_and_stay_distinct() {
    use std::os::unix::ffi::OsStrExt;
    let t = tempfile::tempdir().unwrap();
    group_dir(t.path(), 1);
    let bad = |b: &[u8]| t.path().join(std::ffi::OsStr::from_bytes(b));
    group_dir(&bad(b"bad\xffutf8"), 7);
    group_dir(&bad(b"bad\xfeutf8"), 8);
    group_dir(&bad(b"esc\x1b[2J"), 9);
    let tree = CgroupReader::at(t.path().to_path_buf(), false)
        .read(CgroupWant::default(), None)
        .unwrap();
    let by = |p: &str| {
        tree.groups
            .iter()
            .find(|g| g.path == p)
            .map(|g| g.cpu.usage_us)
    };
    assert_eq!(by("/bad\\xfeutf8"), Some(8));
    assert_eq!(by("/bad\\xffutf8"), Some(7));
    assert_eq!(by("/esc\\x1b[2J"), Some(9));
    assert_eq!(tree.groups.len(), 4);
}

fn psi_text(avg10: f32, total: u64) -> String {
    format!(
        "some avg10={avg10:.2} avg60=0.00 avg300=0.00 total={total}\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=0\n"
    )
}

fn set_psi(dir: &Path, avg10: f32, total: u64) {
    for f in ["cpu.pressure", "memory.pressure", "io.pressure"] {
        std::fs::write(dir.join(f), psi_text(avg10, total)).unwrap();
    }
}

#[test]
fn a_quiet_groups_pressure_is_read_again_only_when_its_parent_stalled() {
    // The kernel moves a group's stall totals only while its parent's move: here the
    // files are rewritten behind the reader's back to show which ones it read.
    let t = tempfile::tempdir().unwrap();
    let (quiet, deep, busy) = (
        t.path().join("q"),
        t.path().join("q/deep"),
        t.path().join("b"),
    );
    for (d, usage) in [
        (t.path().to_path_buf(), 1),
        (quiet.clone(), 2),
        (deep.clone(), 3),
        (busy.clone(), 4),
    ] {
        group_dir(&d, usage);
        set_psi(&d, 0.0, 100);
    }
    set_psi(&busy, 2.5, 100);
    let mut r = CgroupReader::at(t.path().to_path_buf(), false);
    r.averages_lag_ns = 0;
    let totals = |r: &mut CgroupReader| -> Vec<(String, u64, u64)> {
        let tree = r.read(CgroupWant::default(), None).unwrap();
        tree.groups
            .iter()
            .map(|g| {
                let total = |p: &Pressure| p.some.unwrap().total_us;
                (g.path.clone(), total(&g.psi_cpu), total(&g.psi_io))
            })
            .collect()
    };
    let first = totals(&mut r);
    assert_eq!(
        r.pressure_files_read(),
        12,
        "every file at the first reading"
    );
    assert!(first.iter().all(|g| g.1 == 100), "{first:?}");
    // The root did not move: a quiet group and its child keep what they had; a group
    // whose averages are not zero is read (they decay).
    for d in [&quiet, &deep] {
        set_psi(d, 0.0, 200);
    }
    set_psi(&busy, 1.0, 300);
    let second = totals(&mut r);
    assert_eq!(
        r.pressure_files_read(),
        12 + 3 + 3,
        "the root and the busy group"
    );
    assert_eq!(
        second,
        [
            ("/".into(), 100, 100),
            ("/b".into(), 300, 300),
            ("/q".into(), 100, 100),
            ("/q/deep".into(), 100, 100)
        ]
    );
    // The root's cpu total moved: its children's cpu pressure is read, and the grandchild's
    // too where its parent's moved; io, whose totals did not move, is kept.
    std::fs::write(t.path().join("cpu.pressure"), psi_text(0.0, 150)).unwrap();
    let third = totals(&mut r);
    assert_eq!(
        third,
        [
            ("/".into(), 150, 100),
            ("/b".into(), 300, 300),
            ("/q".into(), 200, 100),
            ("/q/deep".into(), 200, 100)
        ]
    );
    // A parent file without a "some" line counts as moved, at every reading.
    std::fs::write(quiet.join("io.pressure"), "unreadable\n").unwrap();
    for total in [150, 160] {
        std::fs::write(t.path().join("io.pressure"), psi_text(0.0, total)).unwrap();
        std::fs::write(deep.join("io.pressure"), psi_text(0.0, total + 100)).unwrap();
        let tree = r.read(CgroupWant::default(), None).unwrap();
        assert_eq!(tree.groups[2].psi_io.some, None);
        assert_eq!(tree.groups[3].psi_io.some.unwrap().total_us, total + 100);
    }
}

#[test]
fn pressure_whose_averages_may_lag_its_total_is_read_until_they_cannot() {
    // A total that moved at a read whose averages were still 0.00 (the kernel
    // recomputes them every 2 s): the group is read until a read comes the lag after.
    let t = tempfile::tempdir().unwrap();
    let child = t.path().join("c");
    for d in [t.path().to_path_buf(), child.clone()] {
        group_dir(&d, 1);
        set_psi(&d, 0.0, 100);
    }
    let mut r = CgroupReader::at(t.path().to_path_buf(), false);
    r.averages_lag_ns = 200_000_000;
    let child_total = |r: &mut CgroupReader| {
        let tree = r.read(CgroupWant::default(), None).unwrap();
        tree.groups[1].psi_io.some.unwrap().total_us
    };
    assert_eq!(child_total(&mut r), 100);
    set_psi(&child, 0.0, 150);
    assert_eq!(child_total(&mut r), 150, "moved: read");
    set_psi(&child, 0.0, 160);
    assert_eq!(
        child_total(&mut r),
        160,
        "within the lag of its last move: read"
    );
    std::thread::sleep(std::time::Duration::from_millis(250));
    assert_eq!(child_total(&mut r), 160, "the lag after: read, unmoved");
    set_psi(&child, 0.0, 170);
    assert_eq!(child_total(&mut r), 160, "then kept");
    // Every tenth reading reads every file.
    let mut seen = Vec::new();
    for _ in 0..LIMITS_EVERY {
        seen.push(child_total(&mut r));
    }
    assert!(seen.contains(&170), "{seen:?}");
}
