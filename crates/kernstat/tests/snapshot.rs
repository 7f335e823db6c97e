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
