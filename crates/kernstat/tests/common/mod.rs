//! What the CLI test files share: the binary under test, running it to completion, and
//! the BPF/procfs source choice. (Each test file is its own crate and uses a part of
//! this module, so unused-item warnings here are expected.)
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The `kernstat` program users run (kernstat-front's binary, which execs this
/// package's kernstat-full beside it for everything but get and eval).
pub fn kernstat() -> &'static Path {
    static FRONT: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    FRONT.get_or_init(kernstat_testkit::front_bin)
}

/// A private runtime directory for this test binary: kernstat's locks, published bar
/// lines and default daemon socket go here, never into the user's. Under cargo's
/// per-target temporary directory, so nothing is left on the machine outside target/.
pub fn private_runtime_dir() -> &'static Path {
    static DIR: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    DIR.get_or_init(|| {
        let d = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("rt-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("create the private runtime directory");
        // The runtime directory is private to its user (kernstat refuses others).
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        d
    })
}

/// kernstat, isolated from whatever the user runs on this machine: a private runtime
/// directory (bar locks, the user daemon's socket), a pin directory where no pin is (so a
/// user's `kernstat ps --pin` does not change what the tests read), and a config
/// directory where no config file is.
pub fn command() -> Command {
    let mut c = Command::new(kernstat());
    c.env("XDG_RUNTIME_DIR", private_runtime_dir())
        .env(
            "KERNSTAT_PIN_DIR",
            private_runtime_dir().join("no-pin-here"),
        )
        // No config file of the user's (a daemon reads $XDG_CONFIG_HOME/kernstat/).
        .env(
            "XDG_CONFIG_HOME",
            private_runtime_dir().join("no-config-here"),
        );
    c
}

/// A tracing command (`runqlat`, `biolat`, `tcp`, `events` ...) started with `args`,
/// returned once it says "... Hit Ctrl-C to end." on stderr (its programs are attached:
/// loading takes over a second on a busy machine, and work done before is not seen),
/// with the rest of its stderr collected by a thread.
pub fn traced(args: &[&str]) -> (std::process::Child, std::thread::JoinHandle<String>) {
    use std::io::BufRead;
    let mut child = command()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start kernstat");
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut seen = String::new();
    loop {
        let mut line = String::new();
        if err.read_line(&mut line).unwrap_or(0) == 0 {
            panic!("kernstat {args:?} ended before it traced: {seen}");
        }
        seen.push_str(&line);
        if line.contains("Hit Ctrl-C to end.") {
            break;
        }
    }
    let rest = std::thread::spawn(move || {
        let mut rest = seen;
        let _ = std::io::Read::read_to_string(&mut err, &mut rest);
        rest
    });
    (child, rest)
}

/// Stops a [`traced`] command as Ctrl-C would and returns its stdout: it must exit, with
/// success, within 30 s (a lost signal fails the test instead of hanging the suite).
#[allow(dead_code)]
pub fn interrupt(child: std::process::Child, stderr: std::thread::JoinHandle<String>) -> String {
    interrupt_with_stderr(child, stderr).0
}

/// [`interrupt`], also returning what the tracer wrote to stderr (its count of runs
/// it could not measure, for a failure's message).
#[allow(dead_code)]
pub fn interrupt_with_stderr(
    mut child: std::process::Child,
    stderr: std::thread::JoinHandle<String>,
) -> (String, String) {
    // Its output drained as it comes (a full pipe would keep it from ending).
    let mut stdout = child.stdout.take().expect("a piped stdout");
    let out = std::thread::spawn(move || {
        let mut out = String::new();
        let _ = std::io::Read::read_to_string(&mut stdout, &mut out);
        out
    });
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let t = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > std::time::Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the tracer did not end within 30 s of SIGINT");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let out = out.join().unwrap();
    let said = stderr.join().unwrap();
    assert!(status.success(), "the tracer exited with {status}: {said}");
    (out, said)
}

/// Runs kernstat to completion: (exit code, stdout, stderr).
pub fn run(args: &[&str]) -> (Option<i32>, String, String) {
    let out = command().args(args).output().expect("run kernstat");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// One JSON line, or a failure that shows it.
pub fn json(line: &str) -> Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

/// Both sources when root (BPF must work under CI); procfs alone otherwise.
pub fn sources() -> Vec<&'static [&'static str]> {
    if kernstat_testkit::bpf_gate() {
        vec![&[], &["--no-bpf"]]
    } else {
        vec![&["--no-bpf"]]
    }
}

/// kernstat as user 65534 (`nobody`) with no capabilities, forked by root with setpriv
/// (callers gate on root and on setpriv).
pub fn as_nobody() -> Command {
    let mut c = Command::new("setpriv");
    c.args([
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
        "--inh-caps=-all",
    ])
    .arg(kernstat());
    c
}

/// A daemon on a temporary socket with its metrics endpoint on a port the kernel chose;
/// its stderr is collected (`stderr_lines`); killed when dropped.
pub struct MetricsDaemon {
    /// The daemon process.
    pub child: std::process::Child,
    /// Where /metrics is served.
    pub addr: std::net::SocketAddr,
    /// Its Unix socket.
    pub sock: std::path::PathBuf,
    /// Everything it printed on stderr so far.
    pub stderr_lines: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    _dir: tempfile::TempDir,
}

impl MetricsDaemon {
    /// `kernstat daemon --interval INTERVAL --metrics 127.0.0.1:0 EXTRA...`, returned
    /// once its first sample is served.
    pub fn start(interval: &str, extra: &[&str]) -> Self {
        use std::io::BufRead;
        use std::time::{Duration, Instant};
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("run/sock");
        let mut child = command()
            .args(["daemon", "--socket", sock.to_str().unwrap()])
            .args(["--interval", interval, "--metrics", "127.0.0.1:0"])
            .args(extra)
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start kernstat daemon");
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let (tx, rx) = std::sync::mpsc::channel();
        let err = child.stderr.take().unwrap();
        let collected = lines.clone();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                // "kernstat daemon: listening on SOCK and http://ADDR/metrics (...)"
                if let Some(rest) = line.split("http://").nth(1) {
                    let _ = tx.send(rest.split('/').next().unwrap_or("").to_string());
                }
                collected.lock().unwrap().push(line);
            }
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("the daemon did not listen: {:?}", lines.lock().unwrap()))
            .parse()
            .unwrap();
        let d = MetricsDaemon {
            child,
            addr,
            sock,
            stderr_lines: lines,
            _dir: dir,
        };
        let t = Instant::now();
        while !d.scrape().contains("kernstat_memory_total_bytes") {
            assert!(t.elapsed() < Duration::from_secs(20), "no sample published");
            std::thread::sleep(Duration::from_millis(50));
        }
        d
    }

    /// The /metrics URL.
    pub fn url(&self) -> String {
        format!("http://{}/metrics", self.addr)
    }

    /// One scrape (classic text), or "" when the request fails.
    pub fn scrape(&self) -> String {
        ureq::get(&self.url())
            .call()
            .ok()
            .and_then(|mut r| r.body_mut().read_to_string().ok())
            .unwrap_or_default()
    }
}

impl Drop for MetricsDaemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A daemon on a temporary socket; SIGKILLed on drop if a test did not stop it.
pub struct DaemonProc {
    pub child: Child,
    pub sock: PathBuf,
    pub dir: tempfile::TempDir,
    extra: Vec<String>,
}

impl DaemonProc {
    pub fn start(extra: &[&str]) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let sock = dir.path().join("run/sock");
        let extra: Vec<String> = extra.iter().map(|a| a.to_string()).collect();
        let child = Self::spawn(&sock, &extra);
        let d = DaemonProc {
            child,
            sock,
            dir,
            extra,
        };
        d.wait_ready();
        d
    }

    fn spawn(sock: &Path, extra: &[String]) -> Child {
        command()
            .args(["daemon", "--socket"])
            .arg(sock)
            .args(["--interval", "0.3"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start kernstat daemon")
    }

    /// A clean stop, then a new daemon with the same arguments on the same socket.
    pub fn restart(mut self) -> Self {
        // SAFETY: kill with a valid signal.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
        self.child = Self::spawn(&self.sock, &self.extra);
        self.wait_ready();
        self
    }

    /// Until the daemon itself (not `get` computing without it) answers with its first
    /// sample.
    pub fn wait_ready(&self) {
        let t = Instant::now();
        while !daemon_answers(&self.sock, "cpu.percent") {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "the daemon did not come up"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `kernstat put KEY VALUE` to this daemon, which must succeed.
    pub fn put(&self, key: &str, value: &str) {
        let st = command()
            .args(["put", key, value, "--socket"])
            .arg(&self.sock)
            .status()
            .unwrap();
        assert!(st.success(), "put {key}");
    }

    pub fn get(&self, args: &[&str]) -> (Option<i32>, String, String) {
        let mut all = vec!["get", "--socket", self.sock.to_str().unwrap()];
        all.extend_from_slice(args);
        run(&all)
    }

    pub fn value(&self, key: &str) -> Value {
        let (code, out, err) = self.get(&[key, "--json"]);
        assert_eq!(code, Some(0), "get {key}: {err}");
        let v: Value = serde_json::from_str(out.trim()).unwrap();
        assert_eq!(v["ok"], true);
        // Whether it is stale depends on how busy the machine is (3 intervals + 1 s
        // without a sample); the server test checks the rule itself. Here: reported.
        assert!(v["stale"].is_boolean() && v["age_ms"].is_u64(), "{v}");
        v["data"].clone()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM; returns the exit status and stderr.
    pub fn stop(mut self) -> (Option<i32>, String) {
        // SAFETY: kill with a valid signal.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let mut err = String::new();
        use std::io::Read;
        if let Some(mut e) = self.child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        let status = self.child.wait().unwrap();
        (status.code(), err)
    }
}

impl Drop for DaemonProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Whether the daemon at `sock` answers `key` with a value — from its snapshot or its
/// socket, not `get` computing it without a daemon (which would answer too).
pub fn daemon_answers(sock: &Path, key: &str) -> bool {
    let Ok(out) = command()
        .args(["get", "--json", key, "--socket"])
        .arg(sock)
        .output()
    else {
        return false;
    };
    let Ok(v) = serde_json::from_slice::<Value>(&out.stdout) else {
        return false;
    };
    v["ok"] == true && (v["answered_by"] == "shm" || v["answered_by"] == "socket")
}

/// A private tmux server with one pane running `shell` (a shell, or `kernstat top`);
/// killed on drop.
pub struct Pane {
    socket: PathBuf,
}

impl Pane {
    pub fn start(dir: &Path, cwd: &Path, env: &[(&str, &str)], shell: &[&str]) -> Pane {
        Pane::sized(dir, cwd, env, shell, (160, 40))
    }

    /// A pane of `cols` x `rows` cells.
    pub fn sized(
        dir: &Path,
        cwd: &Path,
        env: &[(&str, &str)],
        shell: &[&str],
        (cols, rows): (u16, u16),
    ) -> Pane {
        let socket = dir.join("tmux.sock");
        let st = Command::new("tmux")
            .arg("-S")
            .arg(&socket)
            .args([
                "-f",
                "/dev/null",
                "new-session",
                "-d",
                "-x",
                &cols.to_string(),
                "-y",
                &rows.to_string(),
            ])
            .arg("-c")
            .arg(cwd)
            .args(shell)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap())
            .env("TERM", "xterm-256color")
            .env("HOME", dir)
            .env("XDG_RUNTIME_DIR", private_runtime_dir())
            .env("XDG_CONFIG_HOME", dir.join("config"))
            .env("KERNSTAT_NO_AUTOSTART", "1")
            .envs(env.iter().copied())
            .status()
            .unwrap();
        assert!(st.success(), "tmux new-session");
        Pane { socket }
    }

    pub fn tmux(&self, args: &[&str]) -> String {
        let out = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .args(args)
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn send(&self, keys: &str) {
        self.tmux(&["send-keys", "-t", "0", "-l", keys]);
        self.tmux(&["send-keys", "-t", "0", "Enter"]);
    }

    pub fn screen(&self) -> String {
        self.tmux(&["capture-pane", "-p", "-t", "0"])
    }

    /// The last prompt on screen (the last line that is not empty).
    pub fn last_line(&self) -> String {
        self.screen()
            .lines()
            .rfind(|l| !l.trim().is_empty())
            .unwrap_or("")
            .to_string()
    }

    /// Until the last prompt shows `want` (pressing Enter now and then: a prompt is
    /// drawn on Enter). Panics with the screen after 15 s.
    pub fn wait_prompt(&self, want: &str) {
        let t = Instant::now();
        let mut n = 0;
        loop {
            if self.last_line().contains(want) {
                return;
            }
            assert!(
                t.elapsed() < Duration::from_secs(15),
                "prompt never showed {want:?}:\n{}",
                self.screen()
            );
            n += 1;
            if n % 10 == 0 {
                self.send("");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn shell_pid(&self) -> i32 {
        self.tmux(&["display-message", "-p", "-t", "0", "#{pane_pid}"])
            .trim()
            .parse()
            .unwrap()
    }
}

impl Drop for Pane {
    fn drop(&mut self) {
        let _ = Command::new("tmux")
            .arg("-S")
            .arg(&self.socket)
            .arg("kill-server")
            .status();
    }
}
