//! What the hostile-user tests share: the users (uids with no passwd entry, used by these
//! tests only), running a program as one of them with setpriv, a system daemon as
//! nobody, requests over its socket as a given user, and hostile files. Included with
//! `#[path]` by each hostile-user test file (each uses a part of it).
#![allow(dead_code)]

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use kernstat_testkit::{hostile_bin, tool_gate};
use serde_json::Value;

use crate::common::{command, daemon_answers};

pub const VICTIM: u32 = 64001;
pub const ATTACKER: u32 = 64002;
/// The zsh test's victim (its default runtime directory is not the rename test's).
pub const ZSH_VICTIM: u32 = 64003;
/// The user who churns long command lines past the recorder (hostile_archives.rs).
pub const CHURNER: u32 = 64004;
pub const NOBODY: u32 = 65534;

pub fn gate() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    kernstat_testkit::gate("root (to fork other users)", root, || "not root".into())
        && tool_gate("setpriv")
}

/// `program ARGS` as `uid` (its own group, no others, no capabilities) with a clean
/// environment: no runtime directory, no autostart.
pub fn as_uid(uid: u32, program: &Path) -> Command {
    let mut c = Command::new("setpriv");
    c.args([
        &format!("--reuid={uid}"),
        &format!("--regid={uid}"),
        "--clear-groups",
        "--inh-caps=-all",
    ])
    .arg(program)
    .env_clear()
    .env("PATH", std::env::var("PATH").unwrap_or_default())
    .env("HOME", "/nonexistent")
    .env("KERNSTAT_NO_AUTOSTART", "1")
    .stdin(Stdio::null());
    c
}

pub fn chown_r(p: &Path, uid: u32) {
    let st = Command::new("chown")
        .args(["-R", "-h", &format!("{uid}:{uid}")])
        .arg(p)
        .status()
        .unwrap();
    assert!(st.success());
}

/// A directory in /tmp that every user can reach (0755, root's), removed when dropped.
pub fn open_dir() -> tempfile::TempDir {
    let d = tempfile::Builder::new()
        .prefix("ks-hostile-")
        .tempdir_in("/tmp")
        .unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    d
}

/// A child killed and reaped when the test ends, however it ends (a failed assertion
/// must not leave a daemon or a listener behind).
pub struct Guard(pub Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl std::ops::Deref for Guard {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.0
    }
}

impl std::ops::DerefMut for Guard {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.0
    }
}

pub fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// A system daemon (as nobody, procfs unless asked for BPF) on a socket in a directory
/// every user reaches; what it says on stderr goes to a file beside the socket.
pub struct SysDaemon {
    pub child: Child,
    pub sock: PathBuf,
    _dir: tempfile::TempDir,
}

impl SysDaemon {
    pub fn start(extra: &[&str]) -> SysDaemon {
        Self::start_with(extra, |_| {})
    }

    /// With `setup` applied to its command first (limits, environment).
    pub fn start_with(extra: &[&str], setup: impl FnOnce(&mut Command)) -> SysDaemon {
        Self::start_opts(false, extra, setup)
    }

    /// With BPF (loaded as root before the daemon becomes nobody) or from /proc.
    pub fn start_opts(bpf: bool, extra: &[&str], setup: impl FnOnce(&mut Command)) -> SysDaemon {
        let dir = open_dir();
        let sock = dir.path().join("sys/sock");
        let log = std::fs::File::create(dir.path().join("stderr")).unwrap();
        let mut cmd = command();
        setup(&mut cmd);
        cmd.args([
            "daemon",
            "--system",
            "--user",
            "nobody",
            "--interval",
            "0.5",
        ]);
        if !bpf {
            cmd.arg("--no-bpf");
        }
        let child = cmd
            .arg("--socket")
            .arg(&sock)
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        let t = Instant::now();
        while !daemon_answers(&sock, "cpu.percent") {
            assert!(t.elapsed() < Duration::from_secs(20), "no system daemon");
            std::thread::sleep(Duration::from_millis(20));
        }
        SysDaemon {
            child,
            sock,
            _dir: dir,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// What it said on stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("stderr")).unwrap_or_default()
    }

    /// The address of its /metrics (from its start line), for --metrics 127.0.0.1:0.
    pub fn metrics_url(&self) -> String {
        let err = self.stderr();
        let at = err
            .find("http://")
            .unwrap_or_else(|| panic!("no metrics address: {err}"));
        let url = &err[at..];
        url[..url.find("/metrics").unwrap() + 8].to_string()
    }
}

impl Drop for SysDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Sends `requests` (JSON lines) to `sock` as `uid` over one connection; the replies, or
/// "TIMEOUT" where one did not come within `timeout_ms` (then the rest are not sent).
pub fn ask(uid: u32, sock: &Path, requests: &[String], timeout_ms: u64) -> Vec<String> {
    let mut c = as_uid(uid, &hostile_bin())
        .arg("ask")
        .arg(sock)
        .arg(timeout_ms.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = c.stdin.take().unwrap();
    let all = requests.join("\n") + "\n";
    let writer = std::thread::spawn(move || {
        let _ = input.write_all(all.as_bytes());
    });
    let o = c.wait_with_output().unwrap();
    let _ = writer.join();
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .map(str::to_string)
        .collect()
}

pub fn get(key: &str, path: Option<&Path>) -> String {
    let mut v = serde_json::json!({"op": "get", "key": key});
    if let Some(p) = path {
        v["path"] = Value::String(p.to_str().unwrap().into());
    }
    v.to_string()
}

pub fn mkfifo(p: &Path) {
    let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
    // SAFETY: a NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
}

/// A repository of files as git leaves them (HEAD on main, one loose ref), made by hand
/// so that each file can be replaced with something hostile.
pub fn fake_repo(dir: &Path) {
    let g = dir.join(".git");
    std::fs::create_dir_all(g.join("refs/heads")).unwrap();
    std::fs::create_dir_all(g.join("logs/refs")).unwrap();
    std::fs::create_dir_all(g.join("rebase-merge")).unwrap();
    std::fs::create_dir_all(g.join("objects")).unwrap();
    std::fs::write(g.join("HEAD"), "ref: refs/heads/main\n").unwrap();
    std::fs::write(
        g.join("refs/heads/main"),
        "1111111111111111111111111111111111111111\n",
    )
    .unwrap();
    std::fs::write(g.join("rebase-merge/end"), "3\n").unwrap();
    std::fs::write(g.join("config"), "[core]\n\tbare = false\n").unwrap();
}
