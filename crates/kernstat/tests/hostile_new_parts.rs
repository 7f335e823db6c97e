//! The reproductions of shared/security/findings-2026-11-26.md (the second round: control
//! groups, the recorder, per-process network, exports), each turned into a test: a
//! hostile local user, a delegated container root or a handed-over archive against the
//! system daemon and the readers. Each failed on the main of that day (44f511c).
//!
//! Root forks the users with setpriv (common/users.rs); every test makes its own
//! directories and control groups and removes them. Needs root (CI=true: must run).

mod common;
use common::command;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kernstat_testkit::hostile_bin;
use serde_json::Value;

#[path = "common/users.rs"]
mod users;
use users::*;

/// The controller-less cgroup v2 hierarchy of this hybrid machine, or a pure v2 one.
fn v2_root() -> Option<PathBuf> {
    ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
        .into_iter()
        .map(PathBuf::from)
        .find(|r| r.join("cgroup.procs").exists() && r.join("cgroup.subtree_control").exists())
}

/// A group of the test's own, delegated to `uid` as LXC delegates a container's root
/// (the directory and its procs, threads and subtree_control files), removed with
/// everything below it when dropped.
struct Delegated(PathBuf);

impl Delegated {
    fn make(tag: &str, uid: u32) -> Delegated {
        let root = v2_root().expect("a cgroup v2 hierarchy");
        let p = root.join(format!("ks-{tag}-{}", std::process::id()));
        std::fs::create_dir(&p).unwrap();
        for f in [
            "",
            "cgroup.procs",
            "cgroup.threads",
            "cgroup.subtree_control",
        ] {
            let c = std::ffi::CString::new(p.join(f).to_str().unwrap()).unwrap();
            // SAFETY: a NUL-terminated path.
            assert_eq!(unsafe { libc::chown(c.as_ptr(), uid, uid) }, 0);
        }
        Delegated(p)
    }
}

impl Drop for Delegated {
    fn drop(&mut self) {
        // Children first (rmdir of a group with children fails).
        let mut dirs: Vec<PathBuf> = Vec::new();
        let mut stack = vec![self.0.clone()];
        while let Some(d) = stack.pop() {
            if let Ok(rd) = std::fs::read_dir(&d) {
                for e in rd.flatten() {
                    if e.file_type().is_ok_and(|t| t.is_dir()) {
                        stack.push(e.path());
                    }
                }
            }
            dirs.push(d);
        }
        for d in dirs.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
    }
}

fn open_fds(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// N1: a user with a delegated subtree made 3,400 groups and the system daemon ran out
/// of descriptors and exited, for everyone. Now a reading takes at most --cgroup-max
/// groups (shallow first), keeps at most half its descriptor limit open, and a failed
/// sample is retried: with the daemon held to 2,000 descriptors, 5,000 groups made and
/// removed leave it running, another user is answered within a second throughout, and
/// the delegated group says how many below it were not read.
#[test]
fn thousands_of_groups_neither_stop_nor_slow_the_system_daemon() {
    if !gate() {
        return;
    }
    if !kernstat_testkit::gate("a cgroup v2 hierarchy", v2_root().is_some(), || {
        "none mounted".into()
    }) {
        return;
    }
    let deleg = Delegated::make("groups", ATTACKER);
    let mut d = SysDaemon::start_with(&[], |c| {
        use std::os::unix::process::CommandExt;
        // SAFETY: setrlimit between fork and exec, with a valid struct.
        unsafe {
            c.pre_exec(|| {
                let r = libc::rlimit {
                    rlim_cur: 2000,
                    rlim_max: 2000,
                };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &r) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
    });
    let mut attacker = Guard(
        as_uid(ATTACKER, &hostile_bin())
            .arg("groups")
            .arg(&deleg.0)
            .args(["5000", "6"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let t = Instant::now();
    let mut worst = Duration::ZERO;
    let mut asked = 0;
    let mut most_fds = 0;
    while attacker.try_wait().unwrap().is_none() {
        assert!(
            t.elapsed() < Duration::from_secs(120),
            "the attacker is stuck"
        );
        let t0 = Instant::now();
        let r = ask(VICTIM, &d.sock, &[get("load.one", None)], 1_000);
        worst = worst.max(t0.elapsed());
        assert!(
            r.first().is_some_and(|l| l.contains("\"ok\":true")),
            "another user's answer: {r:?}"
        );
        assert!(d.alive(), "the daemon exited");
        most_fds = most_fds.max(open_fds(d.pid()));
        asked += 1;
        std::thread::sleep(Duration::from_millis(100));
    }
    let out = std::io::read_to_string(attacker.0.stdout.take().unwrap()).unwrap();
    assert!(
        out.contains("made 5000") && out.contains("removed"),
        "{out}"
    );
    assert!(asked >= 10, "{asked} questions while the groups existed");
    assert!(d.alive(), "the daemon exited");
    assert!(most_fds < 2000, "{most_fds} descriptors");
    eprintln!("{asked} answers, the slowest {worst:?}; at most {most_fds} descriptors");
    // The groups' keys are bounded, and the delegated group says what it left out.
    let name = deleg.0.file_name().unwrap().to_str().unwrap().to_string();
    let mut again = Guard(
        as_uid(ATTACKER, &hostile_bin())
            .arg("groups")
            .arg(&deleg.0)
            .args(["3000", "60"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Once all are made (held a minute; removed when the guard kills the maker: the
    // directory's drop removes what is left).
    let made = std::io::BufRead::lines(std::io::BufReader::new(again.0.stdout.take().unwrap()))
        .next()
        .unwrap()
        .unwrap();
    assert_eq!(made, "made 3000");
    let mut seen = None;
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(30) && seen.is_none() {
        let r = ask(0, &d.sock, &[get("cgroups", None)], 5_000);
        let v: Value = serde_json::from_str(&r[0]).unwrap();
        let groups = v["data"].as_array().cloned().unwrap_or_default();
        assert!(groups.len() <= 500, "{} groups read", groups.len());
        seen = groups
            .iter()
            .find(|g| g["path"] == format!("/{name}") && g["truncated"].as_u64() > Some(2000))
            .cloned();
        std::thread::sleep(Duration::from_millis(300));
    }
    drop(again);
    assert!(
        seen.is_some(),
        "the delegated group says its groups were not read"
    );
    assert!(d.alive());
}

/// N9: a group whose name is not UTF-8 was invisible (its lossy name opened nothing),
/// and two such names read as one. Each is read under its own name, escaped
/// reversibly, in `kernstat cgroups` and the daemon's keys.
#[test]
fn groups_whose_names_are_not_utf8_are_shown_and_distinct() {
    use std::os::unix::ffi::OsStrExt;
    if !gate() || v2_root().is_none() {
        return;
    }
    let deleg = Delegated::make("names", 0);
    let bad = |b: &[u8]| deleg.0.join(std::ffi::OsStr::from_bytes(b));
    std::fs::create_dir(bad(b"bad\xffutf8")).unwrap();
    std::fs::create_dir(bad(b"bad\xfeutf8")).unwrap();
    std::fs::create_dir(bad(b"esc\x1b]0;X\x07")).unwrap();
    let name = deleg.0.file_name().unwrap().to_str().unwrap().to_string();
    let o = command()
        .args([
            "cgroups",
            "--json",
            "--no-net",
            "--interval",
            "0.2",
            "--root",
        ])
        .arg(format!("/{name}"))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = String::from_utf8(o.stdout).unwrap();
    let paths: Vec<String> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["path"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    for want in [
        format!("/{name}/bad\\xffutf8"),
        format!("/{name}/bad\\xfeutf8"),
        format!("/{name}/esc\\x1b]0;X\\x07"),
    ] {
        assert!(paths.contains(&want), "{want} in {paths:?}");
    }
    assert!(!text.bytes().any(|b| b < 0x20 && b != b'\n'), "{text:?}");
    let table = command()
        .args(["cgroups", "--no-net", "--interval", "0.2", "--root"])
        .arg(format!("/{name}"))
        .output()
        .unwrap();
    let table = String::from_utf8(table.stdout).unwrap();
    assert!(
        table.contains("bad\\xffutf8") && table.contains("bad\\xfeutf8"),
        "{table}"
    );
    assert!(!table.bytes().any(|b| b < 0x20 && b != b'\n'), "{table:?}");
}

fn scrape(url: &str) -> String {
    ureq::get(url)
        .call()
        .unwrap()
        .body_mut()
        .read_to_string()
        .unwrap()
}

/// N3: with /proc mounted hidepid, any user's curl of /metrics listed every user's
/// processes (pid, name, CPU, memory, I/O). Now a daemon that keeps per-process keys to
/// root serves no per-process series at all.
#[test]
fn hidden_processes_stay_out_of_metrics() {
    if !gate() || !kernstat_testkit::tool_gate("unshare") {
        return;
    }
    let t = open_dir();
    let sock = t.path().join("sys/sock");
    let log = t.path().join("stderr");
    let mut child = Guard(
        Command::new("unshare")
            .args(["-m", "--propagation", "private", "sh", "-c"])
            .arg(format!(
                "mount -t proc -o hidepid=2 proc /proc && exec {} daemon --system --user nobody --interval 0.5 --socket {} --metrics 127.0.0.1:0 2>{}",
                common::kernstat().display(),
                sock.display(),
                log.display()
            ))
            .env("XDG_RUNTIME_DIR", common::private_runtime_dir())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let t0 = Instant::now();
    while !common::daemon_answers(&sock, "cpu.percent") {
        assert!(t0.elapsed() < Duration::from_secs(20), "no daemon");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(1200));
    let err = std::fs::read_to_string(&log).unwrap();
    let at = err.find("http://").unwrap_or_else(|| panic!("{err}"));
    let url = &err[at..err[at..].find("/metrics").unwrap() + at + 8];
    let text = scrape(url);
    assert!(
        text.contains("kernstat_load1"),
        "the machine's series are there"
    );
    let leaked: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("kernstat_process_"))
        .collect();
    assert!(leaked.is_empty(), "{leaked:?}");
    let _ = child.kill();
    let _ = child.wait();
}

/// Waits (up to 30 s) until root's snapshot from the daemon at `sock` shows process
/// `pid` with `field` at `want` (the daemon samples on its own clock).
fn until_counted(sock: &std::path::Path, pid: u32, field: &str, want: u64) {
    let t = Instant::now();
    loop {
        let r = ask(0, sock, &[get("snapshot", None)], 10_000);
        let v: Value = serde_json::from_str(&r[0]).unwrap_or_default();
        let now = v["data"]["procs"]
            .as_array()
            .and_then(|ps| ps.iter().find(|p| p["pid"] == pid))
            .and_then(|p| p[field].as_u64());
        if now == Some(want) {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "pid {pid}: {field} {now:?}, not {want}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `bytes` sent by one process of `uid` to another over a `kind` socket on loopback, in
/// sends of 1,000 bytes, both staying alive once all came: (receiver, sender).
fn transfer(uid: u32, kind: &str, bytes: u64) -> (Guard, Guard) {
    let mut recv = Guard(
        as_uid(uid, &kernstat_testkit::workload_bin())
            .args(["net-recv", kind, &bytes.to_string(), "stay"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(recv.0.stdout.take().unwrap()));
    let port = lines.next().unwrap().unwrap();
    let port = port.strip_prefix("ready ").unwrap().to_string();
    let send = Guard(
        as_uid(uid, &kernstat_testkit::workload_bin())
            .args(["net-send", kind, &port, &bytes.to_string(), "1000", "stay"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let got = lines.next().unwrap().unwrap();
    assert!(got.starts_with(&format!("got {bytes}")), "{got}");
    (recv, send)
}

/// N4: every user read every process's exact socket and storage byte counters from the
/// system daemon (the socket, the world-readable snapshot, /metrics), which
/// /proc/PID/io denies them since CVE-2011-2495. Now a user gets their own processes'
/// counters, root everyone's, and the published values nobody's.
#[test]
fn byte_counters_go_to_their_owner_and_root_only() {
    if !gate() || !kernstat_testkit::bpf_gate() {
        return;
    }
    let d = SysDaemon::start_opts(true, &["--metrics", "127.0.0.1:0"], |_| {});
    // The victim's two processes: 300,000 bytes over TCP, both staying alive.
    let (recv, send) = transfer(VICTIM, "tcp", 300_000);
    until_counted(&d.sock, send.0.id(), "net_tx_bytes", 300_000);
    let (rpid, spid) = (recv.0.id(), send.0.id());
    let find = |v: &Value, pid: u32| -> Value {
        v["procs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["pid"] == pid)
            .cloned()
            .unwrap_or_else(|| panic!("{pid} not listed"))
    };
    let snapshot_as = |uid: u32| -> Value {
        let r = ask(
            uid,
            &d.sock,
            &[get("snapshot", None), get("top.net", None)],
            5_000,
        );
        let s: Value = serde_json::from_str(&r[0]).unwrap();
        let n: Value = serde_json::from_str(&r[1]).unwrap();
        serde_json::json!({"snap": s["data"], "top": n["data"]})
    };
    // The victim: its own processes' bytes, exactly.
    let v = snapshot_as(VICTIM);
    assert_eq!(
        find(&v["snap"], spid)["net_tx_bytes"],
        300_000,
        "{}",
        find(&v["snap"], spid)
    );
    assert_eq!(find(&v["snap"], rpid)["net_rx_bytes"], 300_000);
    // Root: everyone's.
    let r = snapshot_as(0);
    assert_eq!(find(&r["snap"], spid)["net_tx_bytes"], 300_000);
    // Another user: the processes (as /proc lists them), none of their bytes.
    let a = snapshot_as(ATTACKER);
    for pid in [spid, rpid] {
        let p = find(&a["snap"], pid);
        assert!(
            p.get("net_tx_bytes").is_none() && p.get("net_rx_bytes").is_none(),
            "{p}"
        );
        assert_eq!(p["read_bytes"], 0);
        assert_eq!(p["write_bytes"], 0);
        assert_eq!(p["counters_hidden"], true);
    }
    let listed = |top: &Value, pid: u32| {
        top.as_array()
            .is_some_and(|t| t.iter().any(|e| e["pid"] == pid))
    };
    assert!(
        !listed(&a["top"], spid) && !listed(&a["top"], rpid),
        "{}",
        a["top"]
    );
    // The world-readable snapshot: nobody's.
    let shm = std::fs::read(d.sock.with_file_name("snapshot")).unwrap();
    let shm = String::from_utf8_lossy(&shm);
    assert!(
        !shm.contains("\"net_tx_bytes\":300000"),
        "the published snapshot"
    );
    // /metrics, which every local user can scrape: no process's bytes.
    let text = scrape(&d.metrics_url());
    for family in [
        "kernstat_process_read_bytes",
        "kernstat_process_written_bytes",
        "kernstat_process_network_receive_bytes",
        "kernstat_process_network_transmit_bytes",
    ] {
        assert!(
            !text.lines().any(|l| l.starts_with(&format!("{family}{{"))),
            "{family} served"
        );
    }
    assert!(
        text.contains("kernstat_socket_transmit_bytes"),
        "machine totals stay"
    );
    drop(send);
}

/// N8: one user's 8,300 processes, each sending one datagram, filled the 8,192-entry
/// network table, and everyone's traffic after that was missing from the per-process
/// figures and from the machine's total. Now a live process's counters are its own
/// (task-local storage: no table to fill), and of the table of processes that exited a
/// user holds at most a quarter (the rest of its exits are counted together, per user).
/// Here the attacker's 8,300 processes send and exit at once (and stay zombies, so that
/// their entries stay), then another user's transfer is counted per process, exactly,
/// and the machine's total holds every byte.
#[test]
fn one_user_cannot_fill_the_network_table() {
    if !gate() || !kernstat_testkit::bpf_gate() {
        return;
    }
    const FILL: u64 = 8_300;
    const SIZE: u64 = 1_000;
    const SHARE: u64 = 2_048;
    let d = SysDaemon::start_opts(true, &["--metrics", "127.0.0.1:0"], |_| {});
    let metric = |name: &str| -> f64 {
        let text = scrape(&d.metrics_url());
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .map_or(0.0, |v| v.trim().parse().unwrap())
    };
    let udp = "kernstat_socket_transmit_bytes_total{kind=\"udp\"} ";
    let exited = "kernstat_bpf_map_entries{collector=\"net\",map=\"exited\"} ";
    let before = metric(udp);
    let mut fill = Guard(
        as_uid(ATTACKER, &kernstat_testkit::workload_bin())
            .args(["net-fill", &FILL.to_string(), &SIZE.to_string(), "exit"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut out = std::io::BufRead::lines(std::io::BufReader::new(fill.0.stdout.take().unwrap()));
    assert_eq!(out.next().unwrap().unwrap(), format!("sent {FILL}"));
    // A sample has listed them alive (so their bytes are in the total already) before
    // they exit: those beyond the share must then add nothing more to it.
    let deadline = Instant::now() + Duration::from_secs(60);
    while metric(udp) - before < (FILL * SIZE) as f64 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    std::io::Write::write_all(fill.0.stdin.as_mut().unwrap(), b"go\n").unwrap();
    assert_eq!(out.next().unwrap().unwrap(), format!("ready {FILL}"));
    // The victim, after the attacker's exits: 100 datagrams of 1,000 bytes.
    let (_recv, send) = transfer(VICTIM, "udp", 100_000);
    until_counted(&d.sock, send.0.id(), "net_tx_bytes", 100_000);
    let r = ask(0, &d.sock, &[get("snapshot", None)], 10_000);
    let snap: Value = serde_json::from_str(&r[0]).unwrap();
    let procs = snap["data"]["procs"].as_array().unwrap();
    let sender = procs
        .iter()
        .find(|p| p["pid"] == send.0.id())
        .unwrap_or_else(|| panic!("the victim's sender is not listed"));
    assert_eq!(sender["net_tx_bytes"], 100_000, "{sender}");
    // Of the table of exited processes the attacker holds its share, no more: its
    // processes stay zombies, so the daemon keeps their entries. (The rest went to its
    // per-user counters; a sample had listed all their bytes, so they add none.)
    let deadline = Instant::now() + Duration::from_secs(60);
    while metric(exited) < SHARE as f64 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(200));
    }
    let held = metric(exited);
    assert!(
        (SHARE as f64..=(SHARE + 200) as f64).contains(&held),
        "{held} entries of exited processes"
    );
    // Every byte is in the machine's total, those counted per user too, and once: the
    // exits past the share add only what no sample had listed (here nothing), where
    // adding their whole history again made 14.6 MB of these 8.4. (1 MB for other
    // tests' datagrams at the same time.)
    let sent = metric(udp) - before;
    let want = ((FILL + 100) * SIZE) as f64;
    assert!(
        sent >= want && sent <= want + 1e6,
        "udp bytes sent: {sent}, {want} were"
    );
    drop(send);
}

/// Whether `out` holds a byte that can drive a terminal: C0 controls other than newline
/// and tab, DEL, or a C1 control as UTF-8.
fn control_bytes(out: &[u8]) -> Vec<String> {
    let mut found = Vec::new();
    for (i, w) in out.windows(2).enumerate() {
        let b = w[0];
        if (b < 0x20 && b != b'\n' && b != b'\t')
            || b == 0x7f
            || (b == 0xc2 && (0x80..=0x9f).contains(&w[1]))
        {
            let from = i.saturating_sub(30);
            found.push(String::from_utf8_lossy(&out[from..(i + 30).min(out.len())]).into_owned());
        }
    }
    if out
        .last()
        .is_some_and(|&b| (b < 0x20 && b != b'\n' && b != b'\t') || b == 0x7f)
    {
        found.push("at the end".into());
    }
    found
}

/// N7: a process named `ESC]0;OWN BEL ESC[2J` with prctl reached the terminal raw from
/// `dump --format csv|openmetrics` and /metrics, a forged archive's command line from
/// `ps --at`, and a command line starting with `=` became a spreadsheet formula. Now no
/// output of any format carries a control character, and such a cell is text.
#[test]
fn no_output_format_carries_control_characters() {
    use std::os::unix::process::CommandExt;
    if !gate() {
        return;
    }
    let evil = "\u{1b}]0;OWN\u{7}\u{1b}[2J";
    let mut w = Command::new(kernstat_testkit::workload_bin());
    w.arg0("=HYPERLINK(\"http://x\")\u{1b}[31m")
        .args(["named", evil])
        .stdout(Stdio::piped());
    let mut w = Guard(w.spawn().unwrap());
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(w.0.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "ready");
    let pid = w.0.id().to_string();
    let t = tempfile::tempdir().unwrap();
    let archive = t.path().join("rec");
    let sock = t.path().join("run/sock");
    let log = std::fs::File::create(t.path().join("stderr")).unwrap();
    let mut d = Guard(
        command()
            .args([
                "daemon",
                "--interval",
                "0.3",
                "--record-interval",
                "0.3",
                "--metrics",
                "127.0.0.1:0",
                "--socket",
            ])
            .arg(&sock)
            .arg("--record")
            .arg(&archive)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    let t0 = Instant::now();
    while !common::daemon_answers(&sock, "cpu.percent")
        || std::fs::read_dir(&archive).map_or(0, |d| d.count()) == 0
    {
        assert!(t0.elapsed() < Duration::from_secs(20), "no daemon");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(1500));
    let err = std::fs::read_to_string(t.path().join("stderr")).unwrap();
    let at = err.find("http://").unwrap_or_else(|| panic!("{err}"));
    let url = &err[at..err[at..].find("/metrics").unwrap() + at + 8];
    let run = |args: &[&str]| -> Vec<u8> {
        let o = command().args(args).output().unwrap();
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        o.stdout
    };
    let sock_s = sock.to_str().unwrap();
    let arch_s = archive.to_str().unwrap();
    let outputs: Vec<(String, Vec<u8>)> = vec![
        (
            "ps".into(),
            run(&["ps", "--pid", &pid, "--fields", "pid,comm,cmd"]),
        ),
        ("ps --json".into(), run(&["ps", "--pid", &pid, "--json"])),
        ("snapshot".into(), run(&["snapshot", "--interval", "0.2"])),
        (
            "get".into(),
            run(&["get", "--socket", sock_s, "top.mem", "top.cpu"]),
        ),
        (
            "get --format tsv".into(),
            run(&["get", "--socket", sock_s, "--format", "tsv", "top.mem"]),
        ),
        ("/metrics".into(), scrape(url).into_bytes()),
        (
            "ps --at".into(),
            run(&[
                "ps",
                "--at",
                "now",
                "--archive",
                arch_s,
                "--fields",
                "pid,comm,cmd",
            ]),
        ),
        (
            "dump csv".into(),
            run(&["dump", "--archive", arch_s, "--format", "csv"]),
        ),
        (
            "dump openmetrics".into(),
            run(&["dump", "--archive", arch_s, "--format", "openmetrics"]),
        ),
    ];
    let _ = d.0.kill();
    for (what, out) in &outputs {
        let found = control_bytes(out);
        assert!(found.is_empty(), "{what}: {found:?}");
    }
    let csv = &outputs.iter().find(|(w, _)| w == "dump csv").unwrap().1;
    let csv = String::from_utf8_lossy(csv);
    let row = csv
        .lines()
        .find(|l| l.contains(&format!(",{pid},")))
        .unwrap_or_else(|| panic!("{pid} in the CSV"));
    assert!(row.contains("'=HYPERLINK"), "a formula is text: {row}");
    assert!(
        row.contains("]0;OWN"),
        "the name is there, made harmless: {row}"
    );
}
