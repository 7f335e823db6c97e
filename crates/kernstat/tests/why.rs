//! `kernstat why` on controlled workloads with known answers, live and recorded: each
//! scenario runs while `why --here` watches it and a daemon records; the first finding's
//! resource is the one the workload loads (or only findings something else on the
//! machine caused rank above it) and its culprits include one of the workload's pids;
//! after the workload ended, `why --at` over the same window says the same. The
//! scenarios run one after another (one test), each on the machine as it is: what they
//! load dominates whatever else runs.
//!
//! - CPU saturation: three busy loops on a machine of two CPUs;
//! - I/O saturation: synchronous O_DIRECT writes to a loop device, without a pause;
//! - packet loss: 5 % of a sender's segments lost in a private namespace (nftables);
//! - an OOM kill: an allocation past a memory group's limit.
//!
//! The quiet case (no notable finding) is asked of a recorded quiet window (the archive
//! format fixture: 30 % of two CPUs busy, no process waiting), so that it does not depend
//! on what else this machine runs. A CPU-throttled group and memory pressure need cgroup
//! v2's cpu.max and memory.high (this machine's cgroups are hybrid): old_kernel.rs asks
//! `why` about both in the 6.1 guest.
//! Needs root.

mod common;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use kernstat_testkit::{bpf_gate, tool_gate, workload_bin};
use serde_json::Value;

fn why(args: &[&str]) -> Value {
    let out = common::command()
        .arg("why")
        .args(args)
        .arg("--json")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Whether `report` finds `resource` as the scenario made it: a notable finding that
/// names one of the scenario's `pids` (a culprit or a victim), first — or below only
/// findings of other resources that something else on this machine caused (their first
/// culprit is not one of `pids`): the suite runs other tests beside this one, and a
/// compile or a test burning both CPUs is rightly ranked above a scenario's I/O by
/// whatever it scores. Every process the scenario started counts: beside other CPU
/// hogs, the top five culprits of a saturated CPU may name any of its three spinners.
fn found(report: &Value, resource: &str, pids: &[u32]) -> Result<(), String> {
    let ours = |p: &Value| pids.iter().any(|pid| p == pid);
    let findings = report["findings"].as_array().unwrap();
    let names = |f: &Value| {
        f["culprits"]
            .as_array()
            .unwrap()
            .iter()
            .chain(f["victims"].as_array().unwrap())
            .any(|p| ours(&p["pid"]))
    };
    let Some(at) = findings.iter().position(|f| f["resource"] == resource) else {
        return Err(format!("no {resource} finding"));
    };
    let f = &findings[at];
    if f["notable"] != true {
        return Err(format!("{resource} is not notable"));
    }
    if !names(f) {
        return Err(format!("{resource} names none of pids {pids:?}"));
    }
    for above in &findings[..at] {
        if ours(&above["culprits"][0]["pid"]) {
            return Err(format!(
                "{} ranks above {resource}, blaming one of pids {pids:?}",
                above["resource"]
            ));
        }
    }
    Ok(())
}

struct Scenario {
    name: &'static str,
    resource: &'static str,
    /// When it ran (the recorded window ends at `at`).
    at: u64,
    pids: Vec<u32>,
}

/// Asks `why` live over 4 s, starting `work` (which returns the pids to look for and a
/// guard) once `why` watches (its hooks load first, slowly on a busy machine: work done
/// before is not seen), and checks it; returns what to ask the archive later.
fn live(
    name: &'static str,
    resource: &'static str,
    start: impl FnOnce() -> (Vec<u32>, Box<dyn FnOnce()>),
) -> Scenario {
    let mut watch = common::command()
        .args(["why", "--here", "--window", "4s", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = std::io::BufReader::new(watch.stderr.take().unwrap());
    let mut said = String::new();
    while !said.contains("watching the machine") {
        let before = said.len();
        std::io::BufRead::read_line(&mut err, &mut said).unwrap();
        assert!(
            said.len() > before,
            "{name}: why ended before watching: {said}"
        );
    }
    let (pids, stop) = start();
    let out = watch.wait_with_output().unwrap();
    assert!(out.status.success(), "{name}: {said}");
    let r: Value = serde_json::from_slice(&out.stdout).unwrap();
    let at = kernstat_testkit::unix_now_s() as u64;
    std::thread::sleep(Duration::from_millis(1500));
    stop();
    if let Err(e) = found(&r, resource, &pids) {
        panic!("{name}: {e}: {r:#}");
    }
    Scenario {
        name,
        resource,
        at,
        pids,
    }
}

fn spawn(args: &[&str]) -> Child {
    Command::new(workload_bin())
        .args(args)
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn each_scenario_is_found_first_live_and_recorded() {
    if !bpf_gate() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let archive = dir.path().join("archive");
    // Dropped (killed) however the test ends.
    let daemon = common::DaemonProc::start(&[
        "--record",
        archive.to_str().unwrap(),
        "--record-interval",
        "1",
    ]);
    std::thread::sleep(Duration::from_secs(3));
    let mut done = Vec::new();

    done.push(live("CPU saturation", "cpu", || {
        let spinners: Vec<Child> = (0..3).map(|_| spawn(&["spin"])).collect();
        let pids = spinners.iter().map(Child::id).collect();
        (
            pids,
            Box::new(move || {
                for mut s in spinners {
                    let _ = s.kill();
                    let _ = s.wait();
                }
            }),
        )
    }));

    if tool_gate("losetup") {
        let lo = kernstat_testkit::LoopDevice::new(256);
        let dev = lo.path().to_string();
        done.push(live("I/O saturation", "io", || {
            let mut dd = Command::new("dd")
                .args([
                    "if=/dev/zero",
                    &format!("of={dev}"),
                    "bs=4096",
                    "count=1000000",
                    "oflag=direct,dsync",
                    "status=none",
                ])
                .spawn()
                .unwrap();
            let pid = dd.id();
            (
                vec![pid],
                Box::new(move || {
                    let _ = dd.kill();
                    let _ = dd.wait();
                }),
            )
        }));
        drop(lo);
    }

    if tool_gate("nft") && tool_gate("iperf3") {
        let id = std::process::id() % 10_000;
        let (s, r) = (format!("kswys{id}"), format!("kswyr{id}"));
        let sh = |script: &str| {
            let st = Command::new("sh").arg("-c").arg(script).status().unwrap();
            assert!(st.success(), "{script}");
        };
        sh(&format!(
            "ip netns add {s} && ip netns add {r} && \
             ip link add kwy{id}a netns {s} type veth peer name kwy{id}b netns {r} && \
             ip -n {s} addr add 10.78.9.1/24 dev kwy{id}a && ip -n {s} link set kwy{id}a up && \
             ip -n {r} addr add 10.78.9.2/24 dev kwy{id}b && ip -n {r} link set kwy{id}b up && \
             printf 'table inet l {{\\n chain in {{\\n  type filter hook input priority 0;\\n  ip saddr 10.78.9.1 tcp dport 5297 numgen random mod 100 < 5 drop\\n }}\\n}}\\n' | ip netns exec {r} nft -f -"
        ));
        struct Namespaces(String, String);
        impl Drop for Namespaces {
            fn drop(&mut self) {
                let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
                let _ = Command::new("ip").args(["netns", "del", &self.1]).status();
            }
        }
        let namespaces = Namespaces(s.clone(), r.clone());
        let mut server = Command::new("ip")
            .args(["netns", "exec", &r, "iperf3", "-s", "-p", "5297"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(500));
        done.push(live("packet loss", "network", || {
            let mut client = Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &s,
                    "iperf3",
                    "-c",
                    "10.78.9.2",
                    "-p",
                    "5297",
                    "-t",
                    "20",
                ])
                .stdout(Stdio::null())
                .spawn()
                .unwrap();
            let pid = client.id();
            (
                vec![pid],
                Box::new(move || {
                    let _ = client.kill();
                    let _ = client.wait();
                }),
            )
        }));
        let _ = server.kill();
        let _ = server.wait();
        drop(namespaces);
    }

    let mem = Path::new("/sys/fs/cgroup/memory");
    if mem.join("cgroup.procs").exists() {
        let group = mem.join(format!("ks-why-{}", std::process::id()));
        std::fs::create_dir(&group).unwrap();
        std::fs::write(
            group.join("memory.limit_in_bytes"),
            (64u64 << 20).to_string(),
        )
        .unwrap();
        let procs = group.join("cgroup.procs");
        done.push(live("OOM kill", "oom", || {
            let mut child = Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "echo $$ > {} && sleep 1 && exec {} alloc 256",
                    procs.display(),
                    workload_bin().display()
                ))
                .spawn()
                .unwrap();
            let pid = child.id();
            (
                vec![pid],
                Box::new(move || {
                    let _ = child.wait();
                }),
            )
        }));
        let _ = std::fs::remove_dir(&group);
    }
    std::thread::sleep(Duration::from_secs(2));
    drop(daemon);

    // The same windows, recorded, asked after the fact.
    let a = archive.to_str().unwrap();
    for s in &done {
        let r = why(&[
            "--at",
            &format!("@{}", s.at),
            "--window",
            "4s",
            "--archive",
            a,
        ]);
        if let Err(e) = found(&r, s.resource, &s.pids) {
            panic!("{} recorded: {e}: {r:#}", s.name);
        }
    }
    assert!(done.len() >= 2, "scenarios run: {}", done.len());
}

/// A recorded quiet window (the format fixture: 30 % of two CPUs busy, nothing waiting)
/// has no notable finding, and the text says so in its first line.
#[test]
fn a_quiet_recorded_window_has_nothing_notable() {
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../kernstat-record/tests/fixtures/v3");
    let fixture = fixture.to_str().unwrap();
    let r = why(&[
        "--at",
        "@1795694415",
        "--window",
        "15s",
        "--archive",
        fixture,
    ]);
    let findings = r["findings"].as_array().unwrap();
    assert!(!findings.is_empty(), "{r:#}");
    assert!(findings.iter().all(|f| f["notable"] == false), "{r:#}");
    assert_eq!(r["window"]["source"], "recorded");
    let out = common::command()
        .args([
            "why",
            "--at",
            "@1795694415",
            "--window",
            "15s",
            "--archive",
            fixture,
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("Nothing notable")),
        "{text}"
    );
}
