//! The daemon on a temporary socket: every op, and the ways clients go wrong (malformed
//! JSON, unknown ops, a 1 MiB line, 1,000 connections at once, clients that hang up
//! mid-request or never read their watch stream). After each, the daemon must still
//! answer.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

mod common;

use common::{ask, model, session, start, start_with, wait_for, TestDaemon};
use kernstat_client::Session;
use kernstat_daemon::Config;
use kernstat_model::model::ProcRate;
use serde_json::Value;

/// The daemon still answers a fresh client.
fn still_serving(d: &TestDaemon) {
    let mut s = session(d);
    let v = ask(&mut s, r#"{"op":"get","key":"load.one"}"#);
    assert_eq!(v["ok"], true, "{v}");
}

fn fake_repo(dir: &Path, branch: &str) {
    let g = dir.join(".git");
    std::fs::create_dir_all(g.join("refs/heads")).unwrap();
    std::fs::write(g.join("HEAD"), format!("ref: refs/heads/{branch}\n")).unwrap();
    std::fs::write(
        g.join("refs/heads/main"),
        "1111111111111111111111111111111111111111\n",
    )
    .unwrap();
    std::fs::write(
        g.join("refs/heads/dev"),
        "2222222222222222222222222222222222222222\n",
    )
    .unwrap();
}

#[test]
fn a_value_not_refreshed_for_three_intervals_and_a_second_is_stale() {
    let d = start_with(
        Config {
            interval: Duration::from_millis(10),
            ..Config::default()
        },
        0o700,
        0o600,
    );
    let mut s = session(&d);
    // Published at start; no sampler refreshes it here. Past 3 x 10 ms + 1 s it is
    // stale, whatever the machine is doing (a sleep never ends early).
    std::thread::sleep(Duration::from_millis(1100));
    let v = ask(&mut s, r#"{"op":"get","key":"load.one"}"#);
    assert_eq!(
        (v["ok"].clone(), v["stale"].clone()),
        (true.into(), true.into())
    );
    assert!(v["age_ms"].as_u64().unwrap() >= 1030, "{v}");
    // Published again: fresh.
    d.daemon.publish_system(&model(0.5), 50.0);
    let v = ask(&mut s, r#"{"op":"get","key":"load.one"}"#);
    assert_eq!(
        (v["data"].clone(), v["stale"].clone()),
        (0.5.into(), false.into())
    );
}

#[test]
fn every_op() {
    let d = start();
    let mut s = session(&d);

    let v = ask(&mut s, r#"{"op":"hello"}"#);
    assert_eq!(v["data"]["protocol"], 1);
    assert_eq!(v["data"]["name"], "kernstat");

    let v = ask(&mut s, r#"{"op":"get","key":"load.one"}"#);
    assert_eq!(
        (v["ok"].clone(), v["data"].clone(), v["stale"].clone()),
        (true.into(), 0.42.into(), false.into())
    );
    assert!(v["age_ms"].as_u64().unwrap() < 10_000);

    let v = ask(&mut s, r#"{"op":"get","key":"no.such.key"}"#);
    assert_eq!(
        (v["ok"].clone(), v["code"].clone()),
        (false.into(), "unknown_key".into())
    );
    let v = ask(&mut s, r#"{"op":"get","key":"battery.percent"}"#);
    assert_eq!(
        v["code"], "no_data",
        "a known key this machine has no value for"
    );
    let v = ask(&mut s, r#"{"op":"get","key":"git.branch"}"#);
    assert_eq!(v["code"], "bad_request", "git keys need a path: {v}");

    let repo = tempfile::tempdir().unwrap();
    fake_repo(repo.path(), "main");
    let req = serde_json::json!({"op":"get","key":"git.branch","path":repo.path()}).to_string();
    assert_eq!(ask(&mut s, &req)["data"], "main");
    let req = serde_json::json!({"op":"get","key":"git.short","path":repo.path()}).to_string();
    assert_eq!(ask(&mut s, &req)["data"], "1111111");
    let elsewhere = tempfile::tempdir().unwrap();
    let req =
        serde_json::json!({"op":"get","key":"git.branch","path":elsewhere.path()}).to_string();
    assert_eq!(ask(&mut s, &req)["code"], "no_data", "not a repository");

    let v = ask(&mut s, r#"{"op":"list"}"#);
    let keys: Vec<&str> = v["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k.as_str().unwrap())
        .collect();
    for k in [
        "load.one",
        "cpu.percent",
        "mem.used",
        "snapshot",
        "hostname.name",
        "git.branch",
    ] {
        assert!(keys.contains(&k), "{k} in {keys:?}");
    }

    let v = ask(&mut s, r#"{"op":"status"}"#);
    assert!(v["data"]["requests"].as_u64().unwrap() >= 10, "{v}");
    assert_eq!(v["data"]["git_paths"], 2);
    assert_eq!(v["data"]["pid"], std::process::id());

    let v = ask(&mut s, r#"{"op":"refresh"}"#);
    assert_eq!(v["ok"], true);
    d.refreshes
        .recv_timeout(Duration::from_secs(5))
        .expect("refresh reaches the sampler");

    // watch: the current value at once, then every new one.
    let mut w = session(&d).watch("load.one", None).unwrap();
    assert_eq!(w.next().unwrap().unwrap().data, Some(0.42.into()));
    d.daemon.publish_system(&model(0.9), 50.0);
    let r = w.next().unwrap().unwrap();
    assert_eq!(
        (r.key.as_deref(), r.data),
        (Some("load.one"), Some(0.9.into()))
    );

    // watch a path: inotify sees the branch change.
    let mut w = session(&d)
        .watch("git.branch", repo.path().to_str())
        .unwrap();
    assert_eq!(w.next().unwrap().unwrap().data, Some("main".into()));
    std::fs::write(repo.path().join(".git/HEAD"), "ref: refs/heads/dev\n").unwrap();
    assert_eq!(
        w.next().unwrap().unwrap().data,
        Some("dev".into()),
        "updated by inotify"
    );
    let req = serde_json::json!({"op":"get","key":"git.commit","path":repo.path()}).to_string();
    assert_eq!(
        ask(&mut s, &req)["data"],
        "2222222222222222222222222222222222222222"
    );
}

#[test]
fn git_counts_follow_the_work_tree() {
    if !kernstat_testkit::tool_gate("git") {
        return;
    }
    let repo = tempfile::tempdir().unwrap();
    let git = |args: &[&str]| {
        let st = std::process::Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@example.org"])
            .args(args)
            .current_dir(repo.path())
            .stdout(std::process::Stdio::null())
            .status()
            .unwrap();
        assert!(st.success(), "git {args:?}");
    };
    git(&["init", "-q"]);
    std::fs::write(repo.path().join("a"), "a").unwrap();
    git(&["add", "a"]);
    git(&["commit", "-qm", "a"]);
    let d = start();
    let mut s = session(&d);
    let get = |s: &mut Session, key: &str| {
        ask(
            s,
            &serde_json::json!({"op":"get","key":key,"path":repo.path()}).to_string(),
        )
    };
    // The first ask for a count waits for it.
    assert_eq!(get(&mut s, "git.untracked")["data"], 0);
    assert_eq!(get(&mut s, "git.dirty")["data"], false);
    assert_eq!(get(&mut s, "git.ahead")["code"], "no_data", "no upstream");
    // A new file is not a change inside .git: a refresh (or the poll timer) sees it.
    std::fs::write(repo.path().join("new"), "n").unwrap();
    let r = serde_json::json!({"op":"refresh","key":"git.untracked","path":repo.path()});
    assert_eq!(ask(&mut s, &r.to_string())["data"], true);
    assert_eq!(get(&mut s, "git.untracked")["data"], 1);
    assert_eq!(get(&mut s, "git.dirty")["data"], true);
    // Staging it is a change inside .git (the index): inotify brings the counts along.
    let mut w = session(&d)
        .watch("git.staged", repo.path().to_str())
        .unwrap();
    assert_eq!(w.next().unwrap().unwrap().data, Some(0.into()));
    git(&["add", "new"]);
    let t = Instant::now();
    loop {
        let r = w.next().unwrap().unwrap();
        if r.data == Some(1.into()) {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "git.staged never became 1"
        );
    }
}

#[test]
fn malformed_json_and_unknown_ops_get_an_error_and_the_connection_lives_on() {
    let d = start();
    let mut s = session(&d);
    for bad in [
        "nonsense",
        "{\"op\":",
        "[1,2]",
        "",
        "{\"op\":\"get\"}",
        "{\"op\":\"get\",\"key\":7}",
    ] {
        let v = ask(&mut s, bad);
        assert_eq!(
            (v["ok"].clone(), v["code"].clone()),
            (false.into(), "bad_request".into()),
            "{bad:?}: {v}"
        );
    }
    let v = ask(&mut s, r#"{"op":"frobnicate"}"#);
    assert_eq!(v["code"], "bad_request");
    assert!(
        v["error"].as_str().unwrap().contains("ops: get, watch"),
        "{v}"
    );
    assert_eq!(
        ask(&mut s, r#"{"op":"get","key":"load.one"}"#)["data"],
        0.42
    );
}

#[test]
fn pipelined_requests_are_answered_in_order() {
    let d = start();
    let mut c = UnixStream::connect(&d.sock).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut batch = String::new();
    for i in 0..200 {
        batch.push_str(if i % 2 == 0 {
            "{\"op\":\"get\",\"key\":\"load.one\"}\n"
        } else {
            "{\"op\":\"hello\"}\r\n"
        });
    }
    c.write_all(batch.as_bytes()).unwrap();
    c.shutdown(std::net::Shutdown::Write).unwrap();
    let mut all = String::new();
    c.read_to_string(&mut all).unwrap();
    let lines: Vec<Value> = all
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 200);
    for (i, v) in lines.iter().enumerate() {
        if i % 2 == 0 {
            assert_eq!(v["data"], 0.42);
        } else {
            assert_eq!(v["data"]["protocol"], 1);
        }
    }
}

#[test]
fn a_one_mebibyte_line_is_refused_and_the_daemon_keeps_serving() {
    let d = start();
    let mut c = UnixStream::connect(&d.sock).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut w = c.try_clone().unwrap();
    // The daemon stops reading at 64 KiB and closes, so the writer may see EPIPE.
    let writer = std::thread::spawn(move || {
        let mut line = vec![b'a'; 1 << 20];
        line.push(b'\n');
        let _ = w.write_all(&line);
    });
    let mut reply = String::new();
    let _ = c.read_to_string(&mut reply);
    writer.join().unwrap();
    let v: Value = serde_json::from_str(reply.lines().next().expect("a reply")).unwrap();
    assert_eq!(v["code"], "too_long", "{v}");
    assert_eq!(reply.lines().count(), 1, "then the connection is closed");
    still_serving(&d);
}

fn raise_fd_limit(want: u64) {
    // SAFETY: getrlimit/setrlimit with a valid struct.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut r);
        if r.rlim_cur < want {
            r.rlim_cur = want.min(r.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

#[test]
fn a_thousand_connections_at_once() {
    // Both ends live in this process: 2,000 descriptors and some.
    raise_fd_limit(4096);
    let d = start();
    let mut conns: Vec<UnixStream> = (0..1000)
        .map(|i| UnixStream::connect(&d.sock).unwrap_or_else(|e| panic!("connection {i}: {e}")))
        .collect();
    for c in &mut conns {
        c.write_all(b"{\"op\":\"get\",\"key\":\"load.one\"}\n")
            .unwrap();
    }
    for c in &mut conns {
        c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut buf = [0u8; 256];
        let n = c.read(&mut buf).unwrap();
        let v: Value = serde_json::from_slice(&buf[..n]).unwrap();
        assert_eq!(v["data"], 0.42);
    }
    wait_for("1000 clients counted", || d.daemon.clients() == 1000);
    still_serving(&d);
    drop(conns);
    wait_for("clients gone", || d.daemon.clients() == 0);
}

#[test]
fn connections_past_the_cap_are_refused_with_a_reason() {
    let d = start_with(
        Config {
            max_connections: 5,
            ..Config::default()
        },
        0o700,
        0o600,
    );
    let mut held: Vec<Session> = (0..5).map(|_| session(&d)).collect();
    for s in &mut held {
        assert_eq!(ask(s, r#"{"op":"hello"}"#)["ok"], true);
    }
    let mut extra = session(&d);
    let v: Value = serde_json::from_slice(extra.raw(b"{\"op\":\"hello\"}").unwrap()).unwrap();
    assert_eq!(
        (v["ok"].clone(), v["code"].clone()),
        (false.into(), "refused".into()),
        "{v}"
    );
    assert!(v["error"]
        .as_str()
        .unwrap()
        .contains("too many connections"));
    held.pop();
    wait_for("a slot frees up", || {
        let mut s = session(&d);
        s.raw(b"{\"op\":\"hello\"}")
            .map(|l| l.starts_with(b"{\"ok\":true"))
            .unwrap_or(false)
    });
}

#[test]
fn clients_that_hang_up_mid_request_are_forgotten() {
    let d = start();
    for i in 0..200 {
        let mut c = UnixStream::connect(&d.sock).unwrap();
        match i % 3 {
            0 => c.write_all(b"{\"op\":\"ge").unwrap(),
            1 => c
                .write_all(b"{\"op\":\"get\",\"key\":\"snapshot\"}\n")
                .unwrap(),
            _ => {}
        }
        drop(c);
    }
    still_serving(&d);
    wait_for("every hung-up client closed", || d.daemon.clients() == 0);
}

#[test]
fn a_watch_client_that_never_reads_is_dropped_and_stalls_no_one() {
    let d = start_with(
        Config {
            watch_write_timeout: Duration::from_millis(300),
            ..Config::default()
        },
        0o700,
        0o600,
    );
    // A snapshot of 3,000 processes is ~1 MB of JSON: a few fill the socket buffer.
    let mut big = model(1.0);
    big.procs = (0..3000)
        .map(|pid| ProcRate {
            pid,
            ..Default::default()
        })
        .collect();
    let mut sleeper = UnixStream::connect(&d.sock).unwrap();
    sleeper
        .write_all(b"{\"op\":\"watch\",\"key\":\"snapshot\"}\n")
        .unwrap();
    let mut other = session(&d);
    for i in 0..20 {
        big.load[0] = i as f64;
        d.daemon.publish_system(&big, 50.0);
        // Everyone else is answered while the sleeper's stream is stuck.
        let v = ask(&mut other, r#"{"op":"get","key":"load.one"}"#);
        assert_eq!(v["data"], i as f64);
    }
    wait_for("the non-reader dropped", || d.daemon.clients() == 1);
    drop(other);
    drop(sleeper);
    still_serving(&d);
}

#[test]
fn the_socket_admits_only_its_owner() {
    use std::os::unix::fs::PermissionsExt;
    let d = start();
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&d.sock), 0o600);
    assert_eq!(mode(d.sock.parent().unwrap()), 0o700);
    // A live daemon's socket is not taken over.
    let e = kernstat_daemon::bind(&d.sock, 0o600, 0o700).unwrap_err();
    assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse);
    // A stale one (nobody listening) is replaced.
    let stale = d.sock.with_file_name("stale");
    drop(std::os::unix::net::UnixListener::bind(&stale).unwrap());
    assert!(stale.exists());
    kernstat_daemon::bind(&stale, 0o600, 0o700).expect("stale socket replaced");
}

/// Says hello to the daemon at `sock` as `uid` and returns the reply line. The client
/// is a forked child that switches uid and then only makes system calls (no
/// allocation, no locks: the test process has other threads), handing the reply back
/// through a pipe.
fn hello_as(uid: u32, sock: &Path) -> String {
    use std::os::fd::FromRawFd;
    use std::os::unix::ffi::OsStrExt;
    // Everything the child needs is prepared before fork.
    // SAFETY: sockaddr_un is plain data; the path fits (checked).
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    let path = sock.as_os_str().as_bytes();
    assert!(path.len() < addr.sun_path.len(), "socket path too long");
    for (d, &b) in addr.sun_path.iter_mut().zip(path) {
        *d = b as libc::c_char;
    }
    let req = b"{\"op\":\"hello\"}\n";
    let mut fds = [0; 2];
    // SAFETY: pipe, fork, and in the child only async-signal-safe calls and _exit.
    unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
        let pid = libc::fork();
        assert!(pid >= 0, "fork");
        if pid == 0 {
            libc::close(fds[0]);
            if libc::setgroups(0, std::ptr::null()) != 0
                || libc::setgid(uid) != 0
                || libc::setuid(uid) != 0
            {
                libc::_exit(3);
            }
            let fd = libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
            let len = std::mem::size_of::<libc::sockaddr_un>() as libc::socklen_t;
            if fd < 0 || libc::connect(fd, &addr as *const _ as *const libc::sockaddr, len) != 0 {
                libc::_exit(4);
            }
            // A refused client may find the socket closed before its request is sent;
            // the daemon's reason is still there to read.
            libc::write(fd, req.as_ptr().cast(), req.len());
            let mut buf = [0u8; 1024];
            loop {
                let n = libc::read(fd, buf.as_mut_ptr().cast(), buf.len());
                if n <= 0 {
                    break;
                }
                libc::write(fds[1], buf.as_ptr().cast(), n as usize);
                if buf[..n as usize].contains(&b'\n') {
                    break;
                }
            }
            libc::_exit(0);
        }
        libc::close(fds[1]);
        let mut reply = Vec::new();
        let mut pipe = std::fs::File::from(std::os::fd::OwnedFd::from_raw_fd(fds[0]));
        std::io::Read::read_to_end(&mut pipe, &mut reply).unwrap();
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
        assert_eq!(
            libc::WEXITSTATUS(status),
            0,
            "the client as uid {uid} failed (status {status})"
        );
        String::from_utf8_lossy(&reply)
            .lines()
            .next()
            .unwrap_or_default()
            .to_string()
    }
}

#[test]
fn peer_credentials_are_checked() {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !kernstat_testkit::gate("switching to another uid", root, || "not root".into()) {
        return;
    }
    // A system daemon: anyone may open the socket, only uid 65533 (and root) is served.
    let d = start_with(
        Config {
            access: kernstat_daemon::Access {
                uids: Some(vec![65533]),
            },
            ..Config::default()
        },
        0o755,
        0o666,
    );
    // The temporary directory itself must be reachable by the other users.
    let mut p = d.sock.parent().unwrap();
    while let Some(parent) = p.parent() {
        if p == Path::new("/tmp") {
            break;
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p = parent;
    }
    let refused: Value = serde_json::from_str(&hello_as(65534, &d.sock)).unwrap();
    assert_eq!(refused["code"], "refused", "{refused}");
    let allowed: Value = serde_json::from_str(&hello_as(65533, &d.sock)).unwrap();
    assert_eq!(allowed["ok"], true, "{allowed}");
}

// --- Property tests: the request parser, and the connection's framing ---------------
// Cases per property: proptest's default (256) in `make test`; `make fuzz` raises
// PROPTEST_CASES.

mod props {
    use super::*;
    use kernstat_client::protocol::{self, Request};
    use proptest::prelude::*;
    use proptest::test_runner::TestRunner;

    proptest! {
        #[test]
        fn any_bytes_parse_or_are_refused(line in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = protocol::parse(&line);
        }

        #[test]
        fn a_get_of_any_key_reads_back(key in ".{0,64}", path in proptest::option::of(".{0,64}")) {
            let line = serde_json::to_vec(&serde_json::json!({"op": "get", "key": key, "path": path})).unwrap();
            // Keys with escapes cannot be borrowed from the line: refused, not misread.
            match protocol::parse(&line) {
                Ok(Request::Get { key: k, path: p, .. }) => {
                    prop_assert_eq!(k, key.as_str());
                    prop_assert_eq!(p, path.as_deref());
                }
                Ok(other) => prop_assert!(false, "parsed as {other:?}"),
                Err(_) => prop_assert!(key.contains(['"', '\\']) || key.chars().any(char::is_control)
                    || path.as_deref().is_some_and(|p| p.contains(['"', '\\']) || p.chars().any(char::is_control))),
            }
        }
    }

    /// One request line of a client that may be buggy or hostile (never `watch`, which
    /// turns the connection into a stream, and never a newline inside).
    fn request_line() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            Just(br#"{"op":"get","key":"load.one"}"#.to_vec()),
            Just(br#"{"op":"get","key":"no.such"}"#.to_vec()),
            Just(br#"{"op":"list"}"#.to_vec()),
            Just(br#"{"op":"hello"}"#.to_vec()),
            Just(br#"{"op":"status"}"#.to_vec()),
            Just(br#"{"op":"get","key":"git.branch","path":"/nonexistent"}"#.to_vec()),
            Just(br#"{"op":"get""#.to_vec()),
            Just(b"".to_vec()),
            Just(br#"{"op":"get","key":"load.one"}"#.iter().copied().chain(*b"\r").collect()),
            proptest::collection::vec(
                any::<u8>().prop_filter("no newline", |b| *b != b'\n'),
                0..200
            ),
        ]
    }

    #[test]
    fn lines_split_anywhere_are_each_answered_once_in_order() {
        let d = start();
        let mut runner = TestRunner::default();
        let cases = (
            proptest::collection::vec(request_line(), 1..20),
            proptest::collection::vec(1usize..64, 1..40),
        );
        runner
            .run(&cases, |(lines, cuts)| {
                let mut wire = Vec::new();
                for l in &lines {
                    wire.extend_from_slice(l);
                    wire.push(b'\n');
                }
                let mut s = UnixStream::connect(&d.sock).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                // Written in pieces of the generated sizes (cycled), each piece flushed
                // on its own: the server sees the lines split anywhere.
                let mut rest = &wire[..];
                for n in cuts.iter().cycle() {
                    if rest.is_empty() {
                        break;
                    }
                    let (piece, tail) = rest.split_at((*n).min(rest.len()));
                    s.write_all(piece).unwrap();
                    rest = tail;
                }
                s.write_all(b"{\"op\":\"hello\"}\n").unwrap();
                let mut r = std::io::BufReader::new(s);
                for (i, l) in lines.iter().enumerate() {
                    let mut reply = String::new();
                    std::io::BufRead::read_line(&mut r, &mut reply).unwrap();
                    let v: Value = serde_json::from_str(&reply).map_err(|e| {
                        TestCaseError::fail(format!("reply {i} not JSON ({e}): {reply:?}"))
                    })?;
                    prop_assert!(v["ok"].is_boolean(), "reply {}: {}", i, reply);
                    // Refused as a bad request exactly when the line does not parse.
                    let valid = protocol::parse(l.strip_suffix(b"\r").unwrap_or(l)).is_ok();
                    prop_assert_eq!(
                        v["code"] == "bad_request",
                        !valid,
                        "line {:?}: {}",
                        String::from_utf8_lossy(l),
                        reply
                    );
                }
                // The connection still works after all of it.
                let mut reply = String::new();
                std::io::BufRead::read_line(&mut r, &mut reply).unwrap();
                let v: Value = serde_json::from_str(&reply).unwrap();
                prop_assert_eq!(&v["data"]["name"], "kernstat");
                Ok(())
            })
            .unwrap();
        still_serving(&d);
    }
}
