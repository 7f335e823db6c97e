//! Helpers shared by kernstat's tests and benchmarks.
//!
//! - [`bpf_gate`]: tests that need BPF run as root; elsewhere they skip with a printed
//!   reason, but with `CI=true` a BPF test that cannot run fails (never a silent skip).
//! - [`IdleProcs`]: N real idle processes, killed and reaped on drop.
//! - [`burn`]: CPU work with a known duration.
//! - [`LoopDevice`]: a block device of the test's own.
#![deny(missing_docs)]

mod loopdev;
pub use loopdev::LoopDevice;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// True when running under CI (`CI=true`), where nothing may be skipped.
pub fn in_ci() -> bool {
    std::env::var("CI")
        .map(|v| v == "true" || v == "1")
        .unwrap_or(false)
}

/// Decides whether a test that needs `what` may run. `available` says whether it can;
/// `why_not` explains when not. Returns true to run; false to skip (after printing why);
/// panics under CI instead of skipping.
pub fn gate(what: &str, available: bool, why_not: impl FnOnce() -> String) -> bool {
    if available {
        return true;
    }
    let reason = why_not();
    if in_ci() {
        panic!("CI=true: {what} is required but unavailable: {reason}");
    }
    eprintln!("SKIP ({what} unavailable: {reason})");
    false
}

/// Gate for tests that load BPF programs: root (effective uid 0) is required.
pub fn bpf_gate() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    gate("BPF (root)", root, || "not running as root".to_string())
}

/// Gate for tests that need an external program (a peer tool or a workload generator).
pub fn tool_gate(program: &str) -> bool {
    let found = which(program).is_some();
    gate(program, found, || {
        format!("{program} is not installed (make deps installs it)")
    })
}

/// Finds a program on PATH (or in /usr/sbin, /sbin for tools installed there).
pub fn which(program: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin".into(), "/sbin".into()])
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// A fleet of real idle processes (`sleep`), for tests and benchmarks that need a
/// machine with N more tasks. Killed and reaped when dropped, and killed by the kernel
/// if this process dies first (PR_SET_PDEATHSIG). `ks-workload idle N` is the same fleet
/// for scripts.
#[derive(Debug)]
pub struct IdleProcs {
    children: Vec<Child>,
}

impl IdleProcs {
    /// Starts `n` idle processes.
    pub fn spawn(n: usize) -> std::io::Result<Self> {
        let mut children = Vec::with_capacity(n);
        use std::os::unix::process::CommandExt;
        for _ in 0..n {
            let mut cmd = Command::new("sleep");
            cmd.arg("100000")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null());
            // SAFETY: prctl is async-signal-safe. The children die with their parent even
            // when it is killed (no destructor runs then), so a fleet never outlives it.
            unsafe {
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                    Ok(())
                });
            }
            children.push(cmd.spawn()?);
        }
        Ok(IdleProcs { children })
    }

    /// Their pids.
    pub fn pids(&self) -> Vec<u32> {
        self.children.iter().map(Child::id).collect()
    }

    /// How many.
    pub fn len(&self) -> usize {
        self.children.len()
    }

    /// None started.
    pub fn is_empty(&self) -> bool {
        self.children.is_empty()
    }
}

impl Drop for IdleProcs {
    fn drop(&mut self) {
        for c in &mut self.children {
            let _ = c.kill();
        }
        for c in &mut self.children {
            let _ = c.wait();
        }
    }
}

/// This thread's CPU time (CLOCK_THREAD_CPUTIME_ID).
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is valid for writes.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

/// Spins until this thread has used `d` of CPU time: a workload with a known answer
/// however busy the machine is.
pub fn burn(d: Duration) {
    let end = thread_cpu_time() + d;
    let mut x: u64 = 1;
    while thread_cpu_time() < end {
        for _ in 0..10_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
    }
}

/// Counts the processes currently in /proc.
pub fn proc_count() -> usize {
    std::fs::read_dir("/proc")
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .bytes()
                        .all(|b| b.is_ascii_digit())
                })
                .count()
        })
        .unwrap_or(0)
}

/// The `ks-workload` binary, (re)built by cargo once per test process so it is never stale.
pub fn workload_bin() -> std::path::PathBuf {
    static BUILT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| build_bin("ks-workload")).clone()
}

/// The `ks-hostile` binary (a hostile local user's moves, for the security tests), built
/// as `workload_bin` is.
pub fn hostile_bin() -> std::path::PathBuf {
    static BUILT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BUILT.get_or_init(|| build_bin("ks-hostile")).clone()
}

/// `kernstat`, the small front program (package kernstat-front), built beside the test
/// binaries if it is not there yet (it is another package's binary, which cargo does not
/// build for this package's tests on its own).
pub fn front_bin() -> std::path::PathBuf {
    static BUILT: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| build_package_bin("kernstat-front", "kernstat"))
        .clone()
}

fn build_bin(name: &str) -> std::path::PathBuf {
    build_package_bin("kernstat-testkit", name)
}

fn build_package_bin(package: &str, name: &str) -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("current_exe");
    // target/<profile>/deps/<test> -> target/<profile>/NAME
    let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-q", "-p", package, "--bin", name]);
    if dir.file_name().map(|n| n == "release").unwrap_or(false) {
        cmd.arg("--release");
    }
    let st = cmd
        .status()
        .unwrap_or_else(|e| panic!("run cargo build for {name}: {e}"));
    assert!(st.success(), "building {name} failed");
    dir.join(name)
}

/// A running workload that has printed "ready"; killed and reaped on drop.
#[derive(Debug)]
pub struct Workload {
    child: Child,
    /// The pid some modes print after "ready" (a zombie, a vfork child).
    pub extra_pid: Option<u32>,
}

impl Workload {
    /// Starts `ks-workload ARGS...` and waits until it is ready.
    pub fn start(args: &[&str]) -> Self {
        use std::io::BufRead;
        let mut child = Command::new(workload_bin())
            .args(args)
            .stdout(Stdio::piped())
            .stdin(Stdio::null())
            .spawn()
            .expect("start ks-workload");
        let out = child.stdout.take().expect("stdout");
        let mut line = String::new();
        std::io::BufReader::new(out)
            .read_line(&mut line)
            .expect("read ready line");
        let mut words = line.split_whitespace();
        assert_eq!(
            words.next(),
            Some("ready"),
            "ks-workload {args:?} did not get ready"
        );
        let extra_pid = words.next().and_then(|w| w.parse().ok());
        Workload { child, extra_pid }
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// How it ended, once it has (reaped), else None.
    pub fn try_wait(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        if let Some(p) = self.extra_pid {
            // SAFETY: kill with a valid signal; the pid may be gone already.
            unsafe { libc::kill(p as i32, libc::SIGKILL) };
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Steady TCP traffic over loopback between two `ks-workload` processes (a receiver
/// and a sender of an endless stream in 64 KiB writes); both killed and reaped on drop.
#[derive(Debug)]
pub struct Traffic {
    receiver: Child,
    sender: Child,
}

impl Traffic {
    /// Starts the receiver, then the sender once the receiver listens.
    pub fn start() -> Self {
        use std::io::BufRead;
        let mut receiver = Command::new(workload_bin())
            .args(["net-recv", "tcp", "18446744073709551615"])
            .stdout(Stdio::piped())
            .stdin(Stdio::null())
            .spawn()
            .expect("start ks-workload net-recv");
        let mut line = String::new();
        std::io::BufReader::new(receiver.stdout.take().expect("stdout"))
            .read_line(&mut line)
            .expect("read the port");
        let port = line
            .split_whitespace()
            .nth(1)
            .expect("ready PORT")
            .to_string();
        let sender = Command::new(workload_bin())
            .args(["net-send", "tcp", &port, "18446744073709551615", "65536"])
            .stdout(Stdio::null())
            .stdin(Stdio::null())
            .spawn()
            .expect("start ks-workload net-send");
        Traffic { receiver, sender }
    }

    /// The sending process.
    pub fn sender(&self) -> u32 {
        self.sender.id()
    }

    /// The receiving process.
    pub fn receiver(&self) -> u32 {
        self.receiver.id()
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        for c in [&mut self.sender, &mut self.receiver] {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// A workload that waits for a go-ahead on stdin (`ks-workload writes ...`).
#[derive(Debug)]
pub struct Gated {
    child: Child,
    stdin: std::process::ChildStdin,
    stdout: std::io::BufReader<std::process::ChildStdout>,
}

impl Gated {
    /// Starts `ks-workload ARGS...` and waits for "ready".
    pub fn start(args: &[&str]) -> Self {
        use std::io::BufRead;
        let mut child = Command::new(workload_bin())
            .args(args)
            .stdout(Stdio::piped())
            .stdin(Stdio::piped())
            .spawn()
            .expect("start ks-workload");
        let stdin = child.stdin.take().expect("stdin");
        let mut stdout = std::io::BufReader::new(child.stdout.take().expect("stdout"));
        let mut line = String::new();
        stdout.read_line(&mut line).expect("read ready");
        assert_eq!(line.trim(), "ready", "ks-workload {args:?}");
        Gated {
            child,
            stdin,
            stdout,
        }
    }

    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Lets it do its work and waits until it says "done".
    pub fn go(&mut self) {
        use std::io::{BufRead, Write};
        self.stdin.write_all(b"go\n").expect("send go");
        self.stdin.flush().ok();
        let mut line = String::new();
        self.stdout.read_line(&mut line).expect("read done");
        assert_eq!(line.trim(), "done");
    }
}

impl Drop for Gated {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Stops a load generator and its workers: SIGTERM (stress-ng then stops its workers;
/// SIGKILL would orphan them to spin on beside the next tests), then reaps it.
pub fn terminate(child: &mut std::process::Child) {
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let _ = child.wait();
}

/// The first child of `pid` (a stress-ng's worker), waiting up to 20 s for it to be
/// forked: a parent starts its workers when it is scheduled, late on a busy machine.
pub fn first_child_of(pid: u32) -> u32 {
    let t = std::time::Instant::now();
    loop {
        if let Some(&c) = children_of(pid).first() {
            return c;
        }
        assert!(
            t.elapsed() < std::time::Duration::from_secs(20),
            "{pid} forked no child"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// The processes whose parent is `pid`, by pid.
pub fn children_of(pid: u32) -> Vec<u32> {
    let mut kids: Vec<u32> = std::fs::read_dir("/proc")
        .expect("list /proc")
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&p| {
            std::fs::read_to_string(format!("/proc/{p}/stat"))
                .ok()
                .and_then(|s| {
                    let after = &s[s.rfind(')')? + 2..];
                    after.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(pid)
        })
        .collect();
    kids.sort_unstable();
    kids
}

/// Pins every thread of `pid` to one CPU (sched_setaffinity on each /proc/PID/task entry).
pub fn pin_to_cpu(pid: u32, cpu: usize) {
    for tid in std::fs::read_dir(format!("/proc/{pid}/task")).expect("list threads") {
        let tid: i32 = tid.unwrap().file_name().to_str().unwrap().parse().unwrap();
        // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET and
        // sched_setaffinity only read and write it.
        let rc = unsafe {
            let mut set: libc::cpu_set_t = std::mem::zeroed();
            libc::CPU_SET(cpu, &mut set);
            libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set)
        };
        assert_eq!(rc, 0, "pin thread {tid} to CPU {cpu}");
    }
}

/// The sum over a process's threads of /proc/PID/task/TID/schedstat:
/// (run time ns, run-queue wait ns, times run).
pub fn process_schedstat(pid: u32) -> (u64, u64, u64) {
    let mut sum = (0, 0, 0);
    for tid in std::fs::read_dir(format!("/proc/{pid}/task")).expect("list threads") {
        let path = tid.unwrap().path().join("schedstat");
        let s = std::fs::read_to_string(&path).expect("read schedstat");
        let v: Vec<u64> = s.split_whitespace().map(|x| x.parse().unwrap()).collect();
        sum.0 += v[0];
        sum.1 += v[1];
        sum.2 += v[2];
    }
    sum
}

/// /proc/PID/stat utime + stime in nanoseconds (all threads, live and exited).
pub fn proc_cpu_ns(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("read stat");
    let after = &s[s.rfind(')').expect("comm end") + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    // f[0] is field 3 (state): utime is field 14, stime 15.
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    ticks * 1_000_000_000 / hz
}

/// /proc/PID/statm resident pages, in bytes.
pub fn proc_rss_bytes(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/statm")).expect("read statm");
    let pages: u64 = s.split_whitespace().nth(1).unwrap().parse().unwrap();
    // SAFETY: sysconf has no preconditions.
    pages * unsafe { libc::sysconf(libc::_SC_PAGESIZE) } as u64
}

/// /proc/PID/io (read_bytes, write_bytes).
pub fn proc_io(pid: u32) -> (u64, u64) {
    let s = std::fs::read_to_string(format!("/proc/{pid}/io")).expect("read io");
    let get = |k: &str| {
        s.lines()
            .find_map(|l| l.strip_prefix(k).and_then(|v| v.trim().parse::<u64>().ok()))
            .unwrap_or(0)
    };
    (get("read_bytes:"), get("write_bytes:"))
}

/// /proc/PID/io's syscw: write-family system calls the process made.
pub fn proc_syscw(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/io")).expect("read io");
    s.lines()
        .find_map(|l| l.strip_prefix("syscw:").and_then(|v| v.trim().parse().ok()))
        .expect("syscw in /proc/PID/io")
}

/// /proc/stat's machine-wide busy time (user+nice+system+irq+softirq+steal), ns.
pub fn proc_stat_busy_ns() -> u64 {
    proc_stat_ns(&[0, 1, 2, 5, 6, 7])
}

/// /proc/stat's time spent running tasks (user, nice, system), nanoseconds, all CPUs:
/// without irq, softirq and steal, which no task owns (a kernel with
/// IRQ_TIME_ACCOUNTING and paravirtual steal accounting leaves them out of every task's
/// run time, so a sum of tasks' times can be short of `proc_stat_busy_ns` by them).
pub fn proc_stat_task_ns() -> u64 {
    proc_stat_ns(&[0, 1, 2])
}

fn proc_stat_ns(columns: &[usize]) -> u64 {
    let s = std::fs::read_to_string("/proc/stat").expect("read /proc/stat");
    let line = s.lines().next().expect("cpu line");
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap())
        .collect();
    let ticks: u64 = columns.iter().map(|&i| v[i]).sum();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    ticks * 1_000_000_000 / hz
}

/// Online CPUs.
pub fn ncpus() -> u64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) as u64 }
}

/// A child process whose stdout is read line by line, killed after `deadline` if it is
/// still running (so a hung command fails its test instead of hanging it).
#[derive(Debug)]
pub struct Lines {
    child: Child,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Lines {
    /// Starts `program args...` with stdout piped.
    pub fn spawn(program: &std::path::Path, args: &[&str], deadline: Duration) -> Self {
        use std::io::BufRead;
        let mut child = Command::new(program)
            .args(args)
            .stdout(Stdio::piped())
            .stdin(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", program.display()));
        let out = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(out).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let pid = child.id();
        std::thread::spawn(move || {
            std::thread::sleep(deadline);
            // SAFETY: kill with a valid signal; the pid may already be gone (ESRCH).
            unsafe { libc::kill(pid as i32, libc::SIGKILL) };
        });
        Lines { child, lines: rx }
    }

    /// The next line, or None when the output ended (or 20 s passed).
    pub fn next_line(&mut self) -> Option<String> {
        self.lines.recv_timeout(Duration::from_secs(20)).ok()
    }

    /// The child's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends a signal.
    pub fn signal(&self, sig: i32) {
        // SAFETY: kill with a valid signal number.
        unsafe { libc::kill(self.child.id() as i32, sig) };
    }

    /// Closes our end of its stdout and waits for it to exit; returns its exit code.
    pub fn close_and_wait(mut self) -> Option<i32> {
        drop(std::mem::replace(
            &mut self.lines,
            std::sync::mpsc::channel().1,
        ));
        self.child.wait().ok().and_then(|s| s.code())
    }

    /// Waits for it to exit; returns its exit code.
    pub fn wait(mut self) -> Option<i32> {
        self.child.wait().ok().and_then(|s| s.code())
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// /proc/PID/schedstat's first field: the task's CPU time in ns (exact).
pub fn proc_schedstat_ns(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/schedstat"))
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(0)
}

/// The /proc state letter of a process.
pub fn proc_state(pid: u32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    s[s.rfind(')')? + 2..].chars().next()
}

/// Directories a test made in a cgroup hierarchy, removed deepest first on drop (after
/// the test's processes have left them; a group is removable a moment after its last
/// task exits, so each removal is retried for up to 2 s).
pub struct MadeDirs(pub Vec<std::path::PathBuf>);

impl Drop for MadeDirs {
    fn drop(&mut self) {
        for d in self.0.iter().rev() {
            for _ in 0..100 {
                if std::fs::remove_dir(d).is_ok() || !d.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

/// A cgroup v2 group's CPU time, µs (its cpu.stat usage_usec): the independent answer
/// the cgroup tests compare against.
pub fn cgroup_usage_us(group: &std::path::Path) -> u64 {
    let s = std::fs::read_to_string(group.join("cpu.stat")).expect("cpu.stat");
    s.lines()
        .find_map(|l| l.strip_prefix("usage_usec "))
        .and_then(|v| v.trim().parse().ok())
        .expect("usage_usec in cpu.stat")
}

/// Now, in seconds since the Unix epoch (for `--at @SECONDS` and recorded times).
pub fn unix_now_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}
