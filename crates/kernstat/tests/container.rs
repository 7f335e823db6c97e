//! kernstat inside a container: a private pid, cgroup and mount namespace (unshare),
//! whose tasks are in a cgroup the test creates, beside a fork storm outside it. The
//! machine CPU % and the process list kernstat shows inside must be the namespace's
//! own, compared with the namespace's own /proc and its cgroup's cpu.stat, also with an
//! iterator pinned outside (a pin walks the host's tasks: `ps` inside does not read it);
//! with a memory limit on its cgroup, memory's total is that limit and says so.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};

use kernstat_testkit::{gate, which};
use serde_json::Value;

fn mount_of(fstype: &str, option: Option<&str>) -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let ok = f.get(2) == Some(&fstype)
            && option.is_none_or(|o| f.get(3).is_some_and(|x| x.split(',').any(|y| y == o)));
        ok.then(|| PathBuf::from(f[1]))
    })
}

/// The container's side, as a runtime sets it up: cgroupfs mounted again inside the
/// cgroup namespace (so its root is the container's group), then a workload and
/// kernstat.
const INSIDE: &str = r#"
umount "$CGM" && mount -t cgroup2 none "$CGM" || exit 9
[ -n "$MEMM" ] && { umount "$MEMM" && mount -t cgroup -o memory none "$MEMM" || exit 9; }
usage() { awk '/^usage_usec/ {print $2}' "$CGM/cpu.stat"; }
pids() { ls /proc | grep -E '^[0-9]+$' | tr '\n' ' '; }
nice -n -20 "$W" duty 30 >/dev/null &
sleep 0.5
u0=$(usage); p0=$(pids); t0=$(date +%s%N)
"$K" snapshot --json --interval 2 > "$D/snap" 2> "$D/err"
rc=$?
u1=$(usage); p1=$(pids); t1=$(date +%s%N)
"$K" ps --json --fields pid,ppid > "$D/ps" 2>> "$D/err"
echo "RC $rc"
echo "USAGE $u0 $u1 $t0 $t1"
echo "P0 $p0"
echo "P1 $p1"
echo "ME $$"
kill %1
"#;

#[test]
fn inside_a_pid_and_cgroup_namespace_every_figure_is_the_containers() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    let v2 = mount_of("cgroup2", None);
    let v1_memory = mount_of("cgroup", Some("memory"));
    let tools = which("unshare").is_some() && which("stress-ng").is_some();
    if !gate(
        "root, cgroup2, unshare and stress-ng",
        root && v2.is_some() && tools,
        || "needs root, a cgroup v2 mount, unshare and stress-ng".into(),
    ) {
        return;
    }
    let name = format!("kernstat-test-ns-{}", std::process::id());
    let cg_mount = v2.unwrap();
    let cg = cg_mount.join(&name);
    std::fs::create_dir(&cg).unwrap();
    let mut made = kernstat_testkit::MadeDirs(vec![cg.clone()]);
    // A 512 MiB memory limit where the memory controller is: v1's on a hybrid machine,
    // the same group on a pure v2 one where the root delegates memory.
    let limit: u64 = 512 << 20;
    let mem_dir = match &v1_memory {
        Some(m) => {
            let d = m.join(&name);
            std::fs::create_dir(&d).unwrap();
            made.0.insert(0, d.clone());
            std::fs::write(d.join("memory.limit_in_bytes"), limit.to_string()).unwrap();
            Some(d)
        }
        None => {
            let ok = std::fs::write(cg.join("memory.max"), limit.to_string()).is_ok();
            ok.then(|| cg.clone())
        }
    };
    let mut storm = Command::new("stress-ng")
        .args(["--fork", "2", "--timeout", "30"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let dir = tempfile::tempdir().unwrap();
    let pin_dir = format!("/sys/fs/bpf/kernstat_container_{}", std::process::id());
    let (code, _, err) = common::run(&["ps", "--pin", &pin_dir]);
    assert_eq!(code, Some(0), "pin: {err}");
    let _unpin = Unpin(pin_dir.clone());
    // Into the groups first, then the namespaces: the cgroup namespace's root is the
    // test's group, the pid namespace holds only what the script starts.
    let mut join = format!("echo $$ > {}/cgroup.procs; ", cg.display());
    if let Some(m) = &mem_dir {
        if m != &cg {
            join.push_str(&format!("echo $$ > {}/cgroup.procs; ", m.display()));
        }
    }
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "{join}exec unshare --pid --fork --mount-proc --cgroup sh -c '{}'",
            INSIDE.replace('\'', "'\\''")
        ))
        .env("K", common::kernstat())
        .env("W", kernstat_testkit::workload_bin())
        .env("CGM", &cg_mount)
        .env(
            "MEMM",
            v1_memory
                .as_deref()
                .map(|p| p.as_os_str())
                .unwrap_or_default(),
        )
        .env("D", dir.path())
        .env("XDG_RUNTIME_DIR", common::private_runtime_dir())
        // A pin made outside (as a user's `kernstat ps --pin` is): `ps` inside must not
        // read it, since it walks the host's tasks.
        .env("KERNSTAT_PIN_DIR", &pin_dir)
        .output()
        .unwrap();
    let _ = storm.kill();
    let _ = storm.wait();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let field = |k: &str| -> Vec<u64> {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(k))
            .unwrap_or_else(|| panic!("no {k}: {stdout}"))
            .split_whitespace()
            .map(|w| w.parse().unwrap())
            .collect()
    };
    assert_eq!(field("RC "), [0], "{stdout}");
    let err = std::fs::read_to_string(dir.path().join("err")).unwrap();
    assert_eq!(err, "", "no notice: BPF works in the container");
    let snap: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("snap")).unwrap()).unwrap();
    assert_eq!(snap["source"], "bpf");
    // CPU: the namespace's tasks are the group's, so the group's cpu.stat over a window
    // around the command bounds the answer (a 30 % duty, the shell, kernstat itself).
    // The window also holds kernstat's start-up, before its interval begins (a debug
    // build loading its programs: 5-6 points of this window under a parallel suite), so
    // the figure may be below the group's by that much, never above it; the storm
    // outside would put it far above.
    let u = field("USAGE ");
    let group_percent = (u[1] - u[0]) as f64 * 1e3 / (u[3] - u[2]) as f64 * 100.0;
    let ncpus = snap["ncpus"].as_f64().unwrap();
    let shown = snap["cpu_percent"].as_f64().unwrap() * ncpus;
    assert!(
        shown <= group_percent + 3.0 && (shown - 30.0).abs() <= 8.0,
        "inside: {shown:.1} % of a core; the group's cpu.stat: {group_percent:.1} % (a fork storm outside fills both CPUs)"
    );
    // Processes: those the namespace's /proc listed before and after, and none else.
    let (p0, p1) = (field("P0 "), field("P1 "));
    let procs: Vec<u64> = snap["procs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["pid"].as_u64().unwrap())
        .collect();
    for p in &procs {
        assert!(
            p0.contains(p) || p1.contains(p) || procs.len() < 8,
            "pid {p} is not the namespace's: {procs:?} vs {p0:?} / {p1:?}"
        );
    }
    for p in p0.iter().filter(|p| p1.contains(p)) {
        assert!(
            procs.contains(p),
            "pid {p} lived throughout but is missing: {procs:?}"
        );
    }
    assert!(procs.len() <= 8, "only the container's handful: {procs:?}");
    // `ps` inside: the namespace's pids, its init first with no parent it can see.
    let ps: Vec<Value> = std::fs::read_to_string(dir.path().join("ps"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(ps.iter().all(|p| p["source"] != "bpf-pin"), "{ps:?}");
    assert_eq!(ps[0]["pid"], 1, "{ps:?}");
    assert_eq!(ps[0]["ppid"], 0, "{ps:?}");
    for p in &ps {
        let pid = p["pid"].as_u64().unwrap();
        assert!(
            pid < 100
                && (p1.contains(&pid) || p0.contains(&pid) || pid > *p1.iter().max().unwrap()),
            "{p}"
        );
    }
    // Memory: the group's limit is the total, and it says so.
    if mem_dir.is_some() {
        assert_eq!(snap["mem"]["total_bytes"], limit, "{}", snap["mem"]);
        assert_eq!(snap["mem"]["total_source"], "cgroup");
        assert!(snap["mem"]["used_bytes"].as_u64().unwrap() > 0);
    }
}

/// Removes a pin directory when dropped.
struct Unpin(String);

impl Drop for Unpin {
    fn drop(&mut self) {
        let _ = common::run(&["ps", "--unpin", &self.0]);
    }
}
