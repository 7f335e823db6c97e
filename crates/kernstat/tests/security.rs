//! A second local user cannot feed kernstat: runtime directories and files that someone
//! else could have made or replaced are refused with one sentence, and the command goes
//! on without the shared state; a socket served by another user is not talked to.
//!
//! Root forks the unprivileged user 65534 (`nobody`) with setpriv; "another user" is
//! 65533 or root. Each test makes its own parent directory and points XDG_RUNTIME_DIR
//! at it, so the runtime directory under test is `<parent>/kernstat` and nothing of the
//! machine's (a real /tmp/kernstat-65534) is touched. Needs root (CI=true: must run).

mod common;
use common::kernstat;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use kernstat_testkit::tool_gate;

const NOBODY: u32 = 65534;
const OTHER: u32 = 65533;

fn root_with_setpriv() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    kernstat_testkit::gate("root (to fork an unprivileged user)", root, || {
        "not root".into()
    }) && tool_gate("setpriv")
}

/// What stands for user 65534's XDG_RUNTIME_DIR (theirs, 0755 so that the test's
/// other user can reach a socket in it); the runtime directory under test is its
/// `kernstat` entry. Removed when dropped.
struct Parent(tempfile::TempDir);

impl Parent {
    fn new() -> Self {
        let d = tempfile::Builder::new()
            .prefix("kernstat-sec-")
            .tempdir_in("/tmp")
            .unwrap();
        std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        chown(d.path(), NOBODY);
        Parent(d)
    }

    fn runtime(&self) -> PathBuf {
        self.0.path().join("kernstat")
    }
}

fn chown(p: &Path, uid: u32) {
    std::os::unix::fs::lchown(p, Some(uid), Some(uid)).unwrap();
}

/// kernstat ARGS as `uid`, with XDG_RUNTIME_DIR = `xdg`, no capabilities.
fn as_user(uid: u32, xdg: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("setpriv");
    c.args([
        &format!("--reuid={uid}"),
        &format!("--regid={uid}"),
        "--clear-groups",
        "--inh-caps=-all",
    ])
    .arg(kernstat())
    .args(args)
    .env("XDG_RUNTIME_DIR", xdg)
    .stdin(Stdio::null());
    c
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A bar as `uid` that prints the process count every `interval` (killed when
/// stopped or dropped).
struct Bar {
    child: Child,
    lines: BufReader<std::process::ChildStdout>,
    stderr: Option<std::process::ChildStderr>,
}

impl Bar {
    fn start(uid: u32, xdg: &Path, interval: &str) -> Self {
        let mut child = as_user(
            uid,
            xdg,
            &[
                "bar",
                "--format",
                "text",
                "--text",
                "{procs}",
                "--no-bpf",
                "--interval",
                interval,
            ],
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
        let lines = BufReader::new(child.stdout.take().unwrap());
        let stderr = child.stderr.take();
        Bar {
            child,
            lines,
            stderr,
        }
    }

    /// Its next line: a process count, as a bar that does its job prints.
    fn line(&mut self) -> u64 {
        let mut l = String::new();
        self.lines.read_line(&mut l).unwrap();
        l.trim()
            .parse()
            .unwrap_or_else(|_| panic!("a process count, not {l:?}"))
    }

    /// Stops it and returns what it said on stderr.
    fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let mut s = String::new();
        use std::io::Read;
        let _ = self.stderr.take().unwrap().read_to_string(&mut s);
        s
    }
}

impl Drop for Bar {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Every command a user runs in a directory it must not trust: the bar samples alone,
/// `get` computes directly, the daemon exits 2; each says why in one sentence, and
/// nothing is created in the directory.
fn refused_everywhere(parent: &Parent, why: &str) {
    let dir = parent.runtime();
    let expect = format!("{} {why}; refusing to use it", dir.display());
    let before: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();

    let mut bar = Bar::start(NOBODY, parent.0.path(), "0.2");
    assert!(bar.line() > 0);
    let err = bar.stop();
    assert!(
        err.contains(&format!("kernstat: {expect}; sampling alone")),
        "bar: {err}"
    );

    let out = as_user(NOBODY, parent.0.path(), &["get", "mem.total"])
        .output()
        .unwrap();
    let (stdout, err) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(stdout.trim().parse::<u64>().unwrap() > 0);
    assert!(
        err.contains(&format!("kernstat: {expect}; computed directly")),
        "get: {err}"
    );

    let out = as_user(NOBODY, parent.0.path(), &["daemon", "--no-bpf"])
        .output()
        .unwrap();
    let (_, err) = text(&out);
    assert_eq!(out.status.code(), Some(2), "daemon: {err}");
    assert_eq!(err.trim(), format!("kernstat daemon: {expect}"));

    let after: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert_eq!(before, after, "nothing was written into {}", dir.display());
}

#[test]
fn a_world_writable_directory_of_roots_is_refused() {
    if !root_with_setpriv() {
        return;
    }
    let p = Parent::new();
    std::fs::create_dir(p.runtime()).unwrap();
    std::fs::set_permissions(p.runtime(), std::fs::Permissions::from_mode(0o777)).unwrap();
    refused_everywhere(&p, "belongs to uid 0 and is writable by others");
}

#[test]
fn a_directory_of_another_user_is_refused() {
    if !root_with_setpriv() {
        return;
    }
    let p = Parent::new();
    std::fs::create_dir(p.runtime()).unwrap();
    std::fs::set_permissions(p.runtime(), std::fs::Permissions::from_mode(0o755)).unwrap();
    chown(&p.runtime(), OTHER);
    refused_everywhere(&p, &format!("belongs to uid {OTHER}"));
}

#[test]
fn a_symlink_in_place_of_the_directory_is_refused() {
    if !root_with_setpriv() {
        return;
    }
    let p = Parent::new();
    // Even a link to a directory that would pass (ours, 0700) is not followed.
    let target = p.0.path().join("elsewhere");
    std::fs::create_dir(&target).unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o700)).unwrap();
    chown(&target, NOBODY);
    std::os::unix::fs::symlink(&target, p.runtime()).unwrap();
    chown(&p.runtime(), NOBODY);
    refused_everywhere(&p, "is a symbolic link");
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
}

#[test]
fn a_missing_directory_is_made_private() {
    if !root_with_setpriv() {
        return;
    }
    let p = Parent::new();
    let mut bar = Bar::start(NOBODY, p.0.path(), "0.2");
    assert!(bar.line() > 0);
    let err = bar.stop();
    assert!(!err.contains("refusing"), "{err}");
    let m = std::fs::symlink_metadata(p.runtime()).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!((m.uid(), m.mode() & 0o777), (NOBODY, 0o700));
}

/// A leader bar of user 65534 with a long interval (it publishes once, right after it
/// starts), and the path of its published line once it is there.
fn leader_and_its_line_file(p: &Parent) -> (Bar, PathBuf) {
    let mut leader = Bar::start(NOBODY, p.0.path(), "60");
    assert!(leader.line() > 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = std::fs::read_dir(p.runtime())
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|f| f.extension().is_some_and(|x| x == "out"));
        if let Some(out) = out {
            return (leader, out);
        }
        assert!(Instant::now() < deadline, "the leader published nothing");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A second, identical bar: it would follow the leader, but refuses what is in place of
/// the line file, says so, and prints a sample of its own.
fn follower_refuses(p: &Parent, why: &str) {
    let mut follower = Bar::start(NOBODY, p.0.path(), "60");
    assert!(follower.line() > 0);
    let err = follower.stop();
    assert!(err.contains(why), "{err}");
    assert!(err.contains("; sampling alone"), "{err}");
}

#[test]
fn a_fifo_in_place_of_the_published_line_is_refused() {
    if !root_with_setpriv() {
        return;
    }
    let p = Parent::new();
    let (leader, out) = leader_and_its_line_file(&p);
    std::fs::remove_file(&out).unwrap();
    let c = std::ffi::CString::new(out.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    chown(&out, NOBODY);
    follower_refuses(&p, "is not a regular file");
    leader.stop();
}

#[test]
fn a_link_to_dev_zero_in_place_of_the_published_line_is_refused() {
    if !root_with_setpriv() {
        return;
    }
    let p = Parent::new();
    let (leader, out) = leader_and_its_line_file(&p);
    std::fs::remove_file(&out).unwrap();
    std::os::unix::fs::symlink("/dev/zero", &out).unwrap();
    chown(&out, NOBODY);
    follower_refuses(&p, "is a symbolic link");
    leader.stop();
}

#[test]
fn a_socket_served_by_another_user_is_not_talked_to() {
    if !root_with_setpriv() {
        return;
    }
    let p = Parent::new();
    // User 65533 runs a daemon on a socket anyone can connect to.
    let theirs = p.0.path().join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::fs::set_permissions(&theirs, std::fs::Permissions::from_mode(0o755)).unwrap();
    chown(&theirs, OTHER);
    let sock = theirs.join("run/sock");
    let mut daemon = Killed(
        as_user(
            OTHER,
            &theirs,
            &["daemon", "--no-bpf", "--socket", sock.to_str().unwrap()],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap(),
    );
    let mut said = String::new();
    BufReader::new(daemon.0.stderr.take().unwrap())
        .read_line(&mut said)
        .unwrap();
    assert!(said.contains("listening on"), "{said}");
    // Its directory was made private (0700); open it and the socket to everyone.
    std::fs::set_permissions(theirs.join("run"), std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o777)).unwrap();

    let s = sock.to_str().unwrap();
    let refusal = format!(
        "{s} is served by uid {OTHER}, neither you (uid {NOBODY}) nor root; refusing to talk to it"
    );
    let out = as_user(NOBODY, p.0.path(), &["get", "mem.total", "--socket", s])
        .output()
        .unwrap();
    let (stdout, err) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        stdout.trim().parse::<u64>().unwrap() > 0,
        "computed directly"
    );
    assert!(err.contains(&refusal), "get: {err}");
    for cmd in [&["watch", "mem.total"][..], &["status"][..]] {
        let out = as_user(NOBODY, p.0.path(), &[cmd, &["--socket", s]].concat())
            .output()
            .unwrap();
        let (_, err) = text(&out);
        assert_eq!(out.status.code(), Some(2), "{cmd:?}: {err}");
        assert!(err.contains(&refusal), "{cmd:?}: {err}");
    }
    // The same client talks to a daemon of its own user.
    let out = as_user(OTHER, p.0.path(), &["get", "mem.total", "--socket", s])
        .output()
        .unwrap();
    let (_, err) = text(&out);
    assert!(!err.contains("refusing"), "its owner is answered: {err}");
    assert!(!err.contains("computed directly"), "{err}");
}

/// A child killed and reaped when dropped, also when the test fails.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Root without XDG_RUNTIME_DIR beside a running system daemon (whose /run/kernstat
/// stays root's, 0755: nothing is handed to its user): root's bar keeps its lock in a
/// directory of its own (/run/kernstat-root, 0700), and root's `get` is answered from
/// the system daemon's snapshot. In a private mount namespace with
/// its own /run (a tmpfs), so the machine's /run and any real system daemon are
/// untouched.
#[test]
fn roots_bar_and_get_work_beside_a_system_daemon_from_its_snapshot() {
    if !root_with_setpriv() || !tool_gate("unshare") {
        return;
    }
    let script = format!(
        r#"set -e
mount -t tmpfs -o mode=755 tmpfs /run
ks={ks}
"$ks" daemon --system --interval 1 >/dev/null 2>/run/daemon.err &
daemon=$!
# Whatever fails below, the daemon does not outlive the test.
trap 'kill $daemon 2>/dev/null' EXIT
i=0
while [ ! -S /run/kernstat/sock ] && [ $i -lt 900 ]; do sleep 0.1; i=$((i+1)); done
echo "system_dir=$(stat -c '%u %a' /run/kernstat)"
export KERNSTAT_NO_AUTOSTART=1
unset XDG_RUNTIME_DIR
echo "bar_line=$("$ks" bar --format text --interval 1 2>/run/bar.err | head -n 1)"
echo "bar_err=$(tr '\n' ' ' </run/bar.err)"
echo "root_dir=$(stat -c '%u %a' /run/kernstat-root)"
echo "root_files=$(ls /run/kernstat-root | tr '\n' ' ')"
echo "get=$("$ks" get mem.total --json 2>&1)"
kill $daemon
wait $daemon || true
echo "daemon_err=$(tr '\n' ' ' </run/daemon.err)"
"#,
        ks = kernstat().display()
    );
    let out = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (stdout, err) = text(&out);
    let field = |name: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("no {name} in:\n{stdout}\n{err}"))
            .trim()
            .to_string()
    };
    assert_eq!(field("system_dir"), "0 755", "{stdout}");
    assert!(!field("bar_line").is_empty(), "{stdout}");
    assert!(!field("bar_err").contains("refusing"), "{stdout}");
    assert_eq!(field("root_dir"), "0 700", "{stdout}");
    assert!(field("root_files").contains(".lock"), "{stdout}");
    let get = common::json(&field("get"));
    assert_eq!(get["ok"], true, "{get}");
    // From the system daemon's shared-memory snapshot: its seccomp list once lacked
    // rename(2), so it never published one and every client paid a socket round trip.
    assert_eq!(get["answered_by"], "shm", "{get}");
    let mem_total_kb: u64 = std::fs::read_to_string("/proc/meminfo")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    assert_eq!(get["data"], mem_total_kb * 1024, "{get}");
    let daemon_err = field("daemon_err");
    assert!(
        daemon_err.contains("listening on /run/kernstat/sock") && !daemon_err.contains("snapshot"),
        "{daemon_err}"
    );
}
