#!/bin/bash
# bench.sh [section...]: reproduces the numbers in docs/measured.md. Run as root on an
# otherwise idle machine: `make bench`, or `scripts/bench.sh sample firstline` for some.
# Sections: sample firstline rss cost switch pipe ps runqlat writes daemon metrics providers shm bardaemon burst prompt top net biolat tcp cgroups record view, and screenshot and rezolus (default: all but screenshot). Timings are medians of
# many runs; nothing is pinned unless said.
set -euo pipefail
cd "$(dirname "$0")/.."
K=./target/release/kernstat
W=./target/release/ks-workload
FL=./target/release/ks-first-line
cargo build --release -q -p kernstat -p kernstat-front -p kernstat-testkit

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# Idle processes so that the machine has about $1 tasks, in their own session so that
# stop_fleet can end them all; prints the session id once every process is running.
fleet() {
  local want=$1 have fifo
  have=$(ls -d /proc/[0-9]* 2>/dev/null | wc -l)
  (( want > have )) || { echo ""; return; }
  fifo=$(mktemp -u); mkfifo "$fifo"
  setsid $W idle $((want - have - 1)) >"$fifo" &
  local p=$!
  read -r _ <"$fifo"
  rm -f "$fifo"
  echo $p
}
stop_fleet() {
  [ -n "${1:-}" ] || return 0
  kill -- -"$1" 2>/dev/null || true
  while pgrep -s "$1" >/dev/null 2>&1; do sleep 0.2; done
}

section_sample() {
  echo "== one bar sample (--bench 1000): BPF (its walk by BPF_PROG_RUN where the kernel has it, then the task iterator's) and procfs paths (Waybar's format), and a text line that shows no process"
  for tasks in now 300 10000; do
    local f=""
    [ "$tasks" != now ] && f=$(fleet "$tasks")
    $K bar --bench 1000 --json
    KERNSTAT_WALK=iterator $K bar --bench 1000 --json
    $K bar --bench 1000 --json --no-bpf
    $K bar --bench 1000 --json --format text
    stop_fleet "$f"
  done
}

section_firstline() {
  echo "== time from start to the first line (median of 21, microseconds)"
  echo -n "bpf: "; for _ in $(seq 21); do $FL $K bar --no-lock; done | median
  echo -n "procfs: "; for _ in $(seq 21); do $FL $K bar --no-lock --no-bpf; done | median
}

section_rss() {
  echo "== resident memory after 60 s of 'kernstat bar' at 2 s (VmRSS)"
  $K bar --no-lock >/dev/null &
  local p=$!
  sleep 60
  grep VmRSS /proc/$p/status
  kill $p; wait $p 2>/dev/null || true
}

# Observer cost over $1 seconds: kernstat's own --self-cost figure, and independently
# /proc/PID/schedstat plus the kernel's BPF run time of the sampler's hooks (bpftool).
observe() {
  local secs=$1 p out
  out=$(mktemp)
  sysctl -qw kernel.bpf_stats_enabled=1
  $K bar --no-lock --json --self-cost --interval 2 >"$out" &
  p=$!
  sleep 1
  local s0 b0 t0
  s0=$(cut -d' ' -f1 /proc/$p/schedstat)
  b0=$(hook_ns)
  t0=$(date +%s%N)
  sleep "$secs"
  local s1 b1 t1
  s1=$(cut -d' ' -f1 /proc/$p/schedstat)
  b1=$(hook_ns)
  t1=$(date +%s%N)
  kill $p; wait $p 2>/dev/null || true
  sysctl -qw kernel.bpf_stats_enabled=0
  awk -v s=$((s1 - s0)) -v b=$((b1 - b0)) -v t=$((t1 - t0)) 'BEGIN {
    printf "independent: process %.4f%% + hooks %.4f%% = %.4f%% of one core\n", s/t*100, b/t*100, (s+b)/t*100 }'
  echo -n "self-reported (median of ticks): "
  grep -o '"self_cost_percent":[0-9.e-]*' "$out" | cut -d: -f2 | tail -n +2 | median
  rm -f "$out"
}

hook_ns() {
  bpftool prog show -j 2>/dev/null | tr '}' '\n' |
    grep -E '"name":"(sample_(exit|free)|tp_send|tp_recv|fx_send|fx_recv)"' | grep -o '"run_time_ns":[0-9]*' | cut -d: -f2 |
    awk '{s+=$1} END {print s+0}'
}

section_cost() {
  echo "== observer cost at a 2 s interval, idle machine (60 s)"
  observe 60
}

section_switch() {
  echo "== observer cost at a 2 s interval under stress-ng --switch 2 (60 s)"
  stress-ng --switch 2 --timeout 70 >/dev/null 2>&1 &
  local s=$!
  sleep 2
  observe 60
  kill $s 2>/dev/null; wait $s 2>/dev/null || true
}

section_pipe() {
  echo "== perf bench sched pipe, pinned to CPU 0, 7 alternating runs each (ops/s, median)"
  local base=() with=()
  for _ in $(seq 7); do
    base+=("$(taskset -c 0 perf bench sched pipe -l 200000 2>/dev/null | awk '/ops\/sec/ {print $1}')")
    $K bar --no-lock --interval 2 >/dev/null &
    local p=$!
    sleep 0.5
    with+=("$(taskset -c 0 perf bench sched pipe -l 200000 2>/dev/null | awk '/ops\/sec/ {print $1}')")
    kill $p; wait $p 2>/dev/null || true
  done
  local b w
  b=$(printf '%s\n' "${base[@]}" | median)
  w=$(printf '%s\n' "${with[@]}" | median)
  echo "without kernstat: $b  with kernstat bar: $w  ratio: $(awk -v b="$b" -v w="$w" 'BEGIN {printf "%.3f", w/b}')"
}

section_ps() {
  echo "== ps: iterator read vs procfs walk of the same fields, alternating (--bench 50)"
  echo "== and whole processes: kernstat ps (pinned iterator) vs procps ps (hyperfine medians)"
  $K ps --pin >/dev/null 2>&1
  for tasks in 300 10000; do
    local f
    f=$(fleet "$tasks")
    echo "-- $(ls -d /proc/[0-9]* 2>/dev/null | wc -l) processes"
    $K ps --bench 50 --json
    $K ps --bench 50 --json --fields pid,ppid,uid,comm,rss,time
    hyperfine -N --warmup 5 -r 60 --export-json /tmp/kernstat-ps.json \
      "$K ps --fields pid,ppid,uid,comm,rss,time" 'ps -eo pid,ppid,uid,comm,rss,time' >/dev/null 2>&1
    awk -v RS='"median":' 'NR>1 {split($0, a, ","); m[NR-1]=a[1]} END {
      printf "kernstat ps %.2f ms, procps ps %.2f ms, %.1fx\n", m[1]*1000, m[2]*1000, m[2]/m[1] }' /tmp/kernstat-ps.json
    stop_fleet "$f"
  done
  $K ps --unpin >/dev/null 2>&1
}

# ns per event of each named program (bpftool prog show, with bpf_stats_enabled).
# Mean run time of the BPF programs named $1 that process $2 holds ("N ns x COUNT"),
# found by the prog_id of its descriptors in /proc/PID/fdinfo. By owner: a machine can
# carry other programs of the same name (this VM has a long-lived `sched_switch` that is
# neither tool's). Without $2, every program of that name.
# Every BPF program process $1 holds (every program on the machine when $1 is empty), a
# line each: name, run time (ns), runs (kernel.bpf_stats_enabled must be on to count).
progs_of() {
  bpftool prog show -j 2>/dev/null | python3 -c '
import glob, json, sys
ids = None
if len(sys.argv) > 1 and sys.argv[1]:
    ids = set()
    for f in glob.glob(f"/proc/{sys.argv[1]}/fdinfo/*"):
        try:
            ids |= {int(l.split()[1]) for l in open(f) if l.startswith("prog_id:")}
        except OSError:
            pass
for p in json.load(sys.stdin):
    if ids is None or p.get("id") in ids:
        print(p.get("name", "?"), p.get("run_time_ns", 0), p.get("run_cnt", 0))' "${1:-}"
}

prog_ns() {
  progs_of "${2:-}" | awk -v n="$1" '$1 == n {t += $2; c += $3} END {if (c) printf "%.0f ns x %d\n", t / c, c; else print "n/a"}'
}

section_runqlat() {
  echo "== runqlat per-event cost: kernstat and libbpf-tools attached together, same run (10 s,"
  echo "   stress-ng --cpu 4 plus perf bench sched pipe for switches; kernel BPF stats)"
  sysctl -qw kernel.bpf_stats_enabled=1
  /usr/sbin/runqlat 12 1 >/dev/null &
  local a=$!
  sleep 1
  $K runqlat 11 1 >/dev/null 2>&1 &
  local b=$!
  sleep 1
  stress-ng --cpu 4 --timeout 8 >/dev/null 2>&1 &
  perf bench sched pipe -l 400000 >/dev/null 2>&1 &
  sleep 8
  echo "sched_switch:  kernstat $(prog_ns rq_switch $b)   libbpf-tools $(prog_ns sched_switch $a)"
  echo "sched_wakeup:  kernstat $(prog_ns rq_wakeup $b)   libbpf-tools $(prog_ns sched_wakeup $a)"
  wait $a $b 2>/dev/null
  wait
  sysctl -qw kernel.bpf_stats_enabled=0
  echo "== perf bench sched pipe pinned to CPU 0 with each tracer attached alone (7 alternating runs, ops/s median)"
  local with_k=() with_l=() none=()
  for _ in $(seq 7); do
    none+=("$(taskset -c 0 perf bench sched pipe -l 200000 2>/dev/null | awk '/ops\/sec/ {print $1}')")
    $K runqlat 30 1 >/dev/null 2>&1 &
    local p=$!; sleep 1
    with_k+=("$(taskset -c 0 perf bench sched pipe -l 200000 2>/dev/null | awk '/ops\/sec/ {print $1}')")
    kill -INT $p; wait $p 2>/dev/null
    /usr/sbin/runqlat 30 1 >/dev/null 2>&1 &
    p=$!; sleep 1
    with_l+=("$(taskset -c 0 perf bench sched pipe -l 200000 2>/dev/null | awk '/ops\/sec/ {print $1}')")
    kill -INT $p; wait $p 2>/dev/null
  done
  local n k l
  n=$(printf '%s\n' "${none[@]}" | median)
  k=$(printf '%s\n' "${with_k[@]}" | median)
  l=$(printf '%s\n' "${with_l[@]}" | median)
  echo "no tracer: $n  kernstat runqlat: $k  libbpf-tools runqlat: $l  (kernstat/libbpf-tools $(awk -v k="$k" -v l="$l" 'BEGIN {printf "%.3f", k/l}'))"
}

# Median "write NS getppid NS" of 7 runs of ks-workload syscall-cost on CPU 0.
syscall_cost() {
  local w="" g="" out
  for _ in $(seq 7); do
    out=$(taskset -c 0 $W syscall-cost 2000000)
    w="$w $(echo "$out" | awk '{print $2}')"
    g="$g $(echo "$out" | awk '{print $4}')"
  done
  echo "write $(echo $w | tr ' ' '\n' | median) ns, getppid $(echo $g | tr ' ' '\n' | median) ns"
}

section_writes() {
  echo "== writes: start to attached (median of 11, ms; the command's own figure)"
  local a=""
  for _ in $(seq 11); do
    a="$a $($K writes 1 1 2>&1 >/dev/null | grep -o 'attached in [0-9.]*' | awk '{print $3}')"
  done
  echo "$(echo $a | tr ' ' '\n' | median) ms ($($K writes 1 1 2>&1 >/dev/null | grep -o '(fexit\|(tracepoints' | tr -d '('))"
  echo "== writes: resident memory while tracing every process (VmRSS after 5 s)"
  $K writes 10 1 >/dev/null 2>&1 &
  local p=$!
  sleep 5; grep VmRSS /proc/$p/status; kill -INT $p; wait $p 2>/dev/null
  echo "== cost of 1-byte writes and of getppid for a process that is NOT traced (CPU 0, medians)"
  echo "nothing attached:                 $(syscall_cost)"
  $K writes -p 1 60 1 >/dev/null 2>&1 & p=$!; sleep 1
  echo "kernstat writes -p 1:             $(syscall_cost)"
  kill -INT $p; wait $p 2>/dev/null
  if command -v bpftrace >/dev/null; then
    bpftrace -e 'tracepoint:syscalls:sys_enter_write /pid == 1/ { @ = hist(args->count); }' >/dev/null 2>&1 & p=$!; sleep 3
    echo "bpftrace sys_enter_write /pid==1/: $(syscall_cost)"
    kill -INT $p; wait $p 2>/dev/null
  fi
  echo "== cost for the traced process itself, and per-event program cost (BPF stats)"
  sysctl -qw kernel.bpf_stats_enabled=1
  $K writes -c ks-workload 60 1 >/dev/null 2>&1 & p=$!; sleep 1
  echo "kernstat writes -c ks-workload:   $(syscall_cost)"
  echo "program cost per traced write: enter $(prog_ns tp_enter_write), exit $(prog_ns tp_exit_write), fexit $(prog_ns fx_write)"
  kill -INT $p; wait $p 2>/dev/null
  if command -v bpftrace >/dev/null; then
    bpftrace -e 'tracepoint:syscalls:sys_enter_write /comm == "ks-workload"/ { @ = hist(args->count); }' >/dev/null 2>&1 & p=$!; sleep 3
    echo "bpftrace, traced:                 $(syscall_cost)"
    echo "bpftrace program cost per write: $(prog_ns sys_enter_write)"
    kill -INT $p; wait $p 2>/dev/null
  fi
  sysctl -qw kernel.bpf_stats_enabled=0
}

# hyperfine's median of a command, in milliseconds.
hf_median_ms() {
  local j; j=$(mktemp)
  hyperfine -N --warmup 100 --runs 2000 --export-json "$j" "$@" >/dev/null 2>&1
  grep -o '"median": *[0-9.e-]*' "$j" | head -1 | awk -F: '{printf "%.3f ms\n", $2*1000}'
  rm -f "$j"
}

section_daemon() {
  local bench dir p comb="" cp=""
  cargo bench -q -p kernstat-daemon --bench daemon --no-run 2>/dev/null
  bench=$(ls -t target/release/deps/daemon-* | grep -v '\.d$' | head -1)
  echo "== daemon in-process (cargo bench): cache read, held-connection round trip, throughput"
  for pin in "" --pin --pin-same; do "$bench" --secs 3 $pin; done
  dir=$(mktemp -d)
  $K daemon --socket "$dir/sock" 2>/dev/null & p=$!
  sleep 1
  # beachcomber, the peer, when installed (cargo install beachcomber): same client load.
  if command -v comb >/dev/null; then
    comb=$(command -v comb); $comb get load.one >/dev/null
    cp=$(cat /tmp/beachcomber-$(id -u)/daemon.pid 2>/dev/null || true)
  fi
  for mode in unpinned same split; do
    local flag=""
    case $mode in
      same) flag=--pin-same; taskset -a -p -c 0 $p >/dev/null; [ -n "$cp" ] && taskset -a -p -c 0 "$cp" >/dev/null ;;
      split) flag=--pin; taskset -a -p -c 0 $p >/dev/null; [ -n "$cp" ] && taskset -a -p -c 0 "$cp" >/dev/null ;;
    esac
    echo "== 'kernstat daemon' process, clients $mode"; "$bench" --secs 3 --socket "$dir/sock" $flag
    [ -n "$cp" ] && { echo "== comb daemon, clients $mode"; "$bench" --secs 3 --socket /tmp/beachcomber-$(id -u)/sock $flag; }
  done
  taskset -a -p -c 0-$(($(nproc) - 1)) $p >/dev/null
  echo "== whole process, hyperfine median of 2000 runs"
  echo "kernstat get load.one (daemon):    $(hf_median_ms "$K get load.one --socket $dir/sock")"
  echo "kernstat get load.one (no daemon): $(hf_median_ms "$K get load.one --socket $dir/none")"
  [ -n "$comb" ] && echo "comb get load.one:                 $(hf_median_ms "$comb get load.one")"
  echo "== daemon cost over 60 s idle at 2 s, and resident memory"
  sysctl -qw kernel.bpf_stats_enabled=1
  local s0 b0 t0 s1 b1 t1
  s0=$(cut -d' ' -f1 /proc/$p/schedstat); b0=$(hook_ns); t0=$(date +%s%N)
  sleep 60
  s1=$(cut -d' ' -f1 /proc/$p/schedstat); b1=$(hook_ns); t1=$(date +%s%N)
  sysctl -qw kernel.bpf_stats_enabled=0
  awk -v s=$((s1 - s0)) -v b=$((b1 - b0)) -v t=$((t1 - t0)) 'BEGIN {
    printf "process %.4f%% + hooks %.4f%% = %.4f%% of one core\n", s/t*100, b/t*100, (s+b)/t*100 }'
  echo "kernstat daemon $(grep VmRSS /proc/$p/status)"
  [ -n "$cp" ] && echo "comb daemon $(grep VmRSS /proc/$cp/status)"
  kill -TERM $p; wait $p 2>/dev/null || true
  rm -rf "$dir"
}

# Scrapes of kernstat's /metrics beside node_exporter's, one after the other in the same
# run: wall time per scrape (p50, p99), CPU per scrape (the server's threads' run time
# from /proc/PID/task/*/schedstat over the batch / scrapes), bytes, resident memory.
# kernstat samples every 60 s here, so a batch measures serving only; node_exporter
# collects inside each scrape. Then the daemon's whole cost at a 15 s interval.
# `scrape_bench fresh PID PORT N`: the CPU of scrapes that meet a new sample instead.
scrape_bench() {
  python3 - "$@" <<'PY'
import http.client, sys, time, glob, statistics
def cpu(pid):
    t = 0
    for f in glob.glob(f"/proc/{pid}/task/*/schedstat"):
        try: t += int(open(f).read().split()[0])
        except OSError: pass
    return t
def bench(name, pid, port, n, accept):
    c = http.client.HTTPConnection("127.0.0.1", port)
    walls, size = [], 0
    for _ in range(5):
        c.request("GET", "/metrics", headers={"Accept": accept}); c.getresponse().read()
    c0 = cpu(pid)
    for _ in range(n):
        t = time.perf_counter()
        c.request("GET", "/metrics", headers={"Accept": accept})
        body = c.getresponse().read()
        walls.append(time.perf_counter() - t)
        size = len(body)
    c1 = cpu(pid)
    walls.sort()
    rss = [l for l in open(f"/proc/{pid}/status") if l.startswith("VmRSS")][0].split()[1]
    print(f"{name:16} p50 {walls[n//2]*1e3:.3f} ms  p99 {walls[int(n*0.99)]*1e3:.3f} ms  "
          f"cpu {(c1-c0)/n/1e6:.3f} ms/scrape  {size} bytes  RSS {int(rss)/1024:.1f} MiB")
def fresh(pid, port, n, accept):
    # The daemon's CPU over one scrape that meets a sample no scrape has encoded yet
    # (a second after the last: the daemon samples every second), and over the next.
    c = http.client.HTTPConnection("127.0.0.1", port)
    first, second = [], []
    for _ in range(n):
        time.sleep(1.0)
        a = cpu(pid); c.request("GET", "/metrics", headers={"Accept": accept}); c.getresponse().read()
        b = cpu(pid); c.request("GET", "/metrics", headers={"Accept": accept}); c.getresponse().read()
        first.append((b - a) / 1e6); second.append((cpu(pid) - b) / 1e6)
    print(f"CPU per scrape: meeting a new sample p50 {statistics.median(first):.3f} ms, "
          f"serving the encoded bytes p50 {statistics.median(second):.3f} ms ({n} of each)")
om = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5"
pb = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited"
if sys.argv[1] == "fresh":
    fresh(*map(int, sys.argv[2:5]), om)
    sys.exit()
kpid, kport, npid, nport, n = map(int, sys.argv[1:6])
for _ in range(2):
    bench("kernstat", kpid, kport, n, om)
    bench("kernstat (pb)", kpid, kport, n, pb)
    bench("node_exporter", npid, nport, n, om)
PY
}

section_metrics() {
  local ne
  ne=$(command -v prometheus-node-exporter || command -v node_exporter || true)
  [ -n "$ne" ] || { echo "== metrics: prometheus-node-exporter is not installed"; return; }
  local f dir p np
  f=$(fleet 300)
  dir=$(mktemp -d)
  echo "== /metrics scrapes at $(ls -d /proc/[0-9]* | wc -l) processes: kernstat vs $($ne --version 2>&1 | head -1)"
  $K daemon --socket "$dir/sock" --interval 60 --metrics 127.0.0.1:19661 2>/dev/null &
  p=$!
  $ne --web.listen-address=127.0.0.1:19662 >/dev/null 2>&1 &
  np=$!
  sleep 3
  scrape_bench $p 19661 $np 19662 200
  kill -TERM $p $np; wait $p $np 2>/dev/null || true
  echo "== kernstat daemon --metrics, whole cost over 120 s at a 15 s interval, scraped every 15 s"
  $K daemon --socket "$dir/sock" --interval 15 --metrics 127.0.0.1:19661 2>/dev/null &
  p=$!
  sleep 2
  local m0 m1 t0 t1
  scrape() { curl -s 127.0.0.1:19661/metrics | awk '/^kernstat_self_cpu_seconds_total /{s=$2} /^kernstat_bpf_program_run_seconds_total/{b+=$2} END {printf "%.9f %.9f\n", s, b}'; }
  m0=$(scrape); t0=$(date +%s%N)
  for _ in $(seq 8); do sleep 15; curl -s -o /dev/null 127.0.0.1:19661/metrics; done
  m1=$(scrape); t1=$(date +%s%N)
  awk -v a="$m0" -v b="$m1" -v t=$((t1 - t0)) 'BEGIN { split(a, x, " "); split(b, y, " ");
    s = (y[1] - x[1]) * 1e9; h = (y[2] - x[2]) * 1e9;
    printf "process %.4f%% + BPF hooks %.4f%% = %.4f%% of one core\n", s/t*100, h/t*100, (s+h)/t*100 }'
  grep VmRSS /proc/$p/status
  kill -TERM $p; wait $p 2>/dev/null || true
  echo "== a scrape that meets a new sample: daemon at a 1 s interval, one scrape a second"
  echo "   (encodes), then one right after (serves the same bytes); the daemon's CPU over each"
  echo "   (OLD=path/to/kernstat alternates another build, three rounds)"
  local b r
  for r in 1 2 3; do
    for b in $K ${OLD:-}; do
      $b daemon --socket "$dir/sock" --interval 1 --metrics 127.0.0.1:19661 2>/dev/null &
      p=$!
      sleep 3
      echo -n "$b: "
      scrape_bench fresh $p 19661 30
      kill -TERM $p; wait $p 2>/dev/null || true
    done
    [ -n "${OLD:-}" ] || break
  done
  stop_fleet "$f"
  rm -rf "$dir"
}


# The context providers beside beachcomber 0.9.1's (crates.io), on one fake home: each
# one's compute time (median of 3,000, pinned to CPU 0) and the fields both report.
section_providers() {
  echo "== context providers: kernstat vs beachcomber 0.9.1"
  (cd bench/providers && cargo build --release -q && ./target/release/kernstat-bench-providers 3000)
}

# `kernstat get` answered from the shared-memory snapshot and, with the file moved
# away, from the socket: whole process, hyperfine, pinned to CPU 0, alternating.
# `kernstat get` as a whole process beside /bin/true (hyperfine -N, 2,000 runs each, all
# commands side by side in one hyperfine run, pinned to CPU 0, two rounds): the small
# `kernstat` answering from the snapshot, `kernstat-full` doing the same, and `kernstat`
# asked for a key the snapshot never holds (sudo.active is answered per asking process:
# it execs kernstat-full, which asks the socket).
section_shm() {
  echo "== kernstat get as a process: medians (hyperfine -N, 2,000 runs, pinned to CPU 0)"
  local dir j; dir=$(mktemp -d); j=$(mktemp)
  taskset -c 1 $K daemon --no-bpf --socket "$dir/sock" 2>/dev/null &
  local p=$!
  while [ ! -e "$dir/snapshot" ]; do sleep 0.1; done
  sleep 1
  for round in 1 2; do
    echo "-- round $round"
    taskset -c 0 hyperfine -N --warmup 100 --runs 2000 --export-json "$j" /bin/true \
      "$K get uname.release --socket $dir/sock" \
      "${K}-full get uname.release --socket $dir/sock" \
      "$K get sudo.active --socket $dir/sock" >/dev/null 2>&1
    python3 -c 'import json,sys
for r in json.load(open(sys.argv[1]))["results"]: print("%-50s %.3f ms" % (r["command"].split(" --socket")[0], r["median"]*1e3))' "$j"
  done
  kill -TERM $p; wait $p 2>/dev/null || true
  rm -rf "$dir" "$j"
}

# `bar --daemon` following the daemon's snapshot vs a socket watch (the snapshot moved
# away before the bar starts): CPU of the bar and of the daemon over 60 s each, from
# /proc/PID/schedstat, daemon at a 1 s interval.
section_bardaemon() {
  echo "== bar --daemon: snapshot vs socket (CPU over 60 s, daemon interval 1 s)"
  local mode d dp bp b0 b1 d0 d1
  for mode in shm socket; do
    d=$(mktemp -d)
    $K daemon --no-bpf --interval 1 --socket "$d/sock" 2>/dev/null & dp=$!
    while [ ! -e "$d/snapshot" ]; do sleep 0.1; done
    sleep 2
    [ $mode = socket ] && mv "$d/snapshot" "$d/off"
    $K bar --daemon --json --socket "$d/sock" > /dev/null & bp=$!
    sleep 3
    b0=$(awk '{print $1}' /proc/$bp/schedstat); d0=$(awk '{print $1}' /proc/$dp/schedstat)
    sleep 60
    b1=$(awk '{print $1}' /proc/$bp/schedstat); d1=$(awk '{print $1}' /proc/$dp/schedstat)
    echo "$mode: bar $(( (b1 - b0) / 60000 )) µs/s, daemon $(( (d1 - d0) / 60000 )) µs/s, sockets in the bar: $(ls -l /proc/$bp/fd | grep -c socket)"
    kill $bp; kill -TERM $dp; wait $dp 2>/dev/null || true
    rm -rf "$d"
  done
}

# What a burst of processes leaves in the daemon's memory (the soak's one RSS step): the
# daemon as the soak runs it (1 s interval, --metrics, runqlat and writes), RssAnon at
# rest, while 3,000 extra processes live for 10 s, 6 s after they are gone, and after
# gdb makes it call malloc_trim(0) (what glibc held as free memory). Three rounds.
section_burst() {
  echo "== burst: the daemon's RssAnon (KiB) before, during and after 3,000 processes"
  local d dp i round pids
  anon() { awk '/RssAnon/ {print $2}' /proc/$1/status; }
  for round in 1 2 3; do
    d=$(mktemp -d)
    XDG_RUNTIME_DIR=$d KERNSTAT_NO_AUTOSTART=1 $K daemon --interval 1 \
      --metrics 127.0.0.1:19563 --collect runqlat,writes 2>/dev/null & dp=$!
    sleep 10
    local rest; rest=$(anon $dp)
    pids=()
    for i in $(seq 3000); do sleep 10 & pids+=($!); done
    sleep 4
    local during; during=$(anon $dp)
    wait "${pids[@]}"
    sleep 6
    local after; after=$(anon $dp)
    local trimmed=-
    if command -v gdb >/dev/null; then
      gdb -p $dp -batch -ex 'call (int)malloc_trim(0)' >/dev/null 2>&1 && trimmed=$(anon $dp)
    fi
    echo "round $round: rest $rest, during $during, after $after (+$((after - rest))), after malloc_trim $trimmed"
    kill -TERM $dp; wait $dp 2>/dev/null || true
    rm -rf "$d"
  done
}

# Issue 11's figures: the CPU of one read from shared memory vs the socket (client and
# daemon; `kernstat get` as a process beside /bin/true is section shm), and a zsh prompt render showing
# git.branch, git.dirty and load.one (median of 200 precmd runs timed with
# $EPOCHREALTIME): kernstat's hook (in an empty repository, and at the work-tree stamp's
# bound of 64 entries) vs three $(kernstat get) vs three $(comb get) when beachcomber is
# installed. The daemons and the shells are pinned to CPU 0.
section_prompt() {
  echo "== one read: shared memory vs socket (pinned to CPU 0)"
  local dir ks; dir=$(mktemp -d); ks=$(realpath "$K")
  cargo build --release -q --example read_cost -p kernstat-daemon
  taskset -c 0 $K daemon --no-bpf --socket "$dir/sock" 2>/dev/null &
  local p=$!
  trap "kill -TERM $p 2>/dev/null || true" EXIT
  while [ ! -e "$dir/snapshot" ]; do sleep 0.1; done
  sleep 2.5
  taskset -c 0 target/release/examples/read_cost "$dir/sock" 400000
  echo "== zsh prompt render: git.branch git.dirty load.one (median of 200, µs, pinned)"
  git -C "$dir" init -q repo && git -C "$dir/repo" -c user.name=b -c user.email=b@b commit -q --allow-empty -m x
  local comb; comb=$(command -v comb || true)
  [ -n "$comb" ] && (cd "$dir/repo" && $comb get git.branch >/dev/null && $comb get load.one >/dev/null; sleep 1)
  (cd "$dir/repo" && taskset -c 0 zsh -f -c '
    K=$1 S=$2 comb=$3
    eval "$($K init zsh --socket $S --keys git.branch,git.dirty,load.one)"
    zmodload zsh/datetime
    median() { local -a t; local i s; for i in {1..20}; do $1; done
      for i in {1..200}; do s=$EPOCHREALTIME; $1; t+=($(( (EPOCHREALTIME - s) * 1e6 ))); done
      t=(${(on)t}); printf "%-34s %8.1f
" "$2" $t[100]; }
    one_get() { a=$($K get --socket $S git.branch git.dirty load.one); }
    three_gets() { a=$($K get --socket $S git.branch); b=$($K get --socket $S git.dirty); c=$($K get --socket $S load.one); }
    one_comb() { a=$($comb get git.branch git.dirty load.one); }
    median _ks_precmd "kernstat zsh hook"
    # At the work-tree stamp bound: 63 tracked files and the top (64 stats a prompt).
    for i in {1..63}; do print $i > f$i; done
    git add -A && git -c user.name=b -c user.email=b@b commit -qm files
    $K get --socket $S git.dirty >/dev/null; sleep 2.5
    median _ks_precmd "kernstat zsh hook, 63 tracked files"
    median one_get "one \$(kernstat get K1 K2 K3)"
    median three_gets "three \$(kernstat get K)"
    [[ -n $comb ]] && median one_comb "one \$(comb get K1 K2 K3) (beachcomber)"
  ' zsh "$ks" "$dir/sock" "$comb")
  kill -TERM $p; wait $p 2>/dev/null || true
  rm -rf "$dir"
}

# kernstat top beside htop and btop, all three at a 1 s refresh in their own tmux windows
# (160x40, UTF-8) for 60 s at the same time, so they watch the same processes: CPU per
# refresh from /proc/PID/task/*/schedstat (the task iterator runs inside kernstat's read(), so
# its BPF time is in that figure; bpftool's run time of the iterator is printed apart),
# and VmRSS / VmHWM at the end. Configs live in a scratch HOME (htop writes its rc on exit).
# CPU time of every thread of process $1, ns (/proc/PID/schedstat is the main thread's
# only, and btop collects in a second thread).
task_ns() {
  cat /proc/"$1"/task/*/schedstat | awk '{s+=$1} END {printf "%.0f\n", s}'
}

section_top() {
  command -v htop >/dev/null && command -v btop >/dev/null ||
    { echo "== top: needs htop and btop (apt-get install htop btop)"; return; }
  local home srv secs=60
  home=$(mktemp -d); srv=ks-bench-top
  mkdir -p "$home/.config/btop"
  printf 'update_ms = 1000\nproc_sorting = "cpu lazy"\n' >"$home/.config/btop/btop.conf"
  # ~100 processes (the fixed cost of a refresh), ~300, and 10,000 idle ones;
  # TOP_TASKS="100 300" picks.
  for tasks in ${TOP_TASKS:-100 300 10000}; do
    local f
    f=$(fleet "$tasks")
    echo "== top, htop, btop at 1 s, side by side for ${secs} s: $(ls -d /proc/[0-9]* 2>/dev/null | wc -l) processes"
    sysctl -qw kernel.bpf_stats_enabled=1
    tmux -L $srv kill-server 2>/dev/null || true
    local envs="env HOME=$home LANG=C.UTF-8 TERM=xterm-256color"
    tmux -L $srv new-session -d -x 160 -y 40 -s kernstat "exec $envs $K top -d 1"
    tmux -L $srv new-session -d -x 160 -y 40 -s htop "exec $envs htop -d 10"
    tmux -L $srv new-session -d -x 160 -y 40 -s btop "exec $envs btop --utf-force"
    sleep 5
    local -A pid s0 s1
    for t in kernstat htop btop; do
      local shell
      shell=$(tmux -L $srv list-panes -t $t -F '#{pane_pid}')
      # env execs the tool: the pane's process is the tool itself.
      pid[$t]=$shell
      s0[$t]=$(task_ns "$shell")
    done
    local it0 t0 t1 it1
    # The walk is ps_run (BPF_PROG_RUN, 6.7+) or the iterator's ps_tasks.
    it0="ps_run $(prog_ns ps_run "${pid[kernstat]}"), ps_tasks $(prog_ns ps_tasks "${pid[kernstat]}")"
    t0=$(date +%s%N)
    sleep $secs
    t1=$(date +%s%N)
    it1="ps_run $(prog_ns ps_run "${pid[kernstat]}"), ps_tasks $(prog_ns ps_tasks "${pid[kernstat]}")"
    for t in kernstat htop btop; do
      s1[$t]=$(task_ns "${pid[$t]}")
      awk -v n="$t" -v s=$((s1[$t] - s0[$t])) -v w=$((t1 - t0)) \
        -v rss="$(awk '/VmRSS/ {print $2}' /proc/${pid[$t]}/status)" \
        -v hwm="$(awk '/VmHWM/ {print $2}' /proc/${pid[$t]}/status)" 'BEGIN {
        printf "%-9s %7.2f ms CPU per refresh (%.2f%% of a core)  RSS %6.1f MiB (peak %.1f)\n",
          n, s/(w/1e9)/1e6, s/w*100, rss/1024, hwm/1024 }'
    done
    echo "kernstat's task walk program (bpftool, whole run): $it1 (at 5 s: $it0)"
    # Where kernstat's refresh goes (its own split: sampling, view, drawing).
    tmux -L $srv new-session -d -x 160 -y 40 -s split \
      "exec $envs $K top -d 1 -n 30 --report 2>$home/split.json"
    sleep 32
    echo "kernstat top --report (medians of 28 refreshes): $(tail -1 "$home/split.json" |
      python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print({k: d[k] for k in ("cpu_us_per_refresh_median","sample_us_median","view_us_median","draw_us_median","allocations_per_refresh_median")})')"
    tmux -L $srv kill-server 2>/dev/null || true
    sysctl -qw kernel.bpf_stats_enabled=0
    stop_fleet "$f"
  done
  rm -rf "$home"
}

# Total run time (ns) and runs of the BPF programs named $1 that process $2 holds.
prog_total() {
  progs_of "$2" | awk -v n="$1" '$1 == n {t += $2; c += $3} END {print t + 0, c + 0}'
}

# CPU time of a process, ns (utime + stime of /proc/PID/stat).
proc_ns() {
  awk -v hz="$(getconf CLK_TCK)" '{print ($14 + $15) * 1e9 / hz}' "/proc/$1/stat"
}

# iperf3 over loopback, client on CPU 0 and server on CPU 1: received bits/s.
iperf_bps() {
  iperf3 -c 127.0.0.1 -p 45201 -A 0,1 -t "$1" -l "$2" -J | python3 -c '
import json, sys; print(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"])'
}

# One iperf3 run of $1-byte writes; the run time per event of process $3's programs
# $4 (send) and $5 (receive), printed as $2's.
per_event() {
  local st sc rt rc
  iperf_bps 5 "$1" >/dev/null
  read -r st sc < <(prog_total "$4" "$3")
  read -r rt rc < <(prog_total "$5" "$3")
  awk -v l="$1" -v who="$2" -v st="$st" -v sc="$sc" -v rt="$rt" -v rc="$rc" 'BEGIN {
    if (sc && rc) printf "-l %s: %s: send %.1f ns x %d, receive %.1f ns x %d\n", l, who, st/sc, sc, rt/rc, rc }'
}

# Per-process network: the hooks' cost per send and receive, iperf3's throughput with
# and without them, and nethogs beside kernstat on the same transfer.
section_net() {
  command -v iperf3 >/dev/null || { echo "== net: iperf3 is not installed"; return; }
  iperf3 -s -p 45201 >/dev/null 2>&1 &
  local srv=$! p len
  sleep 0.5
  echo "== net hooks per event (BPF run-time stats), iperf3 5 s over loopback, client CPU 0, server CPU 1"
  sysctl -qw kernel.bpf_stats_enabled=1
  for len in 128K 16K 1K; do
    $K bar --no-lock --interval 2 >/dev/null &
    p=$!
    sleep 1
    per_event "$len" kernstat $p tp_send tp_recv
    kill $p; wait $p 2>/dev/null || true
    if command -v bpftrace >/dev/null; then
      # The peer on the same tracepoints: bpftrace's cheapest per-event program.
      bpftrace -e 'tracepoint:sock:sock_send_length { @s = count(); } tracepoint:sock:sock_recv_length { @r = count(); }' >/dev/null 2>&1 &
      p=$!
      sleep 3
      per_event "$len" "bpftrace count()" $p sock_send_lengt sock_recv_lengt
      kill -INT $p; wait $p 2>/dev/null || true
    fi
  done
  sysctl -qw kernel.bpf_stats_enabled=0
  echo "== iperf3 throughput with kernstat's hooks attached (kernstat bar running) vs without: 7 alternating 3 s runs, medians (Gbit/s)"
  for len in 128K 1K; do
    local base=() with=()
    for _ in $(seq 7); do
      base+=("$(iperf_bps 3 $len)")
      $K bar --no-lock --interval 2 >/dev/null &
      p=$!
      sleep 0.5
      with+=("$(iperf_bps 3 $len)")
      kill $p; wait $p 2>/dev/null || true
    done
    local b w
    b=$(printf '%s\n' "${base[@]}" | median)
    w=$(printf '%s\n' "${with[@]}" | median)
    awk -v l=$len -v b="$b" -v w="$w" 'BEGIN {
      printf "-l %s: without %.2f  with %.2f  ratio %.3f\n", l, b/1e9, w/1e9, w/b }'
  done
  command -v nethogs >/dev/null || { echo "== nethogs is not installed"; kill $srv; wait $srv 2>/dev/null || true; return; }
  echo "== nethogs vs kernstat on one iperf3 transfer (10 s at 2 Gbit/s over loopback): bytes attributed, CPU used"
  local dir np kp m0 m1 n0 n1 k0 k1 t0 t1 h0 h1
  dir=$(mktemp -d)
  nethogs -t -a -v 2 -d 1 lo >"$dir/nethogs" 2>/dev/null &
  np=$!
  $K daemon --socket "$dir/sock" --interval 1 --metrics 127.0.0.1:19663 2>/dev/null &
  kp=$!
  sleep 2
  sock() { curl -s 127.0.0.1:19663/metrics | awk '/^kernstat_socket_(transmit|receive)_bytes_total\{kind="tcp"\}/ {printf "%s ", $2}'; }
  hooks() { local a b; read -r a _ < <(prog_total tp_send $kp); read -r b _ < <(prog_total tp_recv $kp); echo $((a + b)); }
  sysctl -qw kernel.bpf_stats_enabled=1
  m0=$(sock); n0=$(proc_ns $np); k0=$(proc_ns $kp); h0=$(hooks); t0=$(date +%s%N)
  iperf3 -c 127.0.0.1 -p 45201 -t 10 -b 2G -J >"$dir/iperf.json"
  sleep 2
  m1=$(sock); n1=$(proc_ns $np); k1=$(proc_ns $kp); h1=$(hooks); t1=$(date +%s%N)
  sysctl -qw kernel.bpf_stats_enabled=0
  kill $np $kp 2>/dev/null; wait $np $kp 2>/dev/null || true
  python3 - "$dir" "$m0" "$m1" <<'PY'
import json, sys
d = sys.argv[1]
r = json.load(open(f"{d}/iperf.json"))["end"]
sent, recv = r["sum_sent"]["bytes"], r["sum_received"]["bytes"]
m0, m1 = [list(map(float, x.split())) for x in sys.argv[2:4]]
tx, rx = m1[0] - m0[0], m1[1] - m0[1]
last = {}
for line in open(f"{d}/nethogs"):
    f = line.rstrip().split(chr(9))
    if len(f) == 3 and f[0].startswith("iperf3/"):
        last[f[0]] = (float(f[1]), float(f[2]))
ns, nr = sum(v[0] for v in last.values()), sum(v[1] for v in last.values())
print(f"iperf3 reports {sent:.0f} B sent, {recv:.0f} B received")
print(f"nethogs attributes to iperf3: {ns:.0f} B sent ({ns/sent:.4f}), {nr:.0f} B received ({nr/recv:.4f})")
print(f"kernstat, every process's TCP payload in the window: {tx:.0f} B sent ({tx/sent:.4f}), {rx:.0f} B received ({rx/recv:.4f})")
PY
  awk -v n=$((n1 - n0)) -v k=$((k1 - k0)) -v h=$((h1 - h0)) -v t=$((t1 - t0)) 'BEGIN {
    printf "CPU over the window: nethogs %.3f%% of one core; kernstat daemon %.3f%% + its hooks %.3f%% = %.3f%%\n", n/t*100, k/t*100, h/t*100, (k+h)/t*100 }'
  kill $srv 2>/dev/null; wait $srv 2>/dev/null || true
  rm -rf "$dir"
}

# The run time per completed request of process $1's BPF programs: all of them (issue
# and completion hooks together), divided by the completions counted by the programs
# whose name has "compl" in it. Prints "NS_PER_REQUEST REQUESTS".
per_request() {
  progs_of "$1" | awk '{t += $2} $1 ~ /compl/ {c += $3} END {if (c) printf "%.1f %d\n", t / c, c; else print "- 0"}'
}

# Block I/O latency: the hooks' cost per request against libbpf-tools' biolatency and
# bpftrace on the same tracepoints (each alone, on the same fio load), and fio's 4 KiB
# random I/O on a loop device of its own with and without kernstat's hooks.
section_biolat() {
  command -v fio >/dev/null || { echo "== biolat: fio is not installed"; return; }
  local dir dev p r
  dir=$(mktemp -d /var/tmp/ksbio.XXXXXX)
  # Written whole: a sparse file's first writes allocate, which would slow whichever
  # run comes first.
  dd if=/dev/zero of="$dir/disk" bs=1M count=2048 status=none
  dev=$(losetup --find --show --direct-io=on "$dir/disk")
  trap 'sysctl -qw kernel.bpf_stats_enabled=0; losetup -d "$dev"; rm -rf "$dir"; trap - RETURN' RETURN
  fio_iops() {
    fio --name=r --filename="$dev" --direct=1 --rw=randrw --bs=4k --iodepth=16 \
      --ioengine=libaio --runtime="$1" --time_based --size=1G --output-format=json |
      python3 -c 'import json, sys; j = json.load(sys.stdin)["jobs"][0]; print(j["read"]["iops"] + j["write"]["iops"])'
  }
  fio_iops 3 >/dev/null # the backing file's blocks allocated
  echo "== biolat per request (BPF run-time stats, issue + completion hooks / completions), fio 4 KiB randrw, iodepth 16, 10 s each, on $dev"
  sysctl -qw kernel.bpf_stats_enabled=1
  for tracer in kernstat biolatency bpftrace-hist bpftrace-count; do
    case $tracer in
      kernstat) $K biolat 1 100 >/dev/null 2>&1 & ;;
      biolatency) /usr/sbin/biolatency 1 100 >/dev/null 2>&1 & ;;
      bpftrace-hist) bpftrace -e 'tracepoint:block:block_rq_issue { @s[args->dev, args->sector] = nsecs; }
        tracepoint:block:block_rq_complete /@s[args->dev, args->sector]/ {
          @us = hist((nsecs - @s[args->dev, args->sector]) / 1000); delete(@s[args->dev, args->sector]); }' >/dev/null 2>&1 & ;;
      bpftrace-count) bpftrace -e 'tracepoint:block:block_rq_complete { @c = count(); }' >/dev/null 2>&1 & ;;
    esac
    p=$!
    sleep 3
    fio_iops 10 >/dev/null
    read -r r n < <(per_request $p) || true
    echo "$tracer: $r ns per request x $n"
    kill -INT $p 2>/dev/null || true
    wait $p 2>/dev/null || true
  done
  sysctl -qw kernel.bpf_stats_enabled=0
  echo "== fio IOPS without a tracer, with kernstat biolat, with biolatency: 9 rounds of 5 s runs in turn, medians"
  local base=() with=() peer=() b w l
  for _ in $(seq 9); do
    base+=("$(fio_iops 5)")
    $K biolat 1 100 >/dev/null 2>&1 &
    p=$!
    sleep 1
    with+=("$(fio_iops 5)")
    kill -INT $p 2>/dev/null || true
    wait $p 2>/dev/null || true
    /usr/sbin/biolatency 1 100 >/dev/null 2>&1 &
    p=$!
    sleep 2
    peer+=("$(fio_iops 5)")
    kill -INT $p 2>/dev/null || true
    wait $p 2>/dev/null || true
  done
  b=$(printf '%s\n' "${base[@]}" | median)
  w=$(printf '%s\n' "${with[@]}" | median)
  l=$(printf '%s\n' "${peer[@]}" | median)
  echo "without: ${base[*]}"
  awk -v b="$b" -v w="$w" -v l="$l" 'BEGIN { printf "medians: without %.0f  kernstat %.0f (%.3f)  biolatency %.0f (%.3f)\n", b, w, w/b, l, l/b }'
}

# Per-program run time per event of process $1's BPF programs, printed as $2's.
prog_each() {
  progs_of "$1" | awk -v who="$2" '$3 > 0 {printf "%s: %s: %.1f ns x %d\n", who, $1, $2 / $3, $3}'
}

# TCP retransmits and connects: the hooks' cost per event against bpftrace's count() on
# the same tracepoints, in two namespaces of their own joined by veth with 1 % of the
# receiver's input dropped (nftables), under a 200 MB iperf3 transfer and 200 connects.
section_tcp() {
  command -v iperf3 >/dev/null && command -v nft >/dev/null || { echo "== tcp: needs iperf3 and nft"; return; }
  local s=ksbs$$ r=ksbr$$ p tracer srv
  trap 'sysctl -qw kernel.bpf_stats_enabled=0; ip netns del '$s' 2>/dev/null; ip netns del '$r' 2>/dev/null; trap - RETURN' RETURN
  ip netns add $s
  ip netns add $r
  ip link add kvb$$a netns $s type veth peer name kvb$$b netns $r
  ip -n $s addr add 10.79.1.1/24 dev kvb$$a
  ip -n $s link set kvb$$a up
  ip -n $s link set lo up
  ip -n $r addr add 10.79.1.2/24 dev kvb$$b
  ip -n $r link set kvb$$b up
  ip -n $r link set lo up
  printf 'table inet ksloss {\n chain in {\n  type filter hook input priority 0;\n  ip saddr 10.79.1.1 tcp dport 5298 numgen random mod 100 < 1 drop\n }\n}\n' |
    ip netns exec $r nft -f -
  ip netns exec $r iperf3 -s -p 5298 >/dev/null 2>&1 &
  srv=$!
  sleep 0.5
  echo "== tcp hooks per event (BPF run-time stats): iperf3 -n 200M under 1 % loss, then 200 connects"
  sysctl -qw kernel.bpf_stats_enabled=1
  for tracer in kernstat bpftrace; do
    if [ $tracer = kernstat ]; then
      $K tcp 1 100 >/dev/null 2>&1 &
    else
      bpftrace -e 'tracepoint:tcp:tcp_retransmit_skb { @r = count(); } tracepoint:sock:inet_sock_set_state { @s = count(); }' >/dev/null 2>&1 &
    fi
    p=$!
    sleep 3
    ip netns exec $s iperf3 -c 10.79.1.2 -p 5298 -n 200M >/dev/null 2>&1 || true
    for _ in $(seq 200); do ip netns exec $s bash -c 'exec 3<>/dev/tcp/10.79.1.2/5298' 2>/dev/null || true; done
    prog_each $p $tracer || true
    kill -INT $p 2>/dev/null || true
    wait $p 2>/dev/null || true
  done
  sysctl -qw kernel.bpf_stats_enabled=0
  kill $srv 2>/dev/null || true
  wait $srv 2>/dev/null || true
}

# The default daemon beside rezolus' default agent, 60 s windows, both at once: each
# one's process CPU (all threads) plus its BPF programs' run time, and resident memory;
# idle, then under stress-ng --switch 1 --cpu 1; with READ=1 each is read once a second.
# Needs rezolus built from its repository: REZOLUS=/path/to/rezolus REZOLUS_CONFIG=agent.toml.
section_rezolus() {
  [ -x "${REZOLUS:-}" ] || { echo "== rezolus: set REZOLUS to a built rezolus binary"; return; }
  local dir kp rp cl="" sp
  dir=$(mktemp -d)
  sysctl -qw kernel.bpf_stats_enabled=1
  "$REZOLUS" "${REZOLUS_CONFIG:?the agent config file}" >/dev/null 2>&1 &
  rp=$!
  if [ "${READ:-0}" = 1 ]; then
    $K daemon --socket "$dir/sock" --metrics 127.0.0.1:19664 >/dev/null 2>&1 &
    kp=$!
    (while :; do curl -s -o /dev/null 127.0.0.1:19664/metrics; curl -s -o /dev/null 127.0.0.1:4241/metrics/binary; sleep 1; done) &
    cl=$!
  else
    $K daemon --socket "$dir/sock" >/dev/null 2>&1 &
    kp=$!
  fi
  sleep 10
  rz_window() {
    local t0 t1 k0 k1 r0 r1 kb0 kb1 rb0 rb1
    t0=$(date +%s%N); k0=$(proc_ns $kp); r0=$(proc_ns $rp); kb0=$(per_prog_ns $kp); rb0=$(per_prog_ns $rp)
    sleep 60
    t1=$(date +%s%N); k1=$(proc_ns $kp); r1=$(proc_ns $rp); kb1=$(per_prog_ns $kp); rb1=$(per_prog_ns $rp)
    awk -v l="$1" -v t=$((t1 - t0)) -v k="$k0" -v K="$k1" -v r="$r0" -v R="$r1" -v kb=$((kb1 - kb0)) -v rb=$((rb1 - rb0)) \
      -v km="$(awk '/VmRSS/ {print $2}' /proc/$kp/status)" -v rm="$(awk '/VmRSS/ {print $2}' /proc/$rp/status)" 'BEGIN {
      k = K - k; r = R - r; kc = (k + kb) / t * 100; rc = (r + rb) / t * 100
      printf "%s: kernstat %.4f%% of a core (process %.4f + BPF %.4f), %d KiB; rezolus %.4f%% (process %.4f + BPF %.4f), %d KiB; CPU 1/%.1f, memory 1/%.1f\n",
        l, kc, k/t*100, kb/t*100, km, rc, r/t*100, rb/t*100, rm, rc/kc, rm/km }'
  }
  echo "== the default daemon beside rezolus' default agent (READ=${READ:-0})"
  rz_window idle
  stress-ng --switch 1 --cpu 1 --timeout 75 >/dev/null 2>&1 &
  sp=$!
  sleep 5
  rz_window "stress-ng --switch 1 --cpu 1"
  wait $sp || true
  [ -n "$cl" ] && kill $cl
  kill $kp $rp 2>/dev/null || true
  wait 2>/dev/null || true
  sysctl -qw kernel.bpf_stats_enabled=0
  rm -rf "$dir"
}

# The summed run time of every BPF program process $1 holds, ns.
per_prog_ns() {
  progs_of "$1" | awk '{t += $2} END {print t + 0}'
}

# CPU of one systemd-cgtop refresh, µs: (-n 21) - (-n 1) over 20 refreshes, median of 5.
cgtop_us() {
  python3 - <<'PY'
import resource, statistics, subprocess
def cpu(n):
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(["systemd-cgtop", "-b", "--raw", "-n", str(n), "-d", "0.05", "--depth", "9"],
                   stdout=subprocess.DEVNULL, check=True)
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) * 1e6
print(statistics.median((cpu(21) - cpu(1)) / 20 for _ in range(5)))
PY
}

# Every group's figures: one reading of kernstat's cgroup reader (what a refresh of
# `kernstat cgroups`, top's cgroup view or a daemon sample costs) beside one refresh of
# systemd-cgtop, at 100 and 1,000 groups made for the purpose (each with one sleeping
# process, since cgtop lists only groups with tasks) and removed after. On a hybrid
# machine kernstat reads the v2 hierarchy and cgtop the v1 controllers: the groups are
# made in every hierarchy.
section_cgroups() {
  command -v systemd-cgtop >/dev/null || { echo "== cgroups: systemd-cgtop is not installed"; return; }
  local base=/sys/fs/cgroup hier=() h n i pids=() name=ksbench-$$
  if [ -e $base/cgroup.controllers ]; then hier=(.); else
    for h in unified systemd cpu cpuacct memory blkio pids; do [ -d $base/$h ] && hier+=("$h"); done
  fi
  echo "== cgroups: CPU per reading of every group, kernstat cgroups --bench 50 (mean, which counts the one reading in ten that reads every file) vs systemd-cgtop (20 refreshes, median of 5), µs"
  for n in 100 1000; do
    for i in $(seq $n); do
      sleep 600 & pids+=($!)
      for h in "${hier[@]}"; do
        mkdir -p $base/$h/$name/g$i
        echo $! >$base/$h/$name/g$i/cgroup.procs
      done
    done
    local k c
    k=$($K cgroups --bench 50 --depth 9 --max-groups 5000 | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["groups"], r["cpu_us_mean"], r["wall_us_p50"], r.get("iterator_cpu_us_p50", r.get("iterator_error", "-").replace(" ", "_")))')
    c=$(cgtop_us)
    read -r g kc kw ki <<<"$k"
    awk -v n=$n -v g="$g" -v kc="$kc" -v kw="$kw" -v c="$c" -v ki="$ki" 'BEGIN {
      printf "%d groups: kernstat %.0f µs CPU (mean; %.0f µs wall median, %d groups read), systemd-cgtop %.0f µs CPU, ratio 1/%.1f; BPF cgroup iterator (tree and CPU only): %s µs\n", n, kc, kw, g, c, c/kc, ki }'
    kill "${pids[@]}" 2>/dev/null; wait "${pids[@]}" 2>/dev/null || true
    pids=()
    for h in "${hier[@]}"; do
      for i in $(seq $n); do rmdir $base/$h/$name/g$i; done
      rmdir $base/$h/$name
    done
  done
}

# Bytes and sample times of an atop raw file after epoch $2 (atop -r -P CPU: one CPU line
# per sample, the epoch in field 3).
atop_samples_after() {
  atop -r "$1" -P CPU 2>/dev/null | awk -v t="$2" '$1 == "CPU" && $3 > t {n[$3] = 1} END {print length(n)}'
}

# The flight recorder beside atop (`atop -w FILE INTERVAL`) and below 0.9 (`below record
# --compress --dict-compress-chunk-size 16`, its cgroup_root on this machine's cgroup v2
# mount), side by side at the same interval: bytes per sample on disk and CPU per sample
# of each whole recorder (kernstat's daemon samples at that interval too), at ~300
# processes quiet and with ~20 process starts a second (a shell loop of short
# commands), and at 10,000 processes (RECORD_TASKS, RECORD_SECS, RECORD_IV). below is
# `cargo install below` (its BPF needs clang >= 15 first in PATH); BELOW names it. Then
# `top --at` step time and `ps --at` into an hour's file at 10,000 and 300 processes.
BELOW=${BELOW:-$(command -v below || echo /root/below/bin/below)}
recorder_row() { # name bytes cpu_ns samples
  awk -v n="$1" -v b="$2" -v c="$3" -v s="$4" 'BEGIN {
    if (s > 0) printf "  %-9s %4d samples, %7.0f bytes and %7.2f ms CPU per sample\n", n, s, b/s, c/s/1e6 }'
}
section_record() {
  command -v atop >/dev/null || { echo "== record: atop is not installed (apt-get install atop)"; return; }
  local secs=${RECORD_SECS:-120} iv=${RECORD_IV:-5} tasks load cgroot
  cgroot=/sys/fs/cgroup; [ -d /sys/fs/cgroup/unified ] && cgroot=/sys/fs/cgroup/unified
  for tasks in ${RECORD_TASKS:-300 10000}; do
    for load in quiet churn; do
      [ "$tasks" -gt 1000 ] && [ "$load" = churn ] && continue
      local f dir ap kp bp cp="" t0 t1 a0 a1 k0 k1 b0 b1 as0 as1 ks0 ks1 bs0 bs1 an kn bn
      f=$(fleet "$tasks")
      dir=$(mktemp -d)
      mkdir -p "$dir/below/store" "$dir/below/log"
      printf 'log_dir = "%s"\nstore_dir = "%s"\ncgroup_root = "%s"\n' \
        "$dir/below/log" "$dir/below/store" "$cgroot" >"$dir/below/below.conf"
      [ "$load" = churn ] && { (while :; do /bin/sleep 0.05; done) & cp=$!; }
      atop -w "$dir/atop.raw" "$iv" >/dev/null 2>&1 &
      ap=$!
      $K daemon --socket "$dir/rec/sock" --interval "$iv" --record "$dir/archive" --record-interval "$iv" 2>/dev/null &
      kp=$!
      bp=""
      if [ -x "$BELOW" ]; then
        "$BELOW" --config "$dir/below/below.conf" record --compress --dict-compress-chunk-size 16 -i "$iv" >/dev/null 2>&1 &
        bp=$!
      fi
      sleep $((iv * 2 + 2))
      t0=$(date +%s)
      a0=$(task_ns $ap); k0=$(task_ns $kp); b0=${bp:+$(task_ns $bp)}
      as0=$(stat -c %s "$dir/atop.raw"); ks0=$(du -sb "$dir/archive" | cut -f1); bs0=$(du -sb "$dir/below/store" | cut -f1)
      sleep "$secs"
      a1=$(task_ns $ap); k1=$(task_ns $kp); b1=${bp:+$(task_ns $bp)}
      as1=$(stat -c %s "$dir/atop.raw"); ks1=$(du -sb "$dir/archive" | cut -f1); bs1=$(du -sb "$dir/below/store" | cut -f1)
      t1=$(date +%s)
      kill $ap $kp $bp $cp 2>/dev/null; wait $ap $kp $bp $cp 2>/dev/null || true
      an=$(atop_samples_after "$dir/atop.raw" "$t0")
      kn=$($K dump --archive "$dir/archive" --from "@$t0" --to "@$t1" 2>/dev/null | wc -l)
      bn=$(( (t1 - t0) / iv ))
      echo "== record, $load: every $iv s for $secs s, $(ls -d /proc/[0-9]* | wc -l) processes$([ "$load" = churn ] && echo ', ~20 starts a second')"
      recorder_row atop $((as1 - as0)) $((a1 - a0)) "$an"
      [ -n "$bp" ] && recorder_row below $((bs1 - bs0)) $((b1 - b0)) "$bn"
      recorder_row kernstat $((ks1 - ks0)) $((k1 - k0)) "$kn"
      awk -v an="$an" -v kn="$kn" -v bn="$bn" -v as=$((as1 - as0)) -v ks=$((ks1 - ks0)) -v bs=$((bs1 - bs0)) \
          -v ac=$((a1 - a0)) -v kc=$((k1 - k0)) -v bc="$([ -n "$bp" ] && echo $((b1 - b0)) || echo 0)" 'BEGIN {
        k = ks/kn; kc1 = kc/kn
        printf "  kernstat bytes: 1/%.1f of atop", (as/an)/k
        if (bc > 0) printf ", 1/%.1f of below", (bs/bn)/k
        printf "; CPU: 1/%.1f of atop", (ac/an)/kc1
        if (bc > 0) printf ", 1/%.1f of below", (bc/bn)/kc1
        printf "; 7 days at 5 s: %.0f MB\n", k*120960/1e6 }'
      if [ "$tasks" -gt 1000 ]; then
        local at
        at=$($K dump --archive "$dir/archive" --format csv 2>/dev/null | awk -F, 'NR > 1 {print $1}' | uniq | tail -2 | head -1)
        echo "  top --at step at $(ls -d /proc/[0-9]* | wc -l) processes: $($K top --at "$at" --archive "$dir/archive" --bench-steps 10)"
      fi
      stop_fleet "$f"
      rm -rf "$dir"
    done
  done
  local f dir at
  f=$(fleet 300)
  dir=$(mktemp -d)
  echo "== ps --at into an hour's file: 720 samples at $(ls -d /proc/[0-9]* | wc -l) processes (recorded at 0.05 s), median of 21 runs, ms"
  $K daemon --socket "$dir/sock" --interval 0.05 --record "$dir/archive" --record-interval 0.05 2>/dev/null &
  local kp=$!
  while [ "$($K dump --archive "$dir/archive" 2>/dev/null | wc -l)" -lt 720 ]; do sleep 2; done
  kill $kp; wait $kp 2>/dev/null || true
  at=$($K dump --archive "$dir/archive" | sed -n 700p | python3 -c 'import json,sys; print(json.load(sys.stdin)["time"])')
  for _ in $(seq 21); do
    local s e
    s=$(date +%s%N); $K ps --at "$at" --archive "$dir/archive" >/dev/null 2>&1; e=$(date +%s%N)
    echo $(((e - s) / 1000))
  done | median | awk '{printf "ps --at the 700th sample: %.1f ms (a key frame every 60: at most 60 decompressions)\n", $1/1000}'
  ls -l "$dir/archive"/*.ksr | awk '{s += $5} END {printf "files: %d bytes for 720 samples\n", s}'
  stop_fleet "$f"
  rm -rf "$dir"
}

# kernstat view over a synthetic archive (the v3 fixture's frame, its processes repeated
# to 300, a frame every 5 s, written by the recorder's writer): a 24-hour range's
# timelines read cold (a fresh server each run: what the page's first paint of the
# range waits for) and again, its heatmap, and the server's RSS after a 7-day range. OLD=path/to/kernstat measures another build side by side (also in `metrics`).
view_cold() {
  local bin=$1 arch=$2 port=$3 tok=0123456789abcdef0123456789abcdef
  echo $tok >"$arch.token"
  pkill -f "view --archive .* --listen 127.0.0.1:$port " || true
  $bin view --archive "$arch" --listen 127.0.0.1:$port --token-file "$arch.token" >/dev/null 2>&1 &
  local vp=$!
  until curl -s -o /dev/null "http://127.0.0.1:$port/api/span?token=$tok"; do
    kill -0 $vp 2>/dev/null || { echo "$bin view did not start" >&2; return 1; }
    sleep 0.1
  done
  local span from to
  span=$(curl -s "http://127.0.0.1:$port/api/span?token=$tok")
  from=$(echo "$span" | python3 -c 'import json,sys; print(json.load(sys.stdin)["first_unix_ns"]/1e9)')
  to=$(echo "$span" | python3 -c 'import json,sys; print(json.load(sys.stdin)["last_unix_ns"]/1e9)')
  local q="token=$tok&from=$from&to=$to&points=1200"
  curl -s -o /dev/null -w '%{time_total} ' "http://127.0.0.1:$port/api/series?$q"
  curl -s -o /dev/null -w '%{time_total} %{size_download} ' "http://127.0.0.1:$port/api/series?$q"
  curl -s -o /dev/null -w '%{time_total} %{size_download} ' "http://127.0.0.1:$port/api/heatmap?$q&hist=runqlat"
  awk '/VmRSS/ {print $2}' /proc/$vp/status
  kill $vp; wait $vp 2>/dev/null || true
}

section_view() {
  cargo build --release -q -p kernstat-view --example synth_archive
  local dir
  dir=$(mktemp -d)
  ./target/release/examples/synth_archive crates/kernstat-record/tests/fixtures/v3 "$dir/day" 24 300
  ./target/release/examples/synth_archive crates/kernstat-record/tests/fixtures/v3 "$dir/week" 168 300
  for b in $K ${OLD:-}; do
    echo "== view ($b): a 24-hour range at 300 processes ($(du -sh "$dir/day" | cut -f1)), median of 5 fresh servers"
    for _ in 1 2 3 4 5; do view_cold "$b" "$dir/day" 9188; done |
      python3 -c 'import sys,statistics as st
rows=[list(map(float,l.split())) for l in sys.stdin if l.strip()]
col=lambda k: sorted(r[k] for r in rows)
m=lambda k: st.median(col(k))
print("timelines cold %.0f ms (min %.0f, max %.0f), again %.1f ms, %d bytes; heatmap %.1f ms, %d bytes; RSS %d KiB" % (m(0)*1e3, col(0)[0]*1e3, col(0)[-1]*1e3, m(1)*1e3, m(2), m(3)*1e3, m(4), m(5)))'
    echo "a 7-day range ($(du -sh "$dir/week" | cut -f1)): $(view_cold "$b" "$dir/week" 9188 |
      awk '{printf "timelines cold %.2f s, RSS %.1f MiB", $1, $6/1024}')"
  done
  rm -rf "$dir"
}

# The README's screenshot (docs/top.svg): kernstat top with both probe panels on a loaded
# machine (stress-ng --cpu 4 --switch 2 and a small writer), captured from a tmux pane
# with its colours and drawn as SVG by scripts/pane2svg.py. Not in the default list.
section_screenshot() {
  local srv=ks-shot out
  out=$(mktemp -d)
  stress-ng --cpu 4 --switch 2 --timeout 30 >/dev/null 2>&1 &
  local s=$!
  $W trickle 300 48 "$out/trickle" >/dev/null &
  local w=$!
  tmux -L $srv kill-server 2>/dev/null || true
  tmux -L $srv new-session -d -x 132 -y 46 -s top "exec env LANG=C.UTF-8 TERM=xterm-256color $K top -d 1 --runqlat --writes"
  sleep 6
  tmux -L $srv capture-pane -p -e -t top | python3 scripts/pane2svg.py >docs/top.svg
  tmux -L $srv kill-server 2>/dev/null || true
  kill $s $w 2>/dev/null; wait $s $w 2>/dev/null || true
  rm -rf "$out"
  echo "== screenshot: docs/top.svg"
}

sections=("$@")
[ ${#sections[@]} -eq 0 ] && sections=(sample firstline rss cost switch pipe ps runqlat writes daemon metrics providers shm bardaemon burst prompt top net biolat tcp cgroups record view)
for s in "${sections[@]}"; do "section_$s"; done
