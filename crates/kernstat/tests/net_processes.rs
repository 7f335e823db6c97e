//! Per-process network and the machine's links through the commands people run:
//! `snapshot --json`, `ps`, the bar and Prometheus, against known answers (a steady TCP
//! sender and its receiver, /proc/net/dev read around the command), without BPF (no
//! per-process figure, never zeros), and in a network namespace of the test's own
//! (only lo; links created and deleted while the bar runs: no error line).

mod common;
use common::{command, json, run, MetricsDaemon};

use std::collections::BTreeMap;
use std::process::Stdio;

use kernstat_testkit::{bpf_gate, gate, which, Traffic};
use serde_json::Value;

/// The network tests compare rates of one sender: one at a time.
fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

/// The first `n` lines of `bar ARGS --interval 0.1` run by `cmd` (kernstat or a
/// wrapper whose arguments end with kernstat), then the bar is killed.
fn bar_lines(cmd: &mut std::process::Command, args: &[&str], n: usize) -> Vec<String> {
    use std::io::BufRead;
    let mut child = cmd
        .arg("bar")
        .args(args)
        .args(["--interval", "0.1", "--no-lock"])
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    let lines: Vec<String> = std::io::BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .filter(|l| !l.is_empty())
        .take(n)
        .collect();
    let _ = child.kill();
    let _ = child.wait();
    lines
}

/// /proc/net/dev: interface -> (rx bytes, rx packets, tx bytes, tx packets).
fn proc_net_dev() -> BTreeMap<String, [u64; 4]> {
    let text = std::fs::read_to_string("/proc/net/dev").unwrap();
    text.lines()
        .skip(2)
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            let n: Vec<u64> = rest
                .split_whitespace()
                .map(|w| w.parse().unwrap())
                .collect();
            Some((name.trim().to_string(), [n[0], n[1], n[8], n[9]]))
        })
        .collect()
}

#[test]
fn links_agree_with_proc_net_dev_read_around_the_sample() {
    let _one = one_at_a_time();
    let _traffic = bpf_gate().then(Traffic::start);
    let before = proc_net_dev();
    let (code, out, err) = run(&["snapshot", "--json", "--interval", "0.5"]);
    let after = proc_net_dev();
    assert_eq!(code, Some(0), "{err}");
    let v = json(&out);
    let links = v["links"].as_array().expect("links");
    assert!(!links.is_empty());
    for l in links {
        let name = l["name"].as_str().unwrap();
        let (Some(b), Some(a)) = (before.get(name), after.get(name)) else {
            continue; // came or went during the command
        };
        for (i, field) in ["rx_bytes", "rx_packets", "tx_bytes", "tx_packets"]
            .iter()
            .enumerate()
        {
            let k = l[field].as_u64().unwrap();
            assert!(
                b[i] <= k && k <= a[i],
                "{name} {field}: {k} not within /proc/net/dev's {} .. {}",
                b[i],
                a[i]
            );
        }
        // The rate is the difference of two readings within the same window.
        let moved = (a[0] - b[0]) as f64;
        assert!(l["rx_bps"].as_f64().unwrap() * 0.5 <= moved * 1.5 + 1.0);
    }
    // The default route's interface (if any) comes first.
    let default = links.iter().position(|l| l["is_default"] == true);
    assert!(default.is_none_or(|i| i == 0), "{links:?}");
}

#[test]
fn a_steady_sender_leads_snapshot_ps_and_the_prometheus_top() {
    if !bpf_gate() {
        return;
    }
    let _one = one_at_a_time();
    let t = Traffic::start();
    let (code, out, err) = run(&["snapshot", "--json", "--interval", "0.5"]);
    assert_eq!(code, Some(0), "{err}");
    let v = json(&out);
    let net = &v["net"];
    assert_eq!(net["attribution"], "caller", "{net}");
    let top = net["top"].as_array().unwrap();
    // Both ends move the same bytes: they are the first two, in either order.
    let mut first_two: Vec<u64> = top[..2]
        .iter()
        .map(|e| e["pid"].as_u64().unwrap())
        .collect();
    first_two.sort_unstable();
    let mut ends = vec![u64::from(t.sender()), u64::from(t.receiver())];
    ends.sort_unstable();
    assert_eq!(first_two, ends, "{net}");
    assert!(net["tcp"]["tx_bps"].as_f64().unwrap() > 1e6, "{net}");
    let procs = v["procs"].as_array().unwrap();
    let row = |pid: u32| procs.iter().find(|p| p["pid"] == pid).unwrap();
    let (s, r) = (row(t.sender()), row(t.receiver()));
    assert!(s["net_tx_bps"].as_f64().unwrap() > 1e6, "{s}");
    assert_eq!(s["net_rx_bps"], 0.0, "{s}");
    assert!(r["net_rx_bps"].as_f64().unwrap() > 1e6, "{r}");
    assert_eq!(r["net_tx_bps"], 0.0, "{r}");
    // Every process is measured: an idle one shows 0, not nothing.
    assert!(procs.iter().all(|p| p["net_rx_bps"].is_number()));

    for (sort, pid) in [("-nettx", t.sender()), ("-netrx", t.receiver())] {
        let (code, out, err) = run(&[
            "ps",
            "--fields",
            "pid,netrx,nettx",
            "--sort",
            sort,
            "--interval",
            "0.5",
            "--json",
        ]);
        assert_eq!(code, Some(0), "{err}");
        let first = json(out.lines().next().unwrap());
        assert_eq!(first["pid"], pid, "ps --sort {sort}: {first}");
    }
    let (code, out, err) = run(&[
        "ps",
        "--fields",
        "pid,comm,netrx,nettx",
        "--sort",
        "-nettx",
        "--interval",
        "0.5",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let mut lines = out.lines();
    assert!(lines.next().unwrap().contains("NET_RX/s"));
    let first = lines.next().unwrap();
    assert!(
        first.trim_start().starts_with(&t.sender().to_string()),
        "{out}"
    );

    let d = MetricsDaemon::start("0.2", &[]);
    let text = (0..100)
        .find_map(|_| {
            let t = d.scrape();
            if t.contains("kernstat_process_network_transmit_bytes_total{") {
                Some(t)
            } else {
                std::thread::sleep(std::time::Duration::from_millis(100));
                None
            }
        })
        .expect("per-process network series");
    let sender = format!("pid=\"{}\"", t.sender());
    assert!(
        text.lines().any(
            |l| l.starts_with("kernstat_process_network_transmit_bytes_total{")
                && l.contains(&sender)
        ),
        "{text}"
    );
    assert!(text.contains("kernstat_socket_transmit_bytes_total{kind=\"tcp\"}"));
    assert!(text.contains("kernstat_network_receive_bytes_total{device=\"lo\"}"));
    assert!(text.contains("kernstat_network_attribution_info{attribution=\"caller\"}"));
}

#[test]
fn without_bpf_per_process_network_is_unavailable_never_zero() {
    let _one = one_at_a_time();
    let (code, out, err) = run(&["snapshot", "--json", "--no-bpf", "--interval", "0.2"]);
    assert_eq!(code, Some(0), "{err}");
    let v = json(&out);
    assert!(v.get("net").is_none(), "{}", v["net"]);
    assert!(v["procs"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p.get("net_rx_bps").is_none()));
    assert!(
        !v["links"].as_array().unwrap().is_empty(),
        "links need no BPF"
    );

    let (code, out, err) = run(&[
        "ps",
        "--no-bpf",
        "--fields",
        "pid,netrx,nettx",
        "--interval",
        "0.2",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        err.contains("per-process network unavailable (--no-bpf)"),
        "{err}"
    );
    for row in out.lines().skip(1) {
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(&cells[1..], ["-", "-"], "{row}");
    }
    // ps cannot count from before it started: a rate needs --interval.
    let (code, _, err) = run(&["ps", "--fields", "pid,netrx"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("need --interval"), "{err}");

    let out = bar_lines(&mut command(), &["--no-bpf", "--format", "waybar"], 2);
    let tip = json(out.last().unwrap())["tooltip"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(tip.contains("per process: unavailable"), "{tip}");
}

#[test]
fn a_namespace_with_only_lo_and_links_that_come_and_go_give_no_error_line() {
    let _one = one_at_a_time();
    let root = bpf_gate();
    let tools = which("unshare").is_some() && which("ip").is_some();
    if !gate("unshare and ip (root)", root && tools, || {
        "needs root, unshare and iproute2".into()
    }) {
        return;
    }
    // Only lo, and down: no default route, no link to name.
    let dir = tempfile::tempdir().unwrap();
    let mut only_lo = std::process::Command::new("unshare");
    only_lo
        .arg("-n")
        .arg(common::kernstat())
        .env("XDG_RUNTIME_DIR", common::private_runtime_dir())
        .stderr(std::fs::File::create(dir.path().join("lo-err")).unwrap());
    let shown = bar_lines(
        &mut only_lo,
        &["--format", "text", "--text", "<{net_link}|{net_rx}>"],
        3,
    );
    assert!(
        shown.iter().all(|l| l == "<|>"),
        "no main link: empty fields: {shown:?}"
    );
    let err = std::fs::read_to_string(dir.path().join("lo-err")).unwrap();
    assert_eq!(err, "", "no error line");

    // A veth pair created and deleted 30 times while the bar samples every 20 ms.
    let script = format!(
        "XDG_RUNTIME_DIR={rt} {ks} bar --format text --text '{{net_link}} {{net_rx}}' --interval 0.02 >$D/out 2>$D/err &
         for i in $(seq 30); do
           ip link add ksv0 type veth peer name ksv1 && ip link set ksv0 up && ip link set ksv1 up
           sleep 0.02
           ip link del ksv0
         done
         sleep 0.1; kill $!; wait $! 2>/dev/null; exit 0",
        rt = common::private_runtime_dir().display(),
        ks = common::kernstat().display(),
    );
    let st = std::process::Command::new("unshare")
        .args(["-n", "sh", "-c", &script])
        .env("D", dir.path())
        .stdin(Stdio::null())
        .status()
        .unwrap();
    assert!(st.success());
    let err = std::fs::read_to_string(dir.path().join("err")).unwrap();
    let out = std::fs::read_to_string(dir.path().join("out")).unwrap();
    assert_eq!(err, "", "no error line while links came and went");
    assert!(out.lines().count() >= 10, "the bar kept printing: {out}");
}

#[test]
fn the_bar_shows_the_main_link_and_a_network_tooltip() {
    let _one = one_at_a_time();
    let _t = bpf_gate().then(Traffic::start);
    let mut c = command();
    c.args([
        "bar",
        "--format",
        "waybar",
        "--interval",
        "0.3",
        "--text",
        "{net_link} {net_rx} {net_tx}",
    ]);
    // Lines until one names the sender (BPF), or the third: loading the programs takes
    // over a second on a busy machine, so no fixed wait.
    let mut ch = c.stdout(Stdio::piped()).spawn().unwrap();
    let mut lines = std::io::BufRead::lines(std::io::BufReader::new(ch.stdout.take().unwrap()));
    let mut last = Value::Null;
    for n in 1.. {
        let line = lines.next().expect("the bar ended").unwrap();
        if !line.starts_with('{') {
            continue;
        }
        last = json(&line);
        let named = last["tooltip"]
            .as_str()
            .is_some_and(|t| t.contains("ks-workload"));
        if named || (n >= 3 && !bpf_gate()) || n >= 60 {
            break;
        }
    }
    let _ = ch.kill();
    let _ = ch.wait();
    let tip = last["tooltip"].as_str().unwrap();
    assert!(tip.contains("\n\nNetwork "), "{tip}");
    let dev = proc_net_dev();
    let shown = last["text"].as_str().unwrap();
    let link = shown.split(' ').next().unwrap();
    if !link.is_empty() {
        assert!(dev.contains_key(link), "{shown}");
        assert!(shown.ends_with("/s"), "{shown}");
    }
    if bpf_gate() {
        assert!(tip.contains("sockets ↓"), "{tip}");
        assert!(
            tip.contains("ks-workload"),
            "the sender is in the top 5: {tip}"
        );
    }
}
