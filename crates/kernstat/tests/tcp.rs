//! `kernstat tcp` against the kernel's own counters, in two private network namespaces
//! joined by a veth pair (the sender's namespace sees only the test's traffic):
//!
//! - 1 % of the sender's packets lost on the way (nftables `numgen random` at the
//!   receiver's input): the retransmits
//!   kernstat counts on the sending process's sockets equal the sender namespace's
//!   `RetransSegs` delta (/proc/net/snmp), and are attributed to it;
//! - the first SYN of a connect dropped (a rule removed after half a second): the
//!   connect completes at the kernel's 1 s SYN retransmit, and kernstat measures it in
//!   the 1 s bucket, on the connecting process.
//!
//! This kernel has no netem; nftables drops instead. Needs root (BPF, namespaces).

mod common;

use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kernstat_testkit::{bpf_gate, tool_gate};
use serde_json::Value;

/// Two namespaces (sender, receiver) joined by veth, removed when dropped.
struct Netns {
    send: String,
    recv: String,
    /// The receiver's address (each test its own subnet).
    peer: String,
}

fn sh(script: &str) {
    let out = Command::new("sh").arg("-c").arg(script).output().unwrap();
    assert!(
        out.status.success(),
        "{script}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

impl Netns {
    fn make(tag: &str, subnet: u8) -> Netns {
        let id = std::process::id() % 10_000;
        let (send, recv) = (format!("kss{tag}{id}"), format!("ksr{tag}{id}"));
        sh(&format!(
            "ip netns add {send} && ip netns add {recv} && \
             ip link add kv{tag}{id}a netns {send} type veth peer name kv{tag}{id}b netns {recv} && \
             ip -n {send} addr add 10.78.{subnet}.1/24 dev kv{tag}{id}a && ip -n {send} link set kv{tag}{id}a up && \
             ip -n {recv} addr add 10.78.{subnet}.2/24 dev kv{tag}{id}b && ip -n {recv} link set kv{tag}{id}b up && \
             ip -n {send} link set lo up && ip -n {recv} link set lo up"
        ));
        Netns {
            send,
            recv,
            peer: format!("10.78.{subnet}.2"),
        }
    }

    fn nft(&self, ns: &str, rules: &str) {
        sh(&format!(
            "ip netns exec {ns} nft -f - <<'EOF'\n{rules}\nEOF"
        ));
    }

    fn retrans_segs(&self) -> u64 {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.send, "cat", "/proc/net/snmp"])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        let mut tcp = text.lines().filter(|l| l.starts_with("Tcp:"));
        let (names, values) = (tcp.next().unwrap(), tcp.next().unwrap());
        let i = names
            .split_whitespace()
            .position(|n| n == "RetransSegs")
            .unwrap();
        values.split_whitespace().nth(i).unwrap().parse().unwrap()
    }

    /// Waits (up to 20 s) until `sh -c script` in namespace `ns` prints something
    /// containing `want`.
    fn wait_for(&self, ns: &str, script: &str, want: &str) {
        let t = std::time::Instant::now();
        loop {
            let out = Command::new("ip")
                .args(["netns", "exec", ns, "sh", "-c", script])
                .output()
                .unwrap();
            if String::from_utf8_lossy(&out.stdout).contains(want) {
                return;
            }
            assert!(t.elapsed() < Duration::from_secs(20), "{script}: no {want}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    fn spawn(&self, ns: &str, args: &[&str]) -> Child {
        Command::new("ip")
            .args(["netns", "exec", ns])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.send])
            .status();
        let _ = Command::new("ip")
            .args(["netns", "del", &self.recv])
            .status();
    }
}

/// `kernstat tcp --json 1 N` in the background; its intervals when it ends.
fn tcp_watch(secs: u32) -> Child {
    common::traced(&["tcp", "--json", "--top", "50", "1", &secs.to_string()]).0
}

fn intervals(c: Child) -> Vec<Value> {
    let out = c.wait_with_output().unwrap();
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn retransmits_under_loss_equal_the_kernels_count_and_name_the_sender() {
    if !bpf_gate() || !tool_gate("nft") || !tool_gate("iperf3") {
        return;
    }
    let n = Netns::make("r", 1);
    // Lost on the way in (a drop at the sender's own output is a local error: the
    // segment is sent again as new, not retransmitted).
    n.nft(&n.recv, "table inet ksloss {\n chain in {\n  type filter hook input priority 0;\n  ip saddr 10.78.1.1 tcp dport 5299 numgen random mod 100 < 1 counter drop\n }\n}");
    let mut server = n.spawn(&n.recv.clone(), &["iperf3", "-s", "-1", "-p", "5299"]);
    std::thread::sleep(Duration::from_millis(500));
    let watch = tcp_watch(12);
    // The per-process interval `ps --fields retrans` and top's RETR/s read.
    let mut per_process = kernstat_collect::tcp_interval::TcpInterval::load().unwrap();
    per_process.read_first();
    let before = n.retrans_segs();
    let client = n.spawn(
        &n.send.clone(),
        &["iperf3", "-c", &n.peer.clone(), "-p", "5299", "-n", "40M"],
    );
    let pid = client.id();
    let out = client.wait_with_output().unwrap();
    assert!(out.status.success(), "iperf3 -c failed");
    // The client is done writing, not the network delivering: the server ends when
    // every byte came (retransmits of the last lost segments included); then the last
    // ACKs settle.
    let t = std::time::Instant::now();
    while server.try_wait().unwrap().is_none() && t.elapsed() < Duration::from_secs(8) {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    let kernel = n.retrans_segs() - before;
    per_process.read_second(1.0);
    let _ = server.kill();
    let _ = server.wait();
    let ivs = intervals(watch);
    let mut ours = 0u64;
    let mut others = 0u64;
    for iv in &ivs {
        for s in iv["sockets"].as_array().unwrap() {
            if s["pid"] == pid {
                ours += s["count"].as_u64().unwrap();
            } else if s["remote"][0] == n.peer.as_str() {
                others += s["count"].as_u64().unwrap();
            }
        }
    }
    let rules = Command::new("ip")
        .args(["netns", "exec", &n.recv, "nft", "list", "ruleset"])
        .output()
        .unwrap();
    assert!(
        kernel > 0,
        "1 % loss gave no retransmits: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&rules.stdout)
    );
    assert_eq!(
        ours + others,
        kernel,
        "kernstat counted {ours} on iperf3 (pid {pid}) and {others} unattributed, the namespace's RetransSegs grew by {kernel}"
    );
    assert_eq!(others, 0, "every retransmit on the sender");
    assert_eq!(
        per_process.count(pid),
        kernel,
        "the RETR/s column's interval counted {} on iperf3",
        per_process.count(pid)
    );
}

/// `ps --fields retrans` needs an interval, shows a rate per process and a dash never
/// stands for a zero that was measured; top names the column in its help.
#[test]
fn ps_shows_retransmits_per_process_over_its_interval() {
    if !bpf_gate() {
        return;
    }
    let ps = |args: &[&str]| common::command().arg("ps").args(args).output().unwrap();
    let out = ps(&["--fields", "pid,retrans"]);
    assert_eq!(out.status.code(), Some(2), "no interval: a usage error");
    assert!(String::from_utf8_lossy(&out.stderr).contains("--interval"));
    let me = std::process::id().to_string();
    let asked = ["--interval", "0.3", "--fields", "pid,retrans", "--pid", &me];
    let out = ps(&asked);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let mut lines = text.lines();
    assert!(lines.next().unwrap().contains("RETR/s"), "{text}");
    let row: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
    assert_eq!(row, [me.as_str(), "0.0"], "{text}");
    let out = ps(&[&asked[..], &["--json"]].concat());
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["tcp_retrans_per_s"], 0.0, "{v}");
}

#[test]
fn a_dropped_first_syn_is_a_one_second_connect_of_the_connecting_process() {
    if !bpf_gate() || !tool_gate("nft") || !tool_gate("iperf3") || !tool_gate("python3") {
        return;
    }
    let n = Netns::make("c", 2);
    let mut server = n.spawn(&n.recv.clone(), &["iperf3", "-s", "-1", "-p", "5298"]);
    n.wait_for(&n.recv, "ss -Hltn 'sport = :5298'", "5298");
    n.nft(&n.send, "table inet kssyn {\n chain out {\n  type filter hook output priority 0;\n  tcp dport 5298 tcp flags & (syn | ack) == syn counter drop\n }\n}");
    let watch = tcp_watch(5);
    let connector = n.spawn(
        &n.send.clone(),
        &[
            "python3",
            "-c",
            &format!("import socket; s = socket.create_connection(('{}', 5298), timeout=10); print('connected')", n.peer),
        ],
    );
    let pid = connector.id();
    // The first SYN dropped (and only it: the retransmit comes 1 s later).
    n.wait_for(&n.send, "nft list table inet kssyn", "packets 1 ");
    sh(&format!(
        "ip netns exec {} nft delete table inet kssyn",
        n.send
    ));
    let out = connector.wait_with_output().unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("connected"));
    let _ = server.kill();
    let _ = server.wait();
    let ivs = intervals(watch);
    let last = ivs.last().unwrap();
    let mine = last["connects"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["pid"] == pid)
        .unwrap_or_else(|| panic!("no connect of pid {pid}: {last}"));
    assert_eq!(mine["connects"], 1, "{mine}");
    let max_ms = mine["connect_max_ms"].as_f64().unwrap();
    assert!(
        (900.0..2000.0).contains(&max_ms),
        "the SYN retransmit comes at ~1 s: {max_ms} ms"
    );
    // And in the histogram: a connect in the bucket holding 1 s.
    let in_1s: u64 = ivs
        .iter()
        .flat_map(|iv| iv["connect_latency"]["buckets"].as_array().unwrap().clone())
        .filter(|b| b["lo"].as_u64().unwrap() <= 1_000_000 && b["hi"].as_u64().unwrap() >= 900_000)
        .map(|b| b["count"].as_u64().unwrap())
        .sum();
    assert!(in_1s >= 1, "{ivs:?}");
}
