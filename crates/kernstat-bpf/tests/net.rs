//! The per-process network counter against known answers: child processes that send an
//! exact number of bytes over TCP, UDP and a Unix socket (each end says what it sent
//! or received), and iperf3 over loopback (its own report). Runs as root; skips
//! elsewhere, fails under CI=true.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use kernstat_bpf::net::Net;
use kernstat_model::net::{NetCounters, NetSample};
use kernstat_testkit::{bpf_gate, tool_gate, workload_bin};

const TCP: usize = 0;
const UDP: usize = 1;
const UNIX: usize = 2;

fn net() -> Option<Net> {
    if !bpf_gate() {
        return None;
    }
    Some(Net::load(false).expect("load the net counter"))
}

fn spawn(args: &[&str]) -> (Child, BufReader<std::process::ChildStdout>) {
    let mut c = Command::new(workload_bin())
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("start ks-workload");
    let out = BufReader::new(c.stdout.take().unwrap());
    (c, out)
}

fn line(out: &mut BufReader<std::process::ChildStdout>) -> Vec<u64> {
    let mut l = String::new();
    out.read_line(&mut l).unwrap();
    l.split_whitespace()
        .skip(1)
        .map(|w| w.parse().unwrap())
        .collect()
}

/// What one end did by its own account: (pid, bytes, calls).
struct End {
    pid: u32,
    bytes: u64,
    calls: u64,
}

/// A receiver and a sender of `n` bytes in `chunk`-byte sends, both run to their exit.
fn transfer(kind: &str, n: u64, chunk: u64) -> (End, End) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sock");
    let path = path.to_str().unwrap();
    let n_s = n.to_string();
    let mut recv_args = vec!["net-recv", kind, &n_s];
    if kind == "unix" {
        recv_args.push(path);
    }
    let (mut r, mut r_out) = spawn(&recv_args);
    let port = line(&mut r_out)[0].to_string();
    let to = if kind == "unix" { path } else { &port };
    let chunk_s = chunk.to_string();
    let (mut s, mut s_out) = spawn(&["net-send", kind, to, &n_s, &chunk_s]);
    let sent = line(&mut s_out);
    let got = line(&mut r_out);
    assert!(s.wait().unwrap().success());
    assert!(r.wait().unwrap().success());
    (
        End {
            pid: r.id(),
            bytes: got[0],
            calls: got[1],
        },
        End {
            pid: s.id(),
            bytes: sent[0],
            calls: sent[1],
        },
    )
}

fn counters_of(sample: &NetSample, pid: u32) -> NetCounters {
    let found: Vec<_> = sample.procs.iter().filter(|p| p.pid == pid).collect();
    assert_eq!(found.len(), 1, "one entry for pid {pid}: {found:?}");
    found[0].counters
}

#[test]
fn counts_exact_payload_bytes_on_both_ends_per_kind_and_keeps_the_exited() {
    let Some(mut net) = net() else { return };
    // 1 MB over TCP in 64 KiB writes, 200 KB of UDP in 1,000-byte datagrams, 3 MB over
    // a Unix stream socket in 4 KiB writes: every process exits before the read.
    for (kind, k, n, chunk) in [
        ("tcp", TCP, 1_000_000, 65_536),
        ("udp", UDP, 200_000, 1_000),
        ("unix", UNIX, 3_000_000, 4_096),
    ] {
        let (recv, send) = transfer(kind, n, chunk);
        assert_eq!(send.bytes, n);
        let mut sample = NetSample::default();
        net.read(&mut sample, |_, _| true).unwrap();
        let s = counters_of(&sample, send.pid);
        let r = counters_of(&sample, recv.pid);
        assert_eq!(s.tx_bytes[k], n, "{kind}: the sender's bytes: {s:?}");
        assert_eq!(s.tx_calls[k], send.calls, "{kind}: the sender's sends");
        assert_eq!(
            s.tx() - s.tx_bytes[k],
            0,
            "{kind}: nothing else sent: {s:?}"
        );
        assert_eq!(s.rx(), 0, "{kind}: the sender received nothing: {s:?}");
        assert_eq!(
            r.rx_bytes[k], recv.bytes,
            "{kind}: the receiver's bytes: {r:?}"
        );
        assert_eq!(r.rx_calls[k], recv.calls, "{kind}: the receiver's receives");
        assert_eq!(r.rx() - r.rx_bytes[k], 0, "{kind}: nothing else received");
        assert_eq!(r.tx(), 0, "{kind}: the receiver sent nothing: {r:?}");
        if kind != "udp" {
            assert_eq!(recv.bytes, n, "{kind}: a stream loses nothing");
        }
        let comm = sample
            .procs
            .iter()
            .find(|p| p.pid == send.pid)
            .unwrap()
            .comm;
        assert_eq!(comm.as_str(), "ks-workload");
    }
}

#[test]
fn the_exited_are_forgotten_only_after_two_reads_without_change() {
    let Some(mut net) = net() else { return };
    let (recv, send) = transfer("tcp", 100_000, 10_000);
    let gone = |pid: u32, _: u64| pid != recv.pid && pid != send.pid;
    let mut sample = NetSample::default();
    // Both have exited: the first read still reports them (their last bytes) ...
    net.read(&mut sample, gone).unwrap();
    assert_eq!(counters_of(&sample, send.pid).tx(), 100_000);
    // ... the second too (gone and unchanged: deleted after this read) ...
    net.read(&mut sample, gone).unwrap();
    assert_eq!(counters_of(&sample, send.pid).tx(), 100_000);
    // ... and then they are no more.
    net.read(&mut sample, gone).unwrap();
    assert!(sample
        .procs
        .iter()
        .all(|p| p.pid != send.pid && p.pid != recv.pid));
}

#[test]
fn iperf3_over_loopback_is_attributed_to_iperf3() {
    if !tool_gate("iperf3") {
        return;
    }
    let Some(mut net) = net() else { return };
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port().to_string()
    };
    struct KillOnDrop(Child);
    impl Drop for KillOnDrop {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let server = KillOnDrop(
        Command::new("iperf3")
            .args(["-s", "-p", &port])
            .stdout(Stdio::null())
            .spawn()
            .expect("iperf3 -s"),
    );
    // The server listens within a moment; the client retries until it does.
    let mut report = None;
    for _ in 0..50 {
        let out = Command::new("iperf3")
            .args(["-c", "127.0.0.1", "-p", &port, "-t", "5", "-J"])
            .output()
            .expect("iperf3 -c");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if out.status.success() && v["end"]["sum_sent"]["bytes"].is_number() {
            report = Some(v);
            break;
        }
        eprintln!(
            "iperf3 -c: {} {}",
            out.status,
            v.get("error").unwrap_or(&serde_json::Value::Null)
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // A server that stays (a client attempt that failed midway does not use it up);
    // its counters are in the map after it is killed.
    drop(server);
    let v = report.expect("iperf3 client never completed a test");
    let sent = v["end"]["sum_sent"]["bytes"].as_f64().unwrap();
    let received = v["end"]["sum_received"]["bytes"].as_f64().unwrap();
    let mut sample = NetSample::default();
    net.read(&mut sample, |_, _| true).unwrap();
    let iperf: Vec<_> = sample
        .procs
        .iter()
        .filter(|p| p.comm.as_str() == "iperf3")
        .collect();
    let tx: u64 = iperf.iter().map(|p| p.counters.tx_bytes[TCP]).sum();
    let rx: u64 = iperf.iter().map(|p| p.counters.rx_bytes[TCP]).sum();
    // Both ends are iperf3: what it sent is what it received, plus its control
    // connection's few hundred bytes each way.
    let (tx_share, rx_share) = (tx as f64 / sent, rx as f64 / received);
    eprintln!(
        "iperf3 reports {sent} bytes sent, {received} received; kernstat attributes {tx} sent and {rx} received to iperf3 ({tx_share:.5}, {rx_share:.5})"
    );
    assert!(
        (0.99..=1.01).contains(&tx_share),
        "sent: {tx} of {sent} ({tx_share})"
    );
    assert!(
        (0.99..=1.01).contains(&rx_share),
        "received: {rx} of {received} ({rx_share})"
    );
}

/// Threads of one process share its counters (on the group leader): four threads that
/// send at once, on both CPUs, lose none of each other's additions. Read both ways: by
/// the counter's own walk, and by the sampler's when it shares the sampler's storage.
#[test]
fn threads_sending_at_once_are_counted_exactly() {
    let Some(mut own) = net() else { return };
    let mut sampler = kernstat_bpf::sampler::Sampler::load().expect("load the sampler");
    let mut shared =
        Net::load_with(false, Some(sampler.net_storage())).expect("load sharing the storage");
    sampler.read_net(true);
    const THREADS: u64 = 4;
    const EACH: u64 = 20_000;
    const SIZE: usize = 100;
    let me = std::process::id();
    let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let to = sink.local_addr().unwrap();
    let mine = |sample: &NetSample| -> (u64, u64) {
        sample
            .procs
            .iter()
            .find(|p| p.pid == me)
            .map_or((0, 0), |p| {
                (p.counters.tx_bytes[UDP], p.counters.tx_calls[UDP])
            })
    };
    let mut read = |own: &mut Net, shared: &mut Net| -> [(u64, u64); 2] {
        let (mut a, mut b) = (NetSample::default(), NetSample::default());
        own.read(&mut a, |_, _| true).unwrap();
        let mut table = kernstat_model::TaskTable::default();
        sampler.sample(&mut table).unwrap();
        shared
            .read_with(&mut b, |_, _| true, sampler.net_records())
            .unwrap();
        [mine(&a), mine(&b)]
    };
    let before = read(&mut own, &mut shared);
    let start = std::sync::Barrier::new(THREADS as usize);
    std::thread::scope(|s| {
        for _ in 0..THREADS {
            s.spawn(|| {
                let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
                start.wait();
                for _ in 0..EACH {
                    assert_eq!(sock.send_to(&[7u8; SIZE], to).unwrap(), SIZE);
                }
            });
        }
    });
    let after = read(&mut own, &mut shared);
    for (how, (b, a)) in ["own walk", "sampler's walk"]
        .iter()
        .zip(before.iter().zip(after.iter()))
    {
        assert_eq!(a.1 - b.1, THREADS * EACH, "{how}: sends");
        assert_eq!(a.0 - b.0, THREADS * EACH * SIZE as u64, "{how}: bytes");
    }
}

/// An exec from a thread other than the leader makes that thread the leader (the same
/// pid): the counters go with it, so the process's bytes are those before and after.
#[test]
fn an_exec_from_another_thread_keeps_the_counters() {
    let Some(mut net) = net() else { return };
    let sink = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let port = sink.local_addr().unwrap().port().to_string();
    let (mut c, mut out) = spawn(&["net-exec-thread", &port, "5000"]);
    // The exec'd image's report: it sent its 5,000 after the first 5,000.
    assert_eq!(line(&mut out), [5000, 5]);
    let mut sample = NetSample::default();
    net.read(&mut sample, |_, _| true).unwrap();
    let s = counters_of(&sample, c.id());
    let _ = c.kill();
    let _ = c.wait();
    assert_eq!(s.tx_bytes[UDP], 10_000, "{s:?}");
    assert_eq!(s.tx_calls[UDP], 10, "{s:?}");
}
