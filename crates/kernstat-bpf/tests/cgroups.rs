//! The cgroup iterator against the cgroup files: in groups the test makes under the v2
//! hierarchy (and removes), one with a CPU-burning child; each group's CPU time from
//! the iterator against its own cpu.stat read right after, and the tree against the
//! directories. Runs as root; skips elsewhere, fails under CI=true.

use std::process::Command;

use kernstat_bpf::cgroups::CgroupIter;
use kernstat_testkit::{bpf_gate, workload_bin};

#[test]
fn every_group_with_the_cpu_time_its_cpu_stat_shows() {
    if !bpf_gate() {
        return;
    }
    let mount = kernstat_sources::cgroup::cgroup2_mount(&kernstat_sources::Roots::default())
        .expect("a cgroup2 mount");
    let top = mount.join(format!("kernstat-iter-{}", std::process::id()));
    let busy = top.join("busy");
    let idle = top.join("idle/deeper");
    let mut made = kernstat_testkit::MadeDirs(vec![]);
    for d in [&top, &busy, &top.join("idle"), &idle] {
        std::fs::create_dir(d).unwrap();
        made.0.push(d.clone());
    }
    // 300 ms of CPU in the busy group, then the process is gone (its time stays).
    let st = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo $$ > {}/cgroup.procs && exec {} burn-exit 1 300",
            busy.display(),
            workload_bin().display()
        ))
        .status()
        .unwrap();
    assert!(st.success());
    let mut it = CgroupIter::load(&top).expect("load the cgroup iterator");
    let groups = it.read().unwrap();
    let names: Vec<&str> = groups.iter().map(|g| g.name.as_str()).collect();
    assert_eq!(
        names,
        [
            top.file_name().unwrap().to_str().unwrap(),
            "busy",
            "idle",
            "deeper"
        ]
    );
    use std::os::unix::fs::MetadataExt;
    for (g, dir) in groups.iter().zip([&top, &busy, &top.join("idle"), &idle]) {
        assert_eq!(g.id, std::fs::metadata(dir).unwrap().ino(), "{}", g.name);
        let file = kernstat_testkit::cgroup_usage_us(dir) * 1000;
        // Nothing runs in these groups any more: both readings are the same total.
        assert!(
            g.usage_ns.abs_diff(file) < 1_000,
            "{}: iterator {} ns, cpu.stat {file} ns",
            g.name,
            g.usage_ns
        );
    }
    assert!(groups[1].usage_ns >= 290_000_000, "{:?}", groups[1]);
    assert_eq!(groups[0].usage_ns, groups[1].usage_ns + groups[2].usage_ns);
    assert_eq!(groups[1].parent_id, groups[0].id);
    assert_eq!(groups[3].parent_id, groups[2].id);
    assert_eq!(groups[3].level, groups[0].level + 2);
    assert_eq!(it.failed(), 0);
}
