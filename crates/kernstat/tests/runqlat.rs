//! `kernstat runqlat` against its yardsticks: libbpf-tools runqlat side by side, the
//! scheduler's own per-task accounting (/proc/PID/schedstat: run_delay and pcount),
//! pinned and cgroup-confined workloads whose answers are known, and its own raw_tp
//! fallback. Needs root (CI=true: must run), stress-ng and taskset.

mod common;
use common::kernstat;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kernstat_testkit::{bpf_gate, tool_gate};
use serde_json::Value;

/// A log2 bucket: (lo, hi, count).
type Bucket = (u64, u64, u64);

/// These tests load the machine and compare what two tracers see: one at a time.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn gates(tools: &[&str]) -> bool {
    bpf_gate() && tools.iter().all(|t| tool_gate(t))
}

struct Load(Child);

impl Load {
    fn start(args: &[&str]) -> Self {
        let mut c = Command::new(args[0]);
        c.args(&args[1..])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let child = c.spawn().expect("start the load");
        std::thread::sleep(Duration::from_millis(500));
        Load(child)
    }

    /// The stress-ng workers (children of the stress-ng parent).
    fn workers(&self) -> Vec<u32> {
        let me = self.0.id();
        let mut v: Vec<u32> = std::fs::read_dir("/proc")
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .filter(|p| ppid(*p) == Some(me))
            .collect();
        v.sort_unstable();
        v
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        let workers = self.workers();
        // SAFETY: signalling our own child and its children.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let _ = self.0.wait();
        for w in workers {
            // SAFETY: as above; the worker may be gone already (ESRCH).
            unsafe { libc::kill(w as i32, libc::SIGKILL) };
            while Path::new(&format!("/proc/{w}")).exists() && ppid(w).is_some() {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        // Let the machine settle: the next test may measure an idle machine.
        std::thread::sleep(Duration::from_millis(500));
    }
}

fn ppid(pid: u32) -> Option<u32> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s[s.rfind(')')? + 2..]
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

fn json_intervals(args: &[&str]) -> Vec<Value> {
    let out = Command::new(kernstat())
        .arg("runqlat")
        .arg("--json")
        .args(args)
        .output()
        .expect("run kernstat runqlat");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// (count, p50 log2 bucket index) from log2 buckets [(lo, hi, count)].
fn count_and_p50_bucket(buckets: &[Bucket]) -> (u64, usize) {
    let total: u64 = buckets.iter().map(|b| b.2).sum();
    let mut seen = 0;
    for (i, b) in buckets.iter().enumerate() {
        seen += b.2;
        if seen * 2 >= total {
            return (total, i);
        }
    }
    (total, 0)
}

fn ours_buckets(v: &Value) -> Vec<Bucket> {
    v["buckets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|b| {
            (
                b["lo"].as_u64().unwrap(),
                b["hi"].as_u64().unwrap(),
                b["count"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// libbpf-tools runqlat and kernstat runqlat, three intervals of `secs` each, kernstat
/// started once libbpf-tools is attached. Each tool's start-up (fork, exec, BPF load) and
/// shutdown is a burst of wakeups that dominates an idle machine; they fall in the first
/// and last intervals. The middle intervals overlap but for kernstat's start-up lag and
/// contain neither, so those are compared.
fn side_by_side(secs: u64) -> (Vec<Bucket>, Vec<Bucket>) {
    let mut theirs = Command::new("/usr/sbin/runqlat")
        .args([&secs.to_string(), "3"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(theirs.stdout.take().unwrap()).lines();
    // Its first line comes once its programs are attached.
    let first = lines.next().unwrap().unwrap();
    assert!(first.starts_with("Tracing"), "{first}");
    let ours = json_intervals(&[&secs.to_string(), "3"]);
    let mut intervals: Vec<Vec<Bucket>> = Vec::new();
    for line in lines {
        let line = line.unwrap();
        if line.contains("usecs") {
            intervals.push(Vec::new());
            continue;
        }
        let Some((range, rest)) = line.split_once(':') else {
            continue;
        };
        let Some((lo, hi)) = range.split_once("->") else {
            continue;
        };
        let count = rest
            .split('|')
            .next()
            .unwrap()
            .trim()
            .parse::<u64>()
            .unwrap();
        if let Some(cur) = intervals.last_mut() {
            cur.push((
                lo.trim().parse().unwrap(),
                hi.trim().parse().unwrap(),
                count,
            ));
        }
    }
    let _ = theirs.wait();
    assert_eq!(intervals.len(), 3, "libbpf-tools printed three intervals");
    (intervals.swap_remove(1), ours_buckets(&ours[1]))
}

/// Whether the two distributions agree: enough events, counts within 10 %, the same p50
/// bucket.
fn agreement(label: &str, theirs: &[Bucket], ours: &[Bucket]) -> Result<(), String> {
    let (tc, tp) = count_and_p50_bucket(theirs);
    let (oc, op) = count_and_p50_bucket(ours);
    if !(tc > 50 && oc > 50) {
        return Err(format!("{label}: too few events to compare ({tc}, {oc})"));
    }
    let diff = tc.abs_diff(oc) as f64 / tc as f64;
    if diff > 0.10 {
        return Err(format!(
            "{label}: libbpf-tools {tc} events, kernstat {oc}\n{theirs:?}\n{ours:?}"
        ));
    }
    if tp != op {
        return Err(format!(
            "{label}: same p50 bucket: libbpf-tools {tp}, kernstat {op}\n{theirs:?}\n{ours:?}"
        ));
    }
    Ok(())
}

fn agree(label: &str, theirs: &[Bucket], ours: &[Bucket]) {
    if let Err(e) = agreement(label, theirs, ours) {
        panic!("{e}");
    }
}

#[test]
fn agrees_with_libbpf_tools_runqlat_idle_and_loaded() {
    let _one = serial();
    if !gates(&["stress-ng"])
        || !kernstat_testkit::gate(
            "libbpf-tools runqlat",
            Path::new("/usr/sbin/runqlat").exists(),
            || "libbpf-tools is not installed".into(),
        )
    {
        return;
    }
    // An idle machine makes ~35 wakeups a second, and its run-queue latencies sit
    // around the 4 µs bucket edge: measured here, the share below 4 µs moved between
    // 0.18 and 0.57 from one minute to the next, so one 4 s window's median lands on
    // either side of the edge by chance. Up to three windows are compared; each must
    // pass every check of the loaded case to count, and a real disagreement (events
    // missed, timestamps shifted) fails all three.
    let mut failures = Vec::new();
    for _ in 0..3 {
        let (t, o) = side_by_side(4);
        match agreement("idle", &t, &o) {
            Ok(()) => break,
            Err(e) => failures.push(e),
        }
    }
    assert!(failures.len() < 3, "{}", failures.join("\n"));
    for f in &failures {
        eprintln!("idle window that disagreed (another one agreed): {f}");
    }
    let _load = Load::start(&["stress-ng", "--cpu", "4", "--timeout", "30"]);
    let (t, o) = side_by_side(4);
    agree("stress-ng --cpu 4", &t, &o);
}

/// sum_exec_runtime, run_delay (ns waiting on a run queue), pcount (times run).
fn schedstat(pid: u32) -> Bucket {
    let s = std::fs::read_to_string(format!("/proc/{pid}/schedstat")).unwrap();
    let v: Vec<u64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
    (v[0], v[1], v[2])
}

#[test]
fn a_pid_filter_sees_that_process_only_and_all_of_it() {
    let _one = serial();
    if !gates(&["stress-ng", "taskset"]) {
        return;
    }
    // Three spinning workers on one CPU: each is preempted all the time.
    let load = Load::start(&[
        "taskset",
        "-c",
        "0",
        "stress-ng",
        "--cpu",
        "3",
        "--timeout",
        "30",
    ]);
    let workers = load.workers();
    let target = workers[0];
    let before = schedstat(target);
    let v = json_intervals(&["-p", &target.to_string(), "-L", "2", "1"]);
    let after = schedstat(target);
    let per = v[0]["per"].as_array().unwrap();
    assert!(!per.is_empty(), "events for {target}");
    for e in per {
        assert_eq!(e["key"], target, "only the filtered process's threads: {e}");
    }
    // The scheduler counts every time the task ran (pcount): each of those is one
    // run-queue latency event; our window is slightly shorter than the two reads.
    let ours = v[0]["count"].as_u64().unwrap() as f64;
    let runs = (after.2 - before.2) as f64;
    assert!(
        ours <= runs * 1.02 && ours >= runs * 0.80,
        "events {ours} vs pcount delta {runs}"
    );
    // And the time it waited (run_delay) is what the histogram adds up to: check the
    // median against the mean wait, which for a round-robin of 3 on a CPU is ~2 slices.
    let mean_wait_us = (after.1 - before.1) as f64 / runs / 1000.0;
    let p50 = v[0]["p50"].as_f64().unwrap();
    assert!(
        p50 > mean_wait_us / 4.0 && p50 < mean_wait_us * 4.0,
        "p50 {p50} us vs mean wait {mean_wait_us} us"
    );
}

#[test]
fn a_process_pinned_to_cpu_1_shows_only_on_cpu_1() {
    let _one = serial();
    if !gates(&["stress-ng", "taskset"]) || kernstat_testkit::ncpus() < 2 {
        return;
    }
    let load = Load::start(&[
        "taskset",
        "-c",
        "1",
        "stress-ng",
        "--cpu",
        "2",
        "--timeout",
        "30",
    ]);
    let target = load.workers()[0];
    let v = json_intervals(&["-C", "-p", &target.to_string(), "2", "1"]);
    let per = v[0]["per"].as_array().unwrap();
    assert!(!per.is_empty());
    for e in per {
        assert_eq!(e["kind"], "cpu");
        assert_eq!(e["key"], 1, "only CPU 1's histogram has events: {per:?}");
    }
}

#[test]
fn a_cgroup_filter_tests_the_woken_task() {
    let _one = serial();
    if !gates(&["stress-ng", "taskset"]) {
        return;
    }
    let Some(root) = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
        .into_iter()
        .find(|r| {
            Path::new(r).join("cgroup.procs").exists()
                && Path::new(r).join("cgroup.subtree_control").exists()
        })
    else {
        kernstat_testkit::gate("a cgroup v2 hierarchy", false, || "none mounted".into());
        return;
    };
    let cg = Path::new(root).join(format!("kernstat-test-{}", std::process::id()));
    std::fs::create_dir(&cg).unwrap();
    let load = Load::start(&[
        "taskset",
        "-c",
        "0",
        "stress-ng",
        "--cpu",
        "2",
        "--timeout",
        "30",
    ]);
    let inside = load.workers()[0];
    std::fs::write(cg.join("cgroup.procs"), inside.to_string()).unwrap();
    let v = json_intervals(&["-c", cg.to_str().unwrap(), "-P", "2", "1"]);
    drop(load);
    let _ = std::fs::remove_dir(&cg);
    let per = v[0]["per"].as_array().unwrap();
    assert!(!per.is_empty(), "events from the process in the cgroup");
    for e in per {
        assert_eq!(
            e["key"],
            inside,
            "only the process inside {}: {per:?}",
            cg.display()
        );
    }
}

#[test]
fn raw_tracepoints_and_tp_btf_see_the_same_events() {
    let _one = serial();
    if !gates(&["stress-ng"]) {
        return;
    }
    let _load = Load::start(&["stress-ng", "--cpu", "3", "--timeout", "30"]);
    let raw = std::thread::spawn(|| json_intervals(&["--raw-tp", "3", "1"]));
    let btf = json_intervals(&["3", "1"]);
    let raw = raw.join().unwrap();
    assert_eq!(raw[0]["attach"], "raw_tp");
    assert_eq!(btf[0]["attach"], "tp_btf");
    agree(
        "raw_tp vs tp_btf",
        &ours_buckets(&raw[0]),
        &ours_buckets(&btf[0]),
    );
}

#[test]
fn csv_rows_and_plots() {
    let _one = serial();
    if !bpf_gate() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("rq.png");
    let out = Command::new(kernstat())
        .args(["runqlat", "--csv", "--plot"])
        .arg(&png)
        .args(["1", "2"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "timestamp,count,p50_us,p90_us,p99_us,max_us");
    assert_eq!(lines.len(), 3);
    for row in &lines[1..] {
        let f: Vec<f64> = row.split(',').map(|x| x.parse().unwrap()).collect();
        assert_eq!(f.len(), 6);
        assert!(
            f[2] <= f[3] && f[3] <= f[4] && f[4] <= f[5],
            "p50 <= p90 <= p99 <= max: {row}"
        );
    }
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    assert!(bytes.len() > 10_000, "a drawn chart, not an empty image");
    // Bad input: one message, non-zero status.
    for (args, needle) in [
        (&["runqlat", "-P", "-L", "1", "1"][..], "choose one of"),
        (
            &["runqlat", "--plot", "x.jpg", "1", "1"][..],
            ".png or .svg",
        ),
        (
            &["runqlat", "-c", "/tmp", "1", "1"][..],
            "not a cgroup v2 directory",
        ),
    ] {
        let out = Command::new(kernstat()).args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(needle), "{args:?}: {err}");
    }
}
