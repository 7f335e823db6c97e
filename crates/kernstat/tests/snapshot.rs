//! The shared-memory snapshot as `kernstat get` uses it: a key the daemon holds is read
//! from the mapped file (said in `--json`, and no connect(2) to the socket, checked with
//! strace), with the daemon's value; a git path or a context nobody asked about yet goes
//! to the socket once and is read from memory after; a daemon killed without cleaning up
//! leaves a file that `get` recognises as dead.

mod common;
use common::{command, DaemonProc};

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value;

fn get_json(sock: &str, args: &[&str], env: &[(&str, &str)]) -> Value {
    let out = command()
        .args(["get", "--json", "--socket", sock])
        .args(args)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {out:?}"))
}

#[test]
fn get_reads_the_snapshot_and_asks_the_socket_only_for_what_it_lacks() {
    let d = DaemonProc::start(&["--no-bpf"]);
    let sock = d.sock.to_str().unwrap().to_string();
    let snapshot = d.sock.with_file_name("snapshot");
    assert!(snapshot.exists());
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&snapshot).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "a user daemon's snapshot is its user's alone");
    }
    // The snapshot follows the cache one announcement later: a value is in memory
    // within moments of the daemon having it.
    let from_memory = |args: &[&str], env: &[(&str, &str)]| {
        let t0 = Instant::now();
        loop {
            let v = get_json(&sock, args, env);
            if v["answered_by"] == "shm" {
                return v;
            }
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "never in the snapshot: {v}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    // A fixed value, from memory, equal to the kernel's.
    let v = from_memory(&["uname.release"], &[]);
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(v["data"], release.trim());
    let v = from_memory(&["mem.total"], &[]);
    assert!(v["age_ms"].is_u64() && v["stale"].is_boolean(), "{v}");

    // No connection at all for it.
    if kernstat_testkit::tool_gate("strace") {
        let trace = d.dir.path().join("trace");
        let st = Command::new("strace")
            .args(["-f", "-e", "trace=connect", "-o", trace.to_str().unwrap()])
            .arg(common::kernstat())
            .args(["get", "uname.release", "--socket", &sock])
            .env("XDG_CONFIG_HOME", d.dir.path())
            .output()
            .unwrap();
        assert!(st.status.success(), "{st:?}");
        let t = std::fs::read_to_string(&trace).unwrap();
        assert!(!t.contains(&sock), "connected to the socket: {t}");
    }

    // A git path: the socket the first time, memory after.
    let repo = tempfile::tempdir().unwrap();
    let g = repo.path().join(".git");
    std::fs::create_dir_all(g.join("refs/heads")).unwrap();
    std::fs::write(g.join("HEAD"), "ref: refs/heads/snap\n").unwrap();
    let r = repo.path().to_str().unwrap();
    let v = get_json(&sock, &["git.branch", "--path", r], &[]);
    assert_eq!(
        (v["answered_by"].as_str(), v["data"].as_str()),
        (Some("socket"), Some("snap"))
    );
    assert_eq!(
        from_memory(&["git.branch", "--path", r], &[])["data"],
        "snap"
    );
    // A context, under the asking shell's variables: the same.
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".aws")).unwrap();
    std::fs::write(
        home.path().join(".aws/config"),
        "[profile dev]\nregion = us-east-2\n",
    )
    .unwrap();
    let env = [
        ("HOME", home.path().to_str().unwrap()),
        ("AWS_PROFILE", "dev"),
    ];
    assert_eq!(
        get_json(&sock, &["aws.region"], &env)["answered_by"],
        "socket"
    );
    assert_eq!(from_memory(&["aws.region"], &env)["data"], "us-east-2");
    // Another profile is another scope: not the first one's answer.
    let other = get_json(
        &sock,
        &["aws.profile"],
        &[("HOME", env[0].1), ("AWS_PROFILE", "prod")],
    );
    assert_eq!(other["data"], "prod");

    // Killed without cleaning up: the file stays, and is recognised as dead.
    let mut child = d;
    let pid = child.pid();
    // SAFETY: kill with a valid signal.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let _ = child.child.wait();
    assert!(snapshot.exists(), "SIGKILL leaves the file");
    let out = command()
        .args(["get", "--json", "uname.release", "--socket", &sock])
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["answered_by"], "direct", "{v}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("computed directly"));
}

/// `kernstat` (crates/kernstat-front) answers `get KEY` and `eval TEMPLATE` from the snapshot
/// itself and execs `kernstat-full` for everything else: both must print the same thing for the same
/// question, and the fast path must start no second program (execve counted by strace).
#[test]
fn the_small_front_program_answers_as_the_full_one_and_execs_only_when_it_must() {
    let d = DaemonProc::start(&["--no-bpf"]);
    let sock = d.sock.to_str().unwrap().to_string();
    let full = std::path::Path::new(env!("CARGO_BIN_EXE_kernstat-full"));
    let repo = tempfile::tempdir().unwrap();
    let g = repo.path().join(".git");
    std::fs::create_dir_all(g.join("refs/heads")).unwrap();
    std::fs::write(g.join("HEAD"), "ref: refs/heads/front\n").unwrap();
    let r = repo.path().to_str().unwrap().to_string();
    // Into the snapshot first (a git path is mirrored once somebody asked for it).
    get_json(&sock, &["git.branch", "--path", &r], &[]);
    let t0 = Instant::now();
    while get_json(&sock, &["uname.release"], &[])["answered_by"] != "shm"
        || get_json(&sock, &["git.branch", "--path", &r], &[])["answered_by"] != "shm"
    {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "never in the snapshot"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let run = |program: &std::path::Path, args: &[&str]| {
        let out = Command::new(program)
            .args(args)
            .args(["--socket", &sock])
            .env("XDG_RUNTIME_DIR", common::private_runtime_dir())
            .env("KERNSTAT_NO_AUTOSTART", "1")
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // Values that do not change between the two runs, so the outputs must be equal.
    for args in [
        &["get", "uname.release"][..],
        &["get", "--path", &r, "git.branch"],
        &["get", "git.branch", "--path", &r, "--format", "shell"],
        &["get", "uname.release", "git.branch", "--path", &r],
        &["get", "no.such.key"],
        &["get", "--path", "/no/such/dir", "git.branch"],
        &["get", "--frobnicate", "uname.release"],
        &["eval", "{uname.release} on {git.branch}", "--path", &r],
        &["eval", "{uname.release} {no.such.key}"],
        &["eval", "{unclosed"],
        &["eval", "no fields, {{braces}}"],
    ] {
        let front = run(common::kernstat(), args);
        let whole = run(full, args);
        assert_eq!(front, whole, "kernstat {args:?}");
    }
    // --json carries the age, which moves: the rest must be equal, and say "shm".
    let json = |program| {
        let (code, out, _) = run(program, &["get", "--json", "uname.release"]);
        let mut v: Value = serde_json::from_str(&out).unwrap();
        v.as_object_mut().unwrap().remove("age_ms");
        (code, v)
    };
    let (code, v) = json(common::kernstat());
    assert_eq!((code, &v), (Some(0), &json(full).1));
    assert_eq!(v["answered_by"], "shm", "{v}");

    if kernstat_testkit::tool_gate("strace") {
        let execs = |args: &[&str]| {
            let trace = d.dir.path().join("exec-trace");
            let st = Command::new("strace")
                .args([
                    "-f",
                    "-qq",
                    "-e",
                    "trace=execve",
                    "-o",
                    trace.to_str().unwrap(),
                ])
                .arg(common::kernstat())
                .args(args)
                .args(["--socket", &sock])
                .env("KERNSTAT_NO_AUTOSTART", "1")
                .output()
                .unwrap();
            assert!(st.status.success(), "{args:?}: {st:?}");
            let t = std::fs::read_to_string(&trace).unwrap();
            t.lines().filter(|l| l.contains("execve(")).count()
        };
        assert_eq!(execs(&["get", "uname.release"]), 1, "answered in memory");
        assert_eq!(
            execs(&["get", "git.branch", "--path", &r]),
            1,
            "a git key too"
        );
        assert_eq!(
            execs(&["get", "uname.release", "git.branch", "--path", &r]),
            2
        );
        assert_eq!(
            execs(&["--version"]),
            2,
            "everything else is kernstat-full's"
        );
    }
}

/// Sockets a process has open, counted in /proc/PID/fd.
fn sockets(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter(|l| l.to_string_lossy().starts_with("socket:"))
        .count()
}

fn mem_total_bytes() -> u64 {
    let m = std::fs::read_to_string("/proc/meminfo").unwrap();
    let kb: u64 = m
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches(" kB").parse().ok())
        .unwrap();
    kb * 1024
}

/// `watch` and `bar --daemon` follow machine-wide keys in the snapshot: their processes
/// hold no socket at all, the daemon's samples arrive as lines with the daemon's value,
/// `--json` says "shm" with the value's age, and a bar goes on after the daemon restarts.
#[test]
fn watch_and_bar_follow_the_snapshot_without_a_socket() {
    use kernstat_testkit::Lines;
    let d = DaemonProc::start(&["--no-bpf"]);
    let sock = d.sock.to_str().unwrap().to_string();
    let t0 = Instant::now();
    while get_json(&sock, &["summary"], &[])["answered_by"] != "shm" {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "never in the snapshot"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut watch = Lines::spawn(
        common::kernstat(),
        &["watch", "--json", "mem.total", "--socket", &sock],
        Duration::from_secs(30),
    );
    let mut bar = Lines::spawn(
        common::kernstat(),
        &["bar", "--daemon", "--json", "--socket", &sock],
        Duration::from_secs(30),
    );
    for _ in 0..4 {
        let v: Value = serde_json::from_str(&watch.next_line().expect("a line")).unwrap();
        assert_eq!(v["answered_by"], "shm", "{v}");
        assert_eq!(v["data"].as_u64(), Some(mem_total_bytes()), "{v}");
        assert!(v["age_ms"].is_u64() && v["stale"] == false, "{v}");
    }
    for _ in 0..3 {
        let v: Value = serde_json::from_str(&bar.next_line().expect("a bar line")).unwrap();
        assert_eq!(v["mem"]["total_bytes"].as_u64(), Some(mem_total_bytes()));
    }
    assert_eq!(sockets(watch.pid()), 0, "watch opened a socket");
    assert_eq!(sockets(bar.pid()), 0, "bar --daemon opened a socket");
    let _d = d.restart();
    for _ in 0..2 {
        let v: Value =
            serde_json::from_str(&bar.next_line().expect("a bar line after the restart")).unwrap();
        assert_eq!(v["mem"]["total_bytes"].as_u64(), Some(mem_total_bytes()));
    }
}
