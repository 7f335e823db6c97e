//! OOM kills against the kernel's own answer: a process of the test's own that
//! allocates past the limit of a memory group the test made (cgroup v1 here; pure v2 in
//! the 6.1 guest, old_kernel.rs) is one kill, with that pid, that group, and that group
//! as the limit that fired: in `kernstat events --json` (the hook loaded there), in the
//! daemon's `oom.last` and `events.recent`, in the recorder's frame and in the kernel's
//! own count (/proc/vmstat oom_kill). Needs root (BPF, a memory group).

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{command, json, run};
use kernstat_testkit::{bpf_gate, workload_bin};

/// A memory group of the test's own with a 64 MiB limit, removed when dropped.
struct MemoryGroup {
    dir: PathBuf,
    name: String,
}

impl MemoryGroup {
    fn make(tag: &str) -> Option<MemoryGroup> {
        let name = format!("ks-{tag}-{}", std::process::id());
        // cgroup v1's memory controller (this machine), else a pure v2 hierarchy.
        let (root, limit_file) =
            if std::path::Path::new("/sys/fs/cgroup/memory/cgroup.procs").exists() {
                ("/sys/fs/cgroup/memory", "memory.limit_in_bytes")
            } else if std::fs::read_to_string("/sys/fs/cgroup/cgroup.controllers")
                .is_ok_and(|c| c.split_whitespace().any(|c| c == "memory"))
            {
                ("/sys/fs/cgroup", "memory.max")
            } else {
                return None;
            };
        let dir = PathBuf::from(root).join(&name);
        std::fs::create_dir(&dir).ok()?;
        std::fs::write(dir.join(limit_file), (64u64 << 20).to_string()).unwrap();
        let _ = std::fs::write(dir.join("memory.swappiness"), "0");
        let _ = std::fs::write(dir.join("memory.swap.max"), "0");
        Some(MemoryGroup { dir, name })
    }

    /// Runs a process that allocates 256 MiB in the group; its pid (it is killed).
    fn overrun(&self) -> u32 {
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "echo $$ > {}/cgroup.procs && exec {} alloc 256",
                self.dir.display(),
                workload_bin().display()
            ))
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let pid = child.id();
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            status.signal(),
            Some(libc::SIGKILL),
            "killed by the OOM killer"
        );
        pid
    }
}

impl Drop for MemoryGroup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir(&self.dir);
    }
}

fn vmstat_oom_kills() -> u64 {
    std::fs::read_to_string("/proc/vmstat")
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix("oom_kill ")
                .map(|n| n.trim().parse().unwrap())
        })
        .unwrap_or(0)
}

fn wait_for(what: &str, secs: u64, mut ok: impl FnMut() -> bool) {
    let t = Instant::now();
    while !ok() {
        assert!(
            t.elapsed() < Duration::from_secs(secs),
            "waited {secs} s for {what}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn an_allocation_past_a_group_limit_is_one_kill_with_its_victim_and_group() {
    if !bpf_gate() {
        return;
    }
    let Some(group) = MemoryGroup::make("oom") else {
        eprintln!("skipped: no memory controller");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    let mut daemon = command()
        .args(["daemon", "--socket"])
        .arg(dir.path().join("sock"))
        .args(["--interval", "0.5", "--record"])
        .arg(&archive)
        .args(["--record-interval", "0.5"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let sock = dir.path().join("sock");
    // Answering: its OOM hook is attached (it is loaded before the daemon serves).
    wait_for("the daemon", 30, || {
        common::daemon_answers(&sock, "cpu.percent")
    });
    let (mut watcher, _) =
        common::traced(&["events", "--json", "--socket", sock.to_str().unwrap()]);
    // Its lines, as they come.
    let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
    let watcher_out = watcher.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        for l in std::io::BufRead::lines(std::io::BufReader::new(watcher_out)).map_while(Result::ok)
        {
            let _ = lines_tx.send(l);
        }
    });
    let kills_before = vmstat_oom_kills();
    let victim = group.overrun();
    assert_eq!(
        vmstat_oom_kills() - kills_before,
        1,
        "the kernel counts one kill"
    );
    let want_group = format!("/{}", group.name);

    // The daemon: oom.last and events.recent.
    let sock_s = sock.to_str().unwrap();
    let mut recent = serde_json::Value::Null;
    wait_for("the kill in the daemon's events", 10, || {
        let (_, out, _) = run(&["get", "--json", "--socket", sock_s, "events.recent"]);
        let reply: serde_json::Value = serde_json::from_str(out.trim()).unwrap_or_default();
        recent = reply["data"].clone();
        recent
            .as_array()
            .is_some_and(|a| a.iter().any(|e| e["pid"] == victim))
    });
    let kill = recent
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["pid"] == victim)
        .unwrap()
        .clone();
    assert_eq!(kill["kind"], "oom_kill");
    assert_eq!(kill["group"], want_group.as_str(), "{kill}");
    assert_eq!(kill["limit"], want_group.as_str(), "{kill}");
    assert_eq!(kill["comm"], "ks-workload");
    let rss = kill["rss_bytes"].as_u64().unwrap();
    assert!(
        rss > 32 << 20 && rss <= 80 << 20,
        "RSS at the kill {rss}: near the 64 MiB limit"
    );
    let (_, last, _) = run(&["get", "--socket", sock_s, "oom.last"]);
    assert!(last.contains(&format!("pid {victim} ")), "{last}");

    // `kernstat events`: the same kill, once (its lines until the kill's, then the rest).
    let mut text = String::new();
    loop {
        let line = lines
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("kernstat events printed no kill of {victim}: {text}"));
        text.push_str(&line);
        text.push('\n');
        if json(&line)["pid"] == victim {
            break;
        }
    }
    // SAFETY: kill with a valid signal.
    unsafe { libc::kill(watcher.id() as i32, libc::SIGTERM) };
    let _ = watcher.wait();
    let _ = reader.join();
    for line in lines.try_iter() {
        text.push_str(&line);
        text.push('\n');
    }
    let seen: Vec<serde_json::Value> = text
        .lines()
        .map(json)
        .filter(|e| e["pid"] == victim)
        .collect();
    assert_eq!(seen.len(), 1, "{text}");
    assert_eq!(seen[0]["group"], want_group.as_str());

    // The recorder: the kill in a frame.
    wait_for("the kill recorded", 10, || {
        let (_, out, _) = run(&["dump", "--archive", archive.to_str().unwrap()]);
        out.lines().map(json).any(|f| {
            f["events"]
                .to_string()
                .contains(&format!("\"pid\":{victim}"))
        })
    });
    let _ = daemon.kill();
    let _ = daemon.wait();
}
