//! `kernstat biolat` against answers the kernel and a peer give for the same workload:
//! 2,000 O_DIRECT 4 KiB writes to a loop device of the test's own are 2,000 write
//! completions (±1 %) in its histogram, as /proc/diskstats counts them; the single-hook
//! form (the request's own stamp) and the pair form (a hash from issue) count the same
//! requests and agree on the median bucket; libbpf-tools' biolatency, run beside it on
//! the same workload, agrees in count (±5 %) and median bucket. Needs root (BPF, losetup).

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use kernstat_testkit::{bpf_gate, tool_gate, LoopDevice};
use serde_json::Value;

/// `kernstat biolat -d DEV --json 1 SECS [extra]` running while `work` runs: the write
/// completions counted and the merged histogram's median (µs).
fn traced(lo: &LoopDevice, extra: &[&str], work: impl FnOnce()) -> (u64, f64, u64) {
    let mut args = vec!["biolat", "-d", lo.name(), "-D", "--json"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["1", "6"]);
    let (child, err) = common::traced(&args);
    work();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", err.join().unwrap());
    let mut count = 0;
    let mut unstamped = 0;
    let mut slots: Vec<(f64, u64)> = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let v: Value = serde_json::from_str(line).unwrap();
        unstamped += v["unstamped"].as_u64().unwrap();
        for d in v["disks"].as_array().unwrap() {
            if d["op"] != "write" {
                continue;
            }
            count += d["count"].as_u64().unwrap();
            for b in d["buckets"].as_array().unwrap() {
                slots.push((b["lo"].as_f64().unwrap(), b["count"].as_u64().unwrap()));
            }
        }
    }
    (count, median_bucket(&mut slots), unstamped)
}

/// The lower bound of the log2 bucket holding the median.
fn median_bucket(buckets: &mut [(f64, u64)]) -> f64 {
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut merged: Vec<(f64, u64)> = Vec::new();
    for (lo, n) in buckets.iter() {
        match merged.last_mut() {
            Some(m) if m.0 == *lo => m.1 += n,
            _ => merged.push((*lo, *n)),
        }
    }
    let total: u64 = merged.iter().map(|m| m.1).sum();
    let mut seen = 0;
    for (lo, n) in merged {
        seen += n;
        if seen * 2 >= total {
            return lo;
        }
    }
    0.0
}

#[test]
fn direct_writes_to_a_loop_device_are_counted_as_the_kernel_counts_them() {
    if !bpf_gate() || !tool_gate("losetup") {
        return;
    }
    let lo = LoopDevice::new(64);
    for extra in [&[][..], &["--pair"][..]] {
        let before = lo.writes_completed();
        let (count, median, unstamped) = traced(&lo, extra, || lo.write_direct(2000));
        let kernel = lo.writes_completed() - before;
        assert!(kernel >= 2000, "{kernel}");
        assert!(
            count.abs_diff(kernel) * 100 <= kernel,
            "{extra:?}: {count} writes measured, /proc/diskstats counted {kernel} (unstamped {unstamped})"
        );
        assert!(median > 0.0, "{extra:?}");
    }
}

#[test]
fn biolatency_of_libbpf_tools_agrees_in_count_and_median() {
    if !bpf_gate() || !tool_gate("losetup") || !tool_gate("biolatency") {
        return;
    }
    let lo = LoopDevice::new(64);
    let peer = Command::new("biolatency")
        .args(["-D", "-d", lo.name(), "5", "1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let (count, median, _) = traced(&lo, &[], || lo.write_direct(2000));
    let out = peer.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    // "     64 -> 127        : 1873     |****|"
    let mut buckets: Vec<(f64, u64)> = text
        .lines()
        .filter_map(|l| {
            let (range, rest) = l.split_once(':')?;
            let lo: f64 = range.split("->").next()?.trim().parse().ok()?;
            let n: u64 = rest.split_whitespace().next()?.parse().ok()?;
            Some((lo, n))
        })
        .collect();
    let peer_count: u64 = buckets.iter().map(|b| b.1).sum();
    let peer_median = median_bucket(&mut buckets);
    assert!(
        count.abs_diff(peer_count) * 20 <= peer_count,
        "kernstat {count}, biolatency {peer_count}:\n{text}"
    );
    assert_eq!(median, peer_median, "median buckets:\n{text}");
}
