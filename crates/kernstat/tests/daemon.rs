//! `kernstat daemon` and its clients as users run them: values against /proc and
//! workloads with known answers, exit statuses, `get` without a daemon, a clean stop on
//! SIGTERM, a system daemon that drops to `nobody`, and `bar --daemon` rendering the
//! daemon's samples without loading BPF itself. BPF/root tests follow the usual gates
//! (CI=true: they must run).

mod common;
use common::{kernstat, run, DaemonProc};

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kernstat_testkit::{bpf_gate, proc_rss_bytes, Lines, Workload};
use serde_json::Value;

fn meminfo_kb(field: &str) -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap()
}

fn loadavg_one() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// The daemon's source: BPF as root (must work under CI), procfs otherwise.
fn source_args() -> &'static [&'static str] {
    if bpf_gate() {
        &[]
    } else {
        &["--no-bpf"]
    }
}

#[test]
fn values_match_proc_and_a_known_workload() {
    let d = DaemonProc::start(source_args());
    assert_eq!(
        d.value("mem.total").as_u64().unwrap(),
        meminfo_kb("MemTotal") * 1024
    );
    // The kernel recomputes the load every 5 s and the cached value is up to one
    // daemon interval old: it must match /proc/loadavg once both are past an update.
    let t = Instant::now();
    loop {
        let before = loadavg_one();
        let load = d.value("load.one").as_f64().unwrap();
        std::thread::sleep(Duration::from_millis(400));
        let after = loadavg_one();
        if before == after && (load - before).abs() <= 0.011 {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(15),
            "load.one {load} vs /proc/loadavg {before}..{after}"
        );
    }
    // psi.cpu.some is /proc/pressure/cpu's "some avg10" (recomputed every 2 s: compare
    // once both readings around the request agree).
    if Path::new("/proc/pressure/cpu").exists() {
        let avg10 = || -> f64 {
            let text = std::fs::read_to_string("/proc/pressure/cpu").unwrap();
            let some = text.lines().find(|l| l.starts_with("some ")).unwrap();
            some.split_whitespace()
                .find_map(|f| f.strip_prefix("avg10="))
                .unwrap()
                .parse()
                .unwrap()
        };
        let t = Instant::now();
        loop {
            let before = avg10();
            let psi = d.value("psi.cpu.some").as_f64().unwrap();
            std::thread::sleep(Duration::from_millis(400));
            let after = avg10();
            if before == after && (psi - before).abs() <= 0.011 {
                break;
            }
            assert!(
                t.elapsed() < Duration::from_secs(15),
                "psi.cpu.some {psi} vs /proc/pressure/cpu avg10 {before}..{after}"
            );
        }
    }
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    assert_eq!(d.value("hostname.name"), host.trim());
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(d.value("uname.release"), release.trim());
    let want_source = if source_args().is_empty() {
        "bpf"
    } else {
        "procfs"
    };
    assert_eq!(d.value("source"), want_source);
    // SAFETY: geteuid has no preconditions.
    assert_eq!(d.value("user.uid"), unsafe { libc::geteuid() });
    // procs.count against /proc's pid directories (other tests start and stop processes
    // meanwhile, and this sandbox hides PID 1 from BPF: a small margin).
    let proc_pids = || {
        std::fs::read_dir("/proc")
            .unwrap()
            .flatten()
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .bytes()
                    .all(|b| b.is_ascii_digit())
            })
            .count() as i64
    };
    let (before, n, after) = (proc_pids(), d.value("procs.count"), proc_pids());
    let n = n.as_i64().unwrap();
    assert!(
        n >= before.min(after) - 10 && n <= before.max(after) + 10,
        "procs.count {n} vs /proc {before}..{after}"
    );
    // cpu.percent: with every CPU kept busy by stress-ng, the machine is ~100 % busy.
    if kernstat_testkit::tool_gate("stress-ng") {
        let ncpus = kernstat_testkit::ncpus().to_string();
        let mut load = Command::new("stress-ng")
            .args(["--cpu", &ncpus, "--timeout", "20"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let t = Instant::now();
        let mut seen = 0.0;
        while t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(300));
            seen = d.value("cpu.percent").as_f64().unwrap();
            if seen >= 90.0 {
                break;
            }
        }
        // SIGTERM: stress-ng stops its workers too (SIGKILL would orphan them).
        // SAFETY: kill with a valid signal.
        unsafe { libc::kill(load.id() as i32, libc::SIGTERM) };
        let _ = load.wait();
        assert!(seen >= 90.0, "cpu.percent {seen} with every CPU busy");
    }

    // A process holding 512 MiB is in the memory list with its /proc RSS, below only
    // processes holding more (a compiler running beside the suite can hold more; a
    // sample taken while it was still touching its pages may show less: wait for one
    // after "ready").
    let w = Workload::start(&["alloc", "512"]);
    let t = Instant::now();
    loop {
        let top = d.value("top.mem");
        let rows = top.as_array().unwrap();
        let rss = proc_rss_bytes(w.pid()) as f64;
        let value = |r: &Value| r["value"].as_f64().unwrap_or(0.0);
        let at = rows.iter().position(|r| r["pid"] == w.pid());
        if let Some(i) = at.filter(|&i| (value(&rows[i]) - rss).abs() <= rss * 0.01) {
            assert_eq!(rows[i]["comm"], "ks-workload");
            assert!(
                rows[..i].iter().all(|r| value(r) >= value(&rows[i])),
                "top.mem is sorted by RSS: {top}"
            );
            break;
        }
        let crowded = rows.len() == 5 && rows.iter().all(|r| value(r) > rss);
        assert!(
            t.elapsed() < Duration::from_secs(10) || crowded,
            "the workload (pid {}, statm RSS {rss}) never in top.mem with its RSS: {top}",
            w.pid()
        );
        if crowded && t.elapsed() >= Duration::from_secs(10) {
            eprintln!("five processes hold more than the workload: not compared");
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    // The snapshot key carries every process, the workload included.
    let snap = d.value("snapshot");
    let procs = snap["procs"].as_array().unwrap();
    assert!(procs.iter().any(|p| p["pid"] == w.pid()));
}

#[test]
fn exit_statuses_and_output_forms() {
    let d = DaemonProc::start(&["--no-bpf"]);
    let (code, out, _) = d.get(&["mem.total"]);
    assert_eq!(code, Some(0));
    assert_eq!(
        out.trim().parse::<u64>().unwrap(),
        meminfo_kb("MemTotal") * 1024
    );
    let (code, out, _) = d.get(&["uname.sysname"]);
    assert_eq!(
        (code, out.as_str()),
        (Some(0), "Linux\n"),
        "strings print bare"
    );
    // This machine has no battery: a known key without a value.
    let battery = Path::new("/sys/class/power_supply")
        .read_dir()
        .map(|mut r| r.next().is_some());
    if battery.unwrap_or(false) {
        eprintln!("skipped the no-battery check: this machine has a power supply");
    } else {
        let (code, out, err) = d.get(&["battery.percent"]);
        assert_eq!((code, out.as_str()), (Some(1), ""), "{err}");
    }
    let (code, _, err) = d.get(&["no.such.key"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("unknown key"), "{err}");
    // A directory that is not a repository: no data.
    let plain = tempfile::tempdir().unwrap();
    let (code, _, _) = d.get(&["git.branch", "--path", plain.path().to_str().unwrap()]);
    assert_eq!(code, Some(1));
    let (code, _, err) = d.get(&["git.branch", "--path", "/no/such/dir"]);
    assert_eq!(code, Some(2), "{err}");
    // --list names every key.
    let (code, out, _) = run(&["get", "--list"]);
    assert_eq!(code, Some(0));
    for k in [
        "load.one",
        "top.cpu",
        "git.branch",
        "hostname.name",
        "summary",
    ] {
        assert!(out.lines().any(|l| l.starts_with(k)), "{k} listed");
    }
    // status and watch.
    let (code, out, _) = run(&["status", "--json", "--socket", d.sock.to_str().unwrap()]);
    assert_eq!(code, Some(0));
    let s: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(s["pid"], d.pid());
    assert_eq!(s["source"], "procfs");
    let mut w = Lines::spawn(
        kernstat(),
        &["watch", "mem.total", "--socket", d.sock.to_str().unwrap()],
        Duration::from_secs(20),
    );
    for _ in 0..3 {
        let line = w.next_line().expect("an update per sample");
        assert_eq!(line.parse::<u64>().unwrap(), meminfo_kb("MemTotal") * 1024);
    }
}

#[test]
fn get_without_a_daemon_computes_the_value_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("nobody-home");
    let s = sock.to_str().unwrap();
    let (code, out, err) = run(&["get", "mem.total", "--socket", s]);
    assert_eq!(code, Some(0), "{err}");
    assert_eq!(
        out.trim().parse::<u64>().unwrap(),
        meminfo_kb("MemTotal") * 1024
    );
    assert!(
        err.contains("no daemon") && err.contains("computed directly"),
        "{err}"
    );
    let (code, out, _) = run(&["get", "cpu.percent", "--socket", s]);
    assert_eq!(code, Some(0));
    let cpu: f64 = out.trim().parse().unwrap();
    assert!((0.0..=100.0).contains(&cpu));
    let (code, _, err) = run(&["get", "no.such.key", "--socket", s]);
    assert_eq!(code, Some(2), "{err}");
    // git keys straight from the repository's files (this source tree is one, when
    // built from a clone).
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    if root.join(".git").exists() {
        let (code, out, err) = run(&[
            "get",
            "git.commit",
            "--path",
            root.to_str().unwrap(),
            "--socket",
            s,
        ]);
        assert_eq!(code, Some(0), "{err}");
        let head = Command::new("git")
            .args(["-C", root.to_str().unwrap(), "rev-parse", "HEAD"])
            .output();
        if let Some(h) = head.ok().filter(|h| h.status.success()) {
            assert_eq!(
                out.trim(),
                String::from_utf8_lossy(&h.stdout).trim(),
                "git agrees"
            );
        }
    }
}

#[test]
fn sigterm_stops_cleanly_and_removes_the_socket() {
    let d = DaemonProc::start(&["--no-bpf"]);
    let sock = d.sock.clone();
    assert!(sock.exists());
    // A second daemon on the same socket refuses instead of stealing it.
    let (code, _, err) = run(&["daemon", "--no-bpf", "--socket", sock.to_str().unwrap()]);
    assert_eq!(code, Some(1));
    assert!(err.contains("already listening"), "{err}");
    let (code, err) = d.stop();
    assert_eq!(code, Some(0), "{err}");
    assert!(!sock.exists(), "socket removed");
    assert!(err.contains("listening on"), "{err}");
}

fn status_field(pid: u32, field: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix(field).map(|v| v.trim().to_string()))
        .unwrap()
}

fn bpf_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| {
            d.flatten()
                .filter(|e| {
                    std::fs::read_link(e.path())
                        .map(|l| l.to_string_lossy().contains("bpf"))
                        .unwrap_or(false)
                })
                .count()
        })
        .unwrap_or(0)
}

#[test]
fn a_system_daemon_runs_as_nobody_without_capabilities() {
    if !bpf_gate() {
        return;
    }
    let d = DaemonProc::start(&["--system", "--user", "nobody"]);
    // The temporary directory must be reachable by other users for this test.
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(d.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let uids = status_field(d.pid(), "Uid:");
    assert!(uids.split_whitespace().all(|u| u == "65534"), "Uid: {uids}");
    assert_eq!(status_field(d.pid(), "CapEff:"), "0000000000000000");
    assert_eq!(status_field(d.pid(), "CapPrm:"), "0000000000000000");
    // No execve can hand capabilities back, and the seccomp allow-list is on.
    assert_eq!(status_field(d.pid(), "CapBnd:"), "0000000000000000");
    assert_eq!(status_field(d.pid(), "Seccomp:"), "2");
    assert_eq!(status_field(d.pid(), "NoNewPrivs:"), "1");
    // Under the filter, every kind of request is still served: the whole summary,
    // status, and the git keys of this source tree (gix on a blocking thread).
    assert!(d.value("summary")["procs"].is_array());
    let (code, out, err) = run(&["status", "--json", "--socket", d.sock.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(common::json(&out)["requests"].as_u64().unwrap() > 0);
    if kernstat_testkit::tool_gate("git") {
        // A repository the daemon's user can read, on a branch of a known name.
        let repo = tempfile::tempdir().unwrap();
        std::fs::set_permissions(repo.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let git = Command::new("git")
            .args(["init", "-q", "-b", "seccomp-test"])
            .current_dir(repo.path())
            .status()
            .unwrap();
        assert!(git.success());
        let (code, out, err) = d.get(&["git.branch", "--path", repo.path().to_str().unwrap()]);
        assert_eq!((code, out.trim()), (Some(0), "seccomp-test"), "{err}");
    }
    // The network keys under the filter (no socket() after start): as `ip` says.
    if kernstat_testkit::tool_gate("ip") {
        let ip = |args: &[&str]| -> Value {
            let out = Command::new("ip").arg("-j").args(args).output().unwrap();
            serde_json::from_slice(&out.stdout).unwrap()
        };
        let route = ip(&["route", "show", "default"]);
        if let Some(dev) = route[0]["dev"].as_str() {
            assert_eq!(d.value("network.interface"), dev);
            let addrs = ip(&["-4", "addr", "show", "dev", dev]);
            assert_eq!(d.value("network.ip"), addrs[0]["addr_info"][0]["local"]);
        }
    }
    assert_eq!(
        d.value("source"),
        "bpf",
        "BPF loaded before the switch keeps working"
    );
    assert!(bpf_fds(d.pid()) > 0);
    // Samples keep coming after the switch (the iterator is read as nobody).
    let a = d.value("tasks.count");
    std::thread::sleep(Duration::from_millis(700));
    assert!(d.value("tasks.count").as_u64().unwrap() > 0 && !a.is_null());

    // Another unprivileged user is served through the 0666 socket...
    let out = common::command()
        .args(["get", "mem.total", "--socket", d.sock.to_str().unwrap()])
        .uid(65533)
        .gid(65533)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse::<u64>()
            .unwrap(),
        meminfo_kb("MemTotal") * 1024
    );
    let (code, err) = d.stop();
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("running as nobody"), "{err}");

    // ...unless --allow names others: the peer check refuses it.
    let d = DaemonProc::start(&["--system", "--allow", "65532"]);
    std::fs::set_permissions(d.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let out = common::command()
        .args(["status", "--socket", d.sock.to_str().unwrap()])
        .uid(65533)
        .gid(65533)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not allowed"));
}

use std::os::unix::process::CommandExt;

#[test]
fn bars_render_from_the_daemon_without_sampling() {
    let d = DaemonProc::start(source_args());
    let sock = d.sock.to_str().unwrap().to_string();
    let mut bars: Vec<Lines> = (0..3)
        .map(|_| {
            Lines::spawn(
                kernstat(),
                &[
                    "bar",
                    "--daemon",
                    "--socket",
                    &sock,
                    "--text",
                    "{mem_total} {load1}",
                ],
                Duration::from_secs(30),
            )
        })
        .collect();
    for bar in &mut bars {
        let line = bar.next_line().expect("a line from the daemon's sample");
        let v: Value = serde_json::from_str(&line).unwrap();
        let text = v["text"].as_str().unwrap();
        assert!(
            text.ends_with(['B', 'K', 'M', 'G', 'T']) || text.contains(' '),
            "{text}"
        );
        let tip = v["tooltip"].as_str().unwrap();
        assert!(tip.contains("Memory ") && tip.contains("Load "), "{tip}");
        let next = bar.next_line().expect("the next daemon sample");
        assert!(serde_json::from_str::<Value>(&next).is_ok());
        // The bar itself loaded nothing: the daemon holds the only BPF objects.
        assert_eq!(bpf_fds(bar.pid()), 0, "bar --daemon loaded BPF");
    }
    if source_args().is_empty() {
        assert!(bpf_fds(d.pid()) > 0);
    }
    // --json shows the daemon's numbers: the same memory total as /proc.
    let mut j = Lines::spawn(
        kernstat(),
        &["bar", "--daemon", "--socket", &sock, "--json"],
        Duration::from_secs(30),
    );
    let v: Value = serde_json::from_str(&j.next_line().unwrap()).unwrap();
    assert_eq!(
        v["mem"]["total_bytes"].as_u64().unwrap(),
        meminfo_kb("MemTotal") * 1024
    );
    assert!(
        v["procs"].as_array().unwrap().is_empty(),
        "bars get the summary"
    );
}

#[test]
fn a_bar_without_a_daemon_samples_by_itself() {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("none");
    let mut bar = common::command()
        .args([
            "bar",
            "--daemon",
            "--socket",
            sock.to_str().unwrap(),
            "--no-bpf",
            "--no-lock",
            "--interval",
            "0.2",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::BufRead;
    let mut lines = std::io::BufReader::new(bar.stdout.take().unwrap()).lines();
    let v: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert!(v["text"].is_string());
    let _ = bar.kill();
    let out = bar.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no daemon") && err.contains("sampling here"),
        "{err}"
    );
}

fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count()
}

/// The descriptors a daemon keeps: the fewest seen over a second (a sample opens a few
/// for a moment: an iterator, a new process's files), read every 20 ms.
fn kept_fds(pid: u32) -> usize {
    (0..50)
        .map(|_| {
            std::thread::sleep(Duration::from_millis(20));
            fd_count(pid)
        })
        .min()
        .unwrap()
}

fn rss_kb(pid: u32) -> u64 {
    status_field(pid, "VmRSS:")
        .trim_end_matches(" kB")
        .trim()
        .parse()
        .unwrap()
}

/// xorshift64: the fuzzer's choices, reproducible from the seed it prints.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// One hostile or careless client: garbage, oversized, deeply nested, truncated,
/// pipelined, half-closed, a watch dropped at once, or a connect-and-leave.
fn hostile_client(sock: &Path, rng: &mut Rng) {
    use std::io::{Read, Write};
    let Ok(mut s) = std::os::unix::net::UnixStream::connect(sock) else {
        return;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
    let mut sink = vec![0u8; 64 * 1024];
    match rng.below(8) {
        0 => {
            let n = rng.below(4096) as usize;
            let junk: Vec<u8> = (0..n).map(|_| rng.next() as u8).collect();
            let _ = s.write_all(&junk);
        }
        1 => {
            // Over the 64 KiB bound without a newline: too_long, then closed.
            let _ = s.write_all(&vec![b'x'; 100 * 1024]);
            let _ = s.read(&mut sink);
        }
        2 => {
            let depth = 1 + rng.below(20_000) as usize;
            let mut line = "[".repeat(depth);
            line.push_str(&"]".repeat(depth));
            line.push('\n');
            let _ = s.write_all(line.as_bytes());
            let _ = s.read(&mut sink);
        }
        3 => {
            let _ = s.write_all(br#"{"op":"get","key":"load"#);
        }
        4 => {
            let n = 1 + rng.below(200) as usize;
            let burst = "{\"op\":\"get\",\"key\":\"mem.total\"}\n".repeat(n);
            let _ = s.write_all(burst.as_bytes());
            // Read some of the answers, not necessarily all, and hang up.
            let _ = s.read(&mut sink);
        }
        5 => {
            let _ = s.write_all(b"{\"op\":\"hello\"}\n");
            let _ = s.shutdown(std::net::Shutdown::Write);
            let _ = s.read_to_end(&mut Vec::new());
        }
        6 => {
            let _ = s.write_all(b"{\"op\":\"watch\",\"key\":\"load.one\"}\n");
        }
        _ => {}
    }
}

#[test]
fn hostile_clients_leave_no_trace_and_a_normal_client_is_answered_throughout() {
    let d = DaemonProc::start(source_args());
    let sock = d.sock.clone();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("fuzz seed {seed}");
    // Two rounds of the same length: the first brings the daemon to its steady state
    // (runtime and allocator pools, buffers); the second must not grow it further.
    let round = |n_threads: u64, secs: u64| {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let workers: Vec<_> = (0..n_threads)
            .map(|t| {
                let (sock, stop) = (sock.clone(), stop.clone());
                std::thread::spawn(move || {
                    let mut rng = Rng(seed ^ (t + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15));
                    let mut n = 0u64;
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        hostile_client(&sock, &mut rng);
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        // A normal client, on one held connection, all along.
        let mut s = kernstat_client::Session::connect(&sock).unwrap();
        s.set_timeout(Some(Duration::from_secs(10))).unwrap();
        let t = Instant::now();
        let mut answered = 0;
        while t.elapsed() < Duration::from_secs(secs) {
            let r = s.get("mem.total", None).unwrap();
            assert!(r.ok, "{r:?}");
            answered += 1;
            std::thread::sleep(Duration::from_millis(20));
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        let hostile: u64 = workers.into_iter().map(|w| w.join().unwrap()).sum();
        (hostile, answered)
    };
    let settle = |pid: u32, base_fds: usize| {
        // Closed connections are reaped asynchronously; give them a moment.
        let t = Instant::now();
        while kept_fds(pid) != base_fds && t.elapsed() < Duration::from_secs(10) {}
    };
    let pid = d.pid();
    let base_fds = kept_fds(pid);
    let (h1, a1) = round(8, 4);
    settle(pid, base_fds);
    assert_eq!(kept_fds(pid), base_fds, "descriptors after round 1");
    let rss1 = rss_kb(pid);
    let (h2, a2) = round(8, 4);
    settle(pid, base_fds);
    assert_eq!(kept_fds(pid), base_fds, "descriptors after round 2");
    let rss2 = rss_kb(pid);
    eprintln!(
        "hostile connections {h1} + {h2}, normal requests answered {a1} + {a2}, VmRSS {rss1} -> {rss2} kB"
    );
    assert!(
        h1 > 100 && h2 > 100,
        "the fuzzer ran ({h1}, {h2} connections)"
    );
    // Memory does not grow with more of the same abuse (a leak would: each round
    // makes thousands of connections). 2 MiB of slack for allocator noise.
    assert!(
        rss2 <= rss1 + 2048,
        "VmRSS grew from {rss1} to {rss2} kB over a second round"
    );
    // And it still serves a fresh client with a real value.
    assert_eq!(
        d.value("mem.total").as_u64().unwrap(),
        meminfo_kb("MemTotal") * 1024
    );
}
