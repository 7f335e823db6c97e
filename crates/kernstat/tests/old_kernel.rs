//! The CO-RE fallbacks, proven on an older kernel: Debian's 6.1 (task->__state, and the
//! pre-6.2 atomic mm->rss_stat layout that compat.bpf.h reads through probe reads) booted
//! under qemu by scripts/oldkernel.sh. Inside, a shell spins on one of the two CPUs; the
//! sampler must load with BPF and report that process's CPU and RSS as /proc does.
//!
//! Needs root (qemu and the kernel package are installed on first use); skips elsewhere,
//! fails under CI=true.

use std::path::Path;
use std::process::Command;

use kernstat_testkit::gate;
use serde_json::Value;

const GUEST: &str = r#"#!/bin/sh
sh -c 'while :; do :; done' &
busy=$!
sleep 1
/bin/kernstat snapshot --json --interval 2 > /tmp/snap.json 2>/tmp/err
echo "RC $?"
echo "BUSYPID $busy"
echo "STATM $(cat /proc/$busy/statm)"
echo "SNAP $(cat /tmp/snap.json)"
echo "ERR $(cat /tmp/err)"
/bin/kernstat bar --bench 20 --json > /tmp/bench.json 2>&1
echo "BENCH $(cat /tmp/bench.json)"
/bin/kernstat ps --json --pid 1,$busy > /tmp/ps.json 2>/tmp/ps.err
echo "PSRC $?"
echo "PSERR $(cat /tmp/ps.err)"
echo "PS1 $(head -1 /tmp/ps.json)"
echo "PSBUSY $(tail -1 /tmp/ps.json)"
/bin/kernstat ps --json --fields pid,comm,time --pid $busy > /tmp/psl.json 2>/tmp/psl.err
echo "LIGHTRC $?"
echo "LIGHTERR $(cat /tmp/psl.err)"
echo "LIGHTROW $(tail -1 /tmp/psl.json)"
kcomm() { for d in /proc/[0-9]*; do read -r c < $d/comm 2>/dev/null && case "$c" in kworker/*) echo "$1 ${d#/proc/} $c";; esac; done; }
kcomm KCOMM1
/bin/kernstat ps --json | sed 's/^/PSALL /'
kcomm KCOMM2
/bin/kernstat ps --pin /sys/fs/bpf/ks 2>/dev/null; echo "PINRC $?"
echo "RQ $(/bin/kernstat runqlat --json 1 1 2>/dev/null)"
echo "RQRAW $(/bin/kernstat runqlat --raw-tp --json 1 1 2>/dev/null)"
(sleep 4; echo go) | /bin/ks-workload writes unbuffered 1000 25 /tmp/w1 > /dev/null &
echo "WR $(/bin/kernstat writes -c ks-workload --json 8 1 2>/tmp/wr.err)"
echo "WRERR $(cat /tmp/wr.err)"
echo "PINNED $(cat /sys/fs/bpf/ks/ps_v* | head -c 4)"
kill $busy
ip link set lo up
/bin/kernstat daemon --socket /tmp/ks.sock --interval 0.5 --record /tmp/rec --record-interval 0.5 >/tmp/d.out 2>/tmp/d.err &
d=$!
i=0; while [ ! -S /tmp/ks.sock ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done
/bin/ks-workload net-recv tcp 4000000 stay >/tmp/recv.out &
r=$!
i=0; until grep -q ready /tmp/recv.out || [ $i -gt 600 ]; do sleep 0.1; i=$((i+1)); done
/bin/ks-workload net-send tcp $(awk '/ready/{print $2}' /tmp/recv.out) 4000000 65536 stay >/tmp/send.out &
s=$!
i=0; until grep -q got /tmp/recv.out || [ $i -gt 600 ]; do sleep 0.1; i=$((i+1)); done
# Until a sample counted the transfer (the guest is emulated: slow, and unevenly so).
i=0; until /bin/kernstat get snapshot --socket /tmp/ks.sock --format json | grep -q '"net_tx_bytes":4000000' || [ $i -gt 150 ]; do sleep 0.2; i=$((i+1)); done
echo "NETPIDS $s $r"
echo "NETSENT $(cat /tmp/send.out)"
echo "NETGOT $(tail -1 /tmp/recv.out)"
echo "NETSNAP $(/bin/kernstat get snapshot --socket /tmp/ks.sock --format json)"
echo "NETSTATUS $(/bin/kernstat status --socket /tmp/ks.sock 2>&1 | tr "\n" " ")"
echo "DALIVE $(kill -0 $d 2>/dev/null && echo yes)"
echo "NETDERR $(cat /tmp/d.err | tr '\n' ' ')"
echo "NETDOCTOR $(/bin/kernstat doctor --json)"
/bin/ks-workload rusage /bin/ks-workload burn-exit 1 300 > /tmp/ru.out
bp=$(awk '{print $2}' /tmp/ru.out)
echo "BURNPID $bp"
echo "BURNCPU $(awk '{print $3}' /tmp/ru.out)"
recx() { /bin/kernstat dump --archive /tmp/rec --format csv | awk -F, -v p=$bp 'NR == 1 {for (i = 1; i <= NF; i++) c[$i] = i; next} $c["pid"] == p && $c["state"] == "X" {print $c["cpu_ns"]}'; }
i=0; until [ -n "$(recx)" ] || [ $i -gt 150 ]; do sleep 0.2; i=$((i+1)); done
echo "RECX $(recx)"
kill $s $r $d
"#;

/// cgroup v2 alone with every controller, as most distributions mount it: groups with a
/// CPU quota, a memory.high below what their process allocates, a sibling at rest, and
/// a 64 MiB direct write to a RAM disk.
const CGROUP_GUEST: &str = r#"#!/bin/sh
mount -t cgroup2 none /sys/fs/cgroup
echo "+cpu +memory +io +pids" > /sys/fs/cgroup/cgroup.subtree_control
mkdir /sys/fs/cgroup/t
echo "+cpu +memory +io +pids" > /sys/fs/cgroup/t/cgroup.subtree_control
mkdir /sys/fs/cgroup/t/thr /sys/fs/cgroup/t/mem /sys/fs/cgroup/t/sib /sys/fs/cgroup/t/io
echo "20000 100000" > /sys/fs/cgroup/t/thr/cpu.max
sh -c 'echo $$ > /sys/fs/cgroup/t/thr/cgroup.procs; while :; do :; done' & spin=$!
echo 100M > /sys/fs/cgroup/t/mem/memory.high
sh -c 'echo $$ > /sys/fs/cgroup/t/mem/cgroup.procs; exec /bin/ks-workload alloc 256' >/dev/null & alloc=$!
sh -c 'echo $$ > /sys/fs/cgroup/t/sib/cgroup.procs; exec sleep 60' & sib=$!
insmod /brd.ko rd_nr=1 rd_size=131072
sh -c 'echo $$ > /sys/fs/cgroup/t/io/cgroup.procs; exec dd if=/dev/zero of=/dev/ram0 bs=1M count=64 oflag=direct' 2>/dev/null
echo "DD $?"
sleep 2
/bin/kernstat cgroups --json --interval 3 --root /t --no-net > /tmp/cg.json 2>/tmp/cg.err
echo "CGRC $?"
echo "CGERR $(cat /tmp/cg.err)"
while read -r l; do echo "CG $l"; done < /tmp/cg.json
echo "CGIO $(cat /sys/fs/cgroup/t/io/io.stat)"
kill $alloc $sib
sleep 1
echo "WHYTHR $(/bin/kernstat why --here --window 3 --json 2>/dev/null)"
echo "SPINPID $spin"
kill $spin
sh -c 'echo $$ > /sys/fs/cgroup/t/mem/cgroup.procs; exec /bin/ks-workload alloc 256' >/dev/null & alloc=$!
sleep 1
echo "WHYMEM $(/bin/kernstat why --here --window 3 --json 2>/dev/null)"
echo "ALLOCPID $alloc"
kill $alloc
# The incident hooks on 6.1. An OOM kill in a group of its own, under `kernstat events`.
waitfor() { i=0; until grep -q "$1" "$2" || [ $i -gt 600 ]; do sleep 0.1; i=$((i+1)); done; }
mkdir /sys/fs/cgroup/t/oom
echo 48M > /sys/fs/cgroup/t/oom/memory.max
/bin/kernstat events --json > /tmp/ev.json 2>/tmp/ev.err &
ev=$!
waitfor watching /tmp/ev.err
k0=$(awk '/^oom_kill /{print $2}' /proc/vmstat)
sh -c 'echo $$ > /sys/fs/cgroup/t/oom/cgroup.procs; exec /bin/ks-workload alloc 256' >/dev/null 2>&1 & v=$!
wait $v
echo "OOMVICTIM $v"
echo "OOMKILLS $(( $(awk '/^oom_kill /{print $2}' /proc/vmstat) - k0 ))"
waitfor "\"pid\":$v," /tmp/ev.json
kill $ev
while read -r l; do echo "EV $l"; done < /tmp/ev.json
# 300 O_DIRECT writes of 4 KiB to a loop device (request-based, unlike brd).
insmod /loop.ko
dd if=/dev/zero of=/tmp/disk bs=1M count=8 2>/dev/null
losetup /dev/loop0 /tmp/disk
/bin/kernstat biolat --json -D 1 > /tmp/bio.json 2>/tmp/bio.err &
b=$!
waitfor Tracing /tmp/bio.err
w0=$(awk '{print $5}' /sys/block/loop0/stat)
dd if=/dev/zero of=/dev/loop0 bs=4k count=300 oflag=direct 2>/dev/null
echo "BIOWRITES $(( $(awk '{print $5}' /sys/block/loop0/stat) - w0 ))"
kill -INT $b; wait $b
while read -r l; do echo "BIO $l"; done < /tmp/bio.json
# TCP over lo under netem: a connect through 100 ms each way, then a transfer under 5 %
# loss; the kernel's RetransSegs around the whole of it.
insmod /sch_netem.ko
ip link set lo up
retrans() { awk '/^Tcp:/ {n++; if (n == 1) for (i = 1; i <= NF; i++) if ($i == "RetransSegs") c = i; if (n == 2) print $c}' /proc/net/snmp; }
/bin/kernstat tcp --json 1 > /tmp/tcp.json 2>/tmp/tcp.err &
t=$!
waitfor Tracing /tmp/tcp.err
r0=$(retrans)
/bin/tc qdisc add dev lo root netem delay 100ms 2>/tmp/tc.err
echo "TCADD $? $(cat /tmp/tc.err)"
/bin/ks-workload net-recv tcp 1000 >/tmp/r1.out &
waitfor ready /tmp/r1.out
/bin/ks-workload net-send tcp $(awk '/ready/{print $2}' /tmp/r1.out) 1000 1000 >/dev/null & c=$!
wait $c
echo "CONNPID $c"
waitfor got /tmp/r1.out
/bin/tc qdisc change dev lo root netem delay 0ms 2>/tmp/tc.err
/bin/ks-workload net-recv tcp 20000000 >/tmp/r2.out &
waitfor ready /tmp/r2.out
/bin/ks-workload net-send tcp $(awk '/ready/{print $2}' /tmp/r2.out) 20000000 65536 after=/tmp/go >/tmp/s2.out & s=$!
waitfor connected /tmp/s2.out
# Loss only once connected: a lost SYN-ACK is retransmitted without the tracepoint
# (tcp_rtx_synack) but counted in RetransSegs. 20 MB: ~300 segments of lo's 64 KiB, so
# that 5 % of them are certainly some.
/bin/tc qdisc change dev lo root netem loss 5% 2>>/tmp/tc.err
echo "TCCHANGE $? $(cat /tmp/tc.err)"
: > /tmp/go
wait $s
echo "SENDPID $s"
waitfor got /tmp/r2.out
sleep 2
echo "RETRANS $(( $(retrans) - r0 ))"
kill -INT $t; wait $t
while read -r l; do echo "TCP $l"; done < /tmp/tcp.json
"#;

#[test]
fn cgroups_on_a_pure_v2_machine_show_throttling_pressure_and_io() {
    // The host's tc drives netem in the guest (iproute2).
    if !kernstat_testkit::tool_gate("tc") {
        return;
    }
    let Some(stdout) = in_guest(CGROUP_GUEST, &["/usr/sbin/tc"]) else {
        return;
    };
    assert_eq!(field(&stdout, "DD"), "0", "{stdout}");
    assert_eq!(field(&stdout, "CGRC"), "0", "{stdout}");
    assert_eq!(field(&stdout, "CGERR"), "", "{stdout}");
    let groups: Vec<Value> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("CG {"))
        .map(|l| serde_json::from_str(&format!("{{{l}")).unwrap())
        .collect();
    let g = |p: &str| {
        groups
            .iter()
            .find(|g| g["path"] == p)
            .unwrap_or_else(|| panic!("{p} missing: {stdout}"))
    };
    let paths: Vec<&str> = groups.iter().map(|g| g["path"].as_str().unwrap()).collect();
    let mut sorted = paths.clone();
    sorted.sort();
    assert_eq!(sorted, ["/t", "/t/io", "/t/mem", "/t/sib", "/t/thr"]);
    assert_eq!(paths[0], "/t", "the parent first");
    for g in &groups {
        assert_eq!(g["layout"], "v2");
        assert!(g["missing"].as_array().unwrap().is_empty(), "{g}");
    }
    // A spinning shell under a 20 % quota: throttled nearly every period, at 20 %.
    let thr = g("/t/thr");
    assert_eq!(thr["cpu_max_percent"], 20.0);
    assert!(thr["throttled_periods"].as_u64().unwrap() >= 10, "{thr}");
    assert!(thr["throttled_percent"].as_f64().unwrap() >= 50.0, "{thr}");
    let cpu = thr["cpu_percent"].as_f64().unwrap();
    assert!((cpu - 20.0).abs() <= 3.0, "{cpu}");
    // 256 MiB asked under memory.high = 100M (no swap): stalled on memory, the sibling
    // not at all.
    let mem = g("/t/mem");
    assert_eq!(mem["memory"]["high"], 100 << 20);
    assert!(
        mem["psi_memory"]["some"]["avg10"].as_f64().unwrap() > 0.0,
        "{mem}"
    );
    assert!(mem["stall_percent"][1].as_f64().unwrap() > 0.0, "{mem}");
    assert!(mem["memory"]["high_events"].as_u64().unwrap() > 0, "{mem}");
    let sib = g("/t/sib");
    assert_eq!(sib["psi_memory"]["some"]["avg10"], 0.0, "{sib}");
    assert_eq!(sib["stall_percent"][1], 0.0, "{sib}");
    // 64 MiB written with O_DIRECT to the RAM disk (1:0), as io.stat says.
    let io = g("/t/io");
    let dev = &io["io"].as_array().unwrap()[0];
    assert_eq!(
        (dev["major"].as_u64(), dev["minor"].as_u64()),
        (Some(1), Some(0))
    );
    assert_eq!(dev["wbytes"], 64 << 20);
    assert!(field(&stdout, "CGIO").contains("wbytes=67108864"));
    assert_eq!(g("/t")["io"][0]["wbytes"], 64 << 20, "hierarchical");
    // `kernstat why` on each alone: the quota's spinner is throttling first, its group
    // and itself the culprits; the allocation under memory.high is memory first.
    let why = |key: &str| -> Value {
        serde_json::from_str(field(&stdout, key)).unwrap_or_else(|e| panic!("{key}: {e}: {stdout}"))
    };
    let named = |f: &Value, pid: &str, group: &str| {
        f["culprits"]
            .as_array()
            .unwrap()
            .iter()
            .chain(f["victims"].as_array().unwrap())
            .any(|p| {
                p["pid"].as_u64().is_some_and(|p| p.to_string() == pid) || p["cgroup"] == group
            })
    };
    let thr = why("WHYTHR");
    let first = &thr["findings"][0];
    assert_eq!(first["resource"], "throttling", "{thr:#}");
    assert_eq!(first["notable"], true, "{thr:#}");
    assert!(named(first, field(&stdout, "SPINPID"), "/t/thr"), "{thr:#}");
    let mem = why("WHYMEM");
    let first = &mem["findings"][0];
    assert_eq!(first["resource"], "memory", "{mem:#}");
    assert!(
        named(first, field(&stdout, "ALLOCPID"), "/t/mem"),
        "{mem:#}"
    );
    incident_hooks(&stdout);
}

/// The incident hooks on 6.1 (issue 34), against the guest kernel's own counters: one
/// OOM kill (vmstat's oom_kill) with its victim and group; a loop device's write
/// requests (its /sys/block stat); a connect through netem's 100 ms each way, and the
/// retransmits under 5 % loss (RetransSegs).
fn incident_hooks(stdout: &str) {
    let lines = |key: &str| -> Vec<Value> {
        stdout
            .lines()
            .filter_map(|l| l.strip_prefix(key))
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{key}{l}: {e}")))
            .collect()
    };
    let victim: u64 = field(stdout, "OOMVICTIM").parse().unwrap();
    assert_eq!(field(stdout, "OOMKILLS"), "1", "{stdout}");
    let kills: Vec<Value> = lines("EV ")
        .into_iter()
        .filter(|e| e["pid"] == victim)
        .collect();
    assert_eq!(kills.len(), 1, "{stdout}");
    assert_eq!(kills[0]["kind"], "oom_kill", "{stdout}");
    assert_eq!(kills[0]["group"], "/t/oom", "{stdout}");
    assert_eq!(kills[0]["limit"], "/t/oom", "{stdout}");

    let writes: u64 = field(stdout, "BIOWRITES").parse().unwrap();
    assert_eq!(writes, 300, "{stdout}");
    let counted: u64 = lines("BIO ")
        .iter()
        .flat_map(|iv| iv["disks"].as_array().unwrap().clone())
        .filter(|d| d["disk"] == "loop0" && d["op"] == "write")
        .map(|d| d["count"].as_u64().unwrap())
        .sum();
    assert_eq!(counted, writes, "{stdout}");

    let tcp = lines("TCP ");
    let conn: u64 = field(stdout, "CONNPID").parse().unwrap();
    let connect = tcp
        .iter()
        .flat_map(|iv| iv["connects"].as_array().unwrap().clone())
        .find(|c| c["pid"] == conn)
        .unwrap_or_else(|| panic!("no connect of {conn}: {stdout}"));
    let ms = connect["connect_mean_ms"].as_f64().unwrap();
    assert_eq!(field(stdout, "TCADD"), "0", "{stdout}");
    assert_eq!(field(stdout, "TCCHANGE"), "0", "{stdout}");
    assert!(
        (200.0..1000.0).contains(&ms),
        "{ms} ms through 2 x 100 ms: {stdout}"
    );
    let kernel: u64 = field(stdout, "RETRANS").parse().unwrap();
    let ours: u64 = tcp
        .iter()
        .map(|iv| iv["retransmits"].as_u64().unwrap())
        .sum();
    assert!(kernel > 0, "5 % loss gave no retransmits: {stdout}");
    assert_eq!(ours, kernel, "{stdout}");
    let sender: u64 = field(stdout, "SENDPID").parse().unwrap();
    let by_sender: u64 = tcp
        .iter()
        .flat_map(|iv| iv["processes"].as_array().unwrap().clone())
        .filter(|p| p["pid"] == sender)
        .map(|p| p["retransmits"].as_u64().unwrap())
        .sum();
    assert!(by_sender > 0, "none on the sender: {stdout}");
}

/// One guest at a time: two TCG guests on a 2-CPU host slow each other down.
/// Runs `script` in the 6.1 guest (scripts/oldkernel.sh) with kernstat and ks-workload
/// in it, one guest at a time; its output. None (skipped) without root.
fn in_guest(script: &str, more_binaries: &[&str]) -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !gate("root (qemu, apt-get)", root, || "not root".into()) {
        return None;
    }
    let _one = one_guest();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("guest.sh");
    std::fs::write(&path, script).unwrap();
    let runner = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/oldkernel.sh");
    let out = Command::new(runner)
        .arg(&path)
        .arg(kernstat_testkit::front_bin())
        .arg(env!("CARGO_BIN_EXE_kernstat-full"))
        .arg(kernstat_testkit::workload_bin())
        .args(more_binaries)
        .output()
        .expect("run scripts/oldkernel.sh");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "oldkernel.sh failed: {}\n{stdout}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(stdout)
}

fn one_guest() -> std::sync::MutexGuard<'static, ()> {
    static ONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE.lock().unwrap_or_else(|e| e.into_inner())
}

fn field<'a>(out: &'a str, key: &str) -> &'a str {
    out.lines()
        .find_map(|l| l.strip_prefix(key).map(str::trim))
        .unwrap_or_else(|| panic!("guest printed no {key}: {out}"))
}

#[test]
fn sampler_loads_and_agrees_with_proc_on_linux_6_1() {
    let Some(stdout) = in_guest(GUEST, &[]) else {
        return;
    };
    let kernel = field(&stdout, "=== kernel");
    assert!(kernel.starts_with("6.1."), "booted {kernel}");
    assert_eq!(field(&stdout, "RC"), "0", "{stdout}");
    assert_eq!(field(&stdout, "ERR"), "", "no fallback notice: {stdout}");

    let snap: Value = serde_json::from_str(field(&stdout, "SNAP")).unwrap();
    assert_eq!(snap["source"], "bpf", "BPF loads on 6.1");
    // One of two CPUs spins: about half the machine, and about one core for the shell.
    let cpu = snap["cpu_percent"].as_f64().unwrap();
    assert!((40.0..=65.0).contains(&cpu), "machine CPU {cpu}%");
    let busy: u64 = field(&stdout, "BUSYPID").parse().unwrap();
    let p = snap["procs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == busy)
        .expect("the spinning shell is listed");
    assert!(p["cpu_percent"].as_f64().unwrap() > 80.0, "{p}");
    // RSS through the pre-6.2 rss_stat layout, against /proc/PID/statm (pages).
    let statm_pages: u64 = field(&stdout, "STATM")
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let ours = p["rss_bytes"].as_u64().unwrap();
    assert!(ours > 0, "{p}");
    assert!(
        ours.abs_diff(statm_pages * 4096) <= 64 * 4096,
        "rss {ours} vs statm {statm_pages} pages"
    );

    let bench: Value = serde_json::from_str(field(&stdout, "BENCH")).unwrap();
    assert_eq!(bench["source"], "bpf");
    assert_eq!(bench["allocs_per_sample"], 0.0);

    // ps: the sleepable iterator loads on 6.1, and a stock kernel shows PID 1 in it
    // (the development sandbox's kernel hides it: docs/limits.md).
    assert_eq!(field(&stdout, "PSRC"), "0", "{stdout}");
    assert_eq!(field(&stdout, "PSERR"), "", "{stdout}");
    let init: Value = serde_json::from_str(field(&stdout, "PS1")).unwrap();
    assert_eq!(init["pid"], 1);
    assert_eq!(init["source"], "bpf", "PID 1 came from the iterator itself");
    assert_eq!(
        init["cmd"], "/bin/sh /init",
        "its command line, read from its memory"
    );
    let sh: Value = serde_json::from_str(field(&stdout, "PSBUSY")).unwrap();
    assert_eq!(sh["pid"], busy);
    assert!(sh["rss_bytes"].as_u64().unwrap() > 0);
    // Without command lines the reader also loads ps_run, which 6.1 cannot run (no
    // open-coded task iterator): the object still loads and the iterator is read.
    assert_eq!(field(&stdout, "LIGHTRC"), "0", "{stdout}");
    assert_eq!(field(&stdout, "LIGHTERR"), "", "{stdout}");
    let light: Value = serde_json::from_str(field(&stdout, "LIGHTROW")).unwrap();
    assert_eq!(
        (&light["pid"], &light["source"]),
        (&busy.into(), &"bpf".into())
    );
    // Workqueue workers named as /proc names them ("kworker/0:1-events": the worker's
    // description read through the kthread's data, WORKER_DESC_LEN relocated), for
    // every worker whose /proc name did not change around the read.
    let comms = |tag: &str| -> std::collections::HashMap<u64, String> {
        stdout
            .lines()
            .filter_map(|l| l.strip_prefix(tag))
            .filter_map(|l| {
                let (pid, comm) = l.trim().split_once(' ')?;
                Some((pid.parse().ok()?, comm.to_string()))
            })
            .collect()
    };
    let (before, after) = (comms("KCOMM1 "), comms("KCOMM2 "));
    let mut suffixed = 0;
    for row in stdout.lines().filter_map(|l| l.strip_prefix("PSALL ")) {
        let r: Value = serde_json::from_str(row).unwrap();
        let pid = r["pid"].as_u64().unwrap();
        let (Some(a), Some(b)) = (before.get(&pid), after.get(&pid)) else {
            continue;
        };
        if a != b {
            continue;
        }
        let ours = r["comm"].as_str().unwrap_or("");
        // A kworker's suffix names the workqueue it ran last, which can change and
        // change back between the two /proc reads while the iterator reads it once
        // (seen in CI: "-events_power_efficient" between two "-events"): the worker's
        // name must match, and the suffix be there when /proc has one.
        match (a.split_once('-'), ours.split_once('-')) {
            (Some((name, _)), Some((our_name, suffix))) if a.starts_with("kworker/") => {
                assert_eq!(our_name, name, "kworker {pid} on 6.1: {ours:?} vs {a:?}");
                assert!(!suffix.is_empty(), "kworker {pid} on 6.1: {ours:?}");
            }
            _ => assert_eq!(ours, a.as_str(), "kworker {pid} on 6.1"),
        }
        suffixed += usize::from(a.contains('-') || a.contains('+'));
    }
    assert!(
        suffixed > 0,
        "no workqueue worker with a suffix to check: {stdout}"
    );
    assert_eq!(
        field(&stdout, "PINRC"),
        "0",
        "pinning works on 6.1: {stdout}"
    );
    assert_eq!(
        field(&stdout, "PINNED"),
        "KSPS",
        "the pin reads as a kernstat stream"
    );

    // Per-process network on 6.1: no socket tracepoints there, so the fexit hooks on
    // __sock_sendmsg/sock_recvmsg count, for the caller as on 6.3+. 4 MB over TCP between
    // two processes that stay alive, read from a daemon's snapshot.
    let doctor: Value = serde_json::from_str(field(&stdout, "NETDOCTOR")).unwrap();
    assert_eq!(
        doctor["paths"]["network"], "fexit on __sock_sendmsg/sock_recvmsg, by caller",
        "{doctor}"
    );
    let pids: Vec<u64> = field(&stdout, "NETPIDS")
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(
        field(&stdout, "NETSENT").split_whitespace().nth(1),
        Some("4000000")
    );
    assert_eq!(
        field(&stdout, "NETGOT").split_whitespace().nth(1),
        Some("4000000")
    );
    let derr = field(&stdout, "NETDERR");
    assert!(
        derr.starts_with("kernstat daemon: listening")
            && !derr.contains("unavailable")
            && !derr.contains("will not be recorded"),
        "the daemon says only that it listens (the exits hook loads on 6.1): {derr}"
    );
    // The flight recorder on 6.1: a process that burned 300 ms of one thread's time
    // and ended between two samples is recorded with the CPU time the kernel charged it
    // over its life (wait4's rusage: in the slow guest, starting the program costs more
    // than on the host), as the exit hook reads it from signal_struct there. The hook
    // runs before the last part of the exit path, which rusage includes.
    let ended: u64 = field(&stdout, "RECX")
        .parse()
        .unwrap_or_else(|_| panic!("the ended process in the record: {stdout}"));
    let charged: u64 = field(&stdout, "BURNCPU").parse().unwrap();
    assert!(
        charged >= 300_000_000 && ended.abs_diff(charged) <= charged / 50,
        "recorded {ended} ns of CPU, wait4 charged {charged} ns"
    );
    assert_eq!(
        field(&stdout, "DALIVE"),
        "yes",
        "the daemon still runs: {derr} {}",
        field(&stdout, "NETSTATUS")
    );
    let snap: Value = serde_json::from_str(field(&stdout, "NETSNAP")).unwrap();
    let snap = &snap["snapshot"];
    assert_eq!(
        snap["net"]["attribution"],
        "caller",
        "{}; the daemon said {derr}; status {}",
        snap["net"],
        field(&stdout, "NETSTATUS")
    );
    let row = |pid: u64| {
        snap["procs"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["pid"] == pid)
            .unwrap_or_else(|| panic!("pid {pid} not in the snapshot"))
            .clone()
    };
    let (sender, receiver) = (row(pids[0]), row(pids[1]));
    // The issue's budget is 1 %; the hooks count every byte, so the test asks for all.
    assert_eq!(sender["net_tx_bytes"], 4_000_000, "{sender}");
    assert_eq!(sender["net_rx_bytes"], 0, "{sender}");
    assert_eq!(receiver["net_rx_bytes"], 4_000_000, "{receiver}");
    assert_eq!(receiver["net_tx_bytes"], 0, "{receiver}");
    eprintln!(
        "6.1 fexit: sender {} bytes sent, receiver {} received, of 4000000",
        sender["net_tx_bytes"], receiver["net_rx_bytes"]
    );
}
