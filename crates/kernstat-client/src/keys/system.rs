//! The system keys: every figure of the sampler's model published as its own key, with
//! what it means, its unit and whether it is a rate. The data only: the daemon's
//! providers/system.rs reads each value from a model, in the same order (a test there
//! checks one against the other), so that a key cannot be served without being listed
//! here, or listed without being served.

/// Whether a value is a reading of one instant or needs two samples some time apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A reading of one instant (memory used, load average).
    Instant,
    /// A rate or a share of time over the sampling interval (CPU %, bytes/s).
    Rate,
}

/// What a value is measured in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// Percent (0–100).
    Percent,
    /// Bytes.
    Bytes,
    /// Bytes per second.
    BytesPerSecond,
    /// Megahertz.
    Megahertz,
    /// Degrees Celsius.
    Celsius,
    /// Watts.
    Watts,
    /// A count (processes, tasks).
    Count,
    /// A load average (runnable + uninterruptible tasks).
    Load,
    /// A word from a small set (power profile, battery status, alert level).
    Text,
    /// true or false.
    Bool,
    /// Seconds.
    Seconds,
    /// A JSON list or object (see the help).
    Json,
}

/// One system key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyInfo {
    /// The key clients ask for.
    pub key: &'static str,
    /// What it means (for `get --list`, the docs and Prometheus' HELP).
    pub help: &'static str,
    /// Its unit.
    pub unit: Unit,
    /// Instant reading or rate.
    pub kind: Kind,
}

const fn key(key: &'static str, help: &'static str, unit: Unit, kind: Kind) -> KeyInfo {
    KeyInfo {
        key,
        help,
        unit,
        kind,
    }
}

use Kind::{Instant, Rate};

/// Every system key, in the order the daemon publishes them.
pub const SYSTEM_KEYS: &[KeyInfo] = &[
    key("cpu.percent", "machine CPU busy % (all CPUs = 100)", Unit::Percent, Rate),
    key("cpu.cores", "busy % of each CPU", Unit::Json, Rate),
    key("cpu.freq_mhz", "CPU frequency, MHz (where cpufreq exists)", Unit::Megahertz, Instant),
    key("cpu.temp_c", "CPU temperature, °C (where a sensor exists)", Unit::Celsius, Instant),
    key("mem.used", "memory used, bytes (total - available)", Unit::Bytes, Instant),
    key("mem.total", "memory total, bytes", Unit::Bytes, Instant),
    key("mem.available", "memory available, bytes", Unit::Bytes, Instant),
    key("mem.percent", "memory used %", Unit::Percent, Instant),
    key("swap.used", "swap used, bytes", Unit::Bytes, Instant),
    key("swap.in_bps", "swap-in rate, bytes/s", Unit::BytesPerSecond, Rate),
    key("swap.out_bps", "swap-out rate, bytes/s", Unit::BytesPerSecond, Rate),
    key("load.one", "1-minute load average", Unit::Load, Instant),
    key("load.five", "5-minute load average", Unit::Load, Instant),
    key("load.fifteen", "15-minute load average", Unit::Load, Instant),
    key("psi.cpu.some", "CPU pressure, some, avg10 %", Unit::Percent, Instant),
    key("psi.memory.some", "memory pressure, some, avg10 %", Unit::Percent, Instant),
    key("psi.memory.full", "memory pressure, full, avg10 %", Unit::Percent, Instant),
    key("psi.io.some", "I/O pressure, some, avg10 %", Unit::Percent, Instant),
    key("psi.io.full", "I/O pressure, full, avg10 %", Unit::Percent, Instant),
    key("disk.util", "the busiest disk's utilisation, % of the interval with I/O in flight (iostat %util)", Unit::Percent, Rate),
    key("disks", "every disk: [{name, reads_ps, writes_ps, read_bps, write_bps, util_percent, queue_depth, await_ms}]", Unit::Json, Rate),
    key("tcp.retrans_ps", "TCP segments retransmitted per second (/proc/net/snmp)", Unit::Count, Rate),
    key("tcp.retrans_percent", "retransmitted share of TCP segments sent, %", Unit::Percent, Rate),
    key("tcp.retrans_top", "the processes that retransmitted most over the interval: [[pid, comm, segments]]; absent without the TCP hooks", Unit::Json, Rate),
    key("tcp.connect_p99_ms", "99th percentile of TCP connect latency over the interval, ms; absent without connects", Unit::Seconds, Rate),
    key("mem.reclaim_ps", "pages scanned by memory reclaim per second (/proc/vmstat)", Unit::Count, Rate),
    key("faults.major_ps", "major page faults per second (reads from disk)", Unit::Count, Rate),
    key("oom.kills", "processes the OOM killer killed since boot", Unit::Count, Instant),
    key("why.top", "the first notable finding of `kernstat why` over the daemon's last 10 s (\"CPU saturated: tasks waited 38.0 % of the window to run ...\"), or \"ok\"", Unit::Text, Rate),
    key("why.score", "its score: the share of the window stalled on that resource (0 when nothing is notable)", Unit::Count, Rate),
    key("why.findings", "the whole `kernstat why --json` report over the daemon's last 10 s", Unit::Json, Rate),
    key("oom.last", "the last OOM kill the daemon saw: \"OOM kill: pid 4242 (hog), 812.0 MiB in /ci; limit: /ci\"; absent before one (needs BPF)", Unit::Text, Instant),
    key("events.recent", "the kernel events the daemon saw (OOM kills), the latest last: [{kind, time_unix_ns, pid, comm, rss_bytes, group, limit, growers ...}]", Unit::Json, Instant),
    key("procs.count", "processes", Unit::Count, Instant),
    key("procs.blocked", "processes in D", Unit::Count, Instant),
    key("procs.zombie", "zombie processes", Unit::Count, Instant),
    key("tasks.count", "tasks (threads)", Unit::Count, Instant),
    key("tasks.running", "tasks running or runnable", Unit::Count, Instant),
    key("top.cpu", "top 5 processes by CPU % [{pid, comm, value}]", Unit::Json, Rate),
    key("top.mem", "top 5 processes by resident memory, bytes", Unit::Json, Rate),
    key("top.io", "top 5 processes by storage I/O, bytes/s (extra: write part)", Unit::Json, Rate),
    key("top.net", "top 5 processes by socket bytes/s, received + sent (extra: sent part); absent without BPF", Unit::Json, Rate),
    key("cgroups", "every control group read (to the daemon's --cgroup-depth): [{path, depth, cpu_percent, throttled_percent, memory, io_read_bps, io_write_bps, pids, psi_cpu, psi_memory, psi_io, stall_percent, missing ...}]; absent without cgroup v2", Unit::Json, Rate),
    key("network.links", "every interface: [{name, is_default, rx_bps, tx_bps, rx_pps, tx_pps, rx_bytes, tx_bytes, rx_errors, tx_errors, rx_dropped, tx_dropped}]", Unit::Json, Rate),
    key("network.sockets", "socket payload bytes/s of all processes, by kind: {attribution, rx_bps, tx_bps, tcp, udp, unix, other, exited_rx_bytes, exited_tx_bytes, lost, crowded_rx_bps, crowded_tx_bps, crowded_users, incomplete: per-process figures miss processes whose user held its share of the table}; absent without BPF", Unit::Json, Rate),
    key("network.attribution", "whose socket bytes the per-process figures are: caller, or unavailable (no BPF)", Unit::Text, Instant),
    key("gpu.busy", "GPU busy % (where a GPU exists)", Unit::Percent, Rate),
    key("gpu.freq_mhz", "GPU frequency, MHz", Unit::Megahertz, Instant),
    key("power.profile", "platform power profile", Unit::Text, Instant),
    key("battery.percent", "battery charge %", Unit::Percent, Instant),
    key("battery.status", "Charging, Discharging, Full, ...", Unit::Text, Instant),
    key("battery.power_w", "battery power draw, W", Unit::Watts, Instant),
    key("battery.charging", "the battery is charging", Unit::Bool, Instant),
    key("battery.time_remaining_secs", "seconds until empty (discharging) or full (charging) at the present draw", Unit::Seconds, Instant),
    key("level", "alert level: normal, warning, critical", Unit::Text, Rate),
    key("source", "bpf or procfs", Unit::Text, Instant),
    key("snapshot", "every metric and process (the `kernstat snapshot --json` object)", Unit::Json, Rate),
    key("summary", "the snapshot without the per-process list (what `bar --daemon` renders)", Unit::Json, Rate),
];

/// The row of `key`, if it is a system key.
pub fn system_key(key: &str) -> Option<&'static KeyInfo> {
    SYSTEM_KEYS.iter().find(|k| k.key == key)
}

/// Keys that name other users' processes (pid, command, CPU, memory, I/O): a system
/// daemon on a machine whose /proc hides them keeps them out of its world-readable
/// snapshot and answers them to root only.
pub const PER_PROCESS_KEYS: &[&str] = &[
    "top.cpu", "top.mem", "top.io", "top.net", "snapshot", "summary",
];

/// Keys that carry per-process I/O or network counters (or lists ranked by them): a
/// system daemon answers each user with their own processes' counters only, root with
/// all, and publishes them for everyone (the snapshot) with none.
pub const COUNTER_KEYS: &[&str] = &[
    "top.io",
    "top.net",
    "snapshot",
    "summary",
    "tcp.retrans_top",
    "why.findings",
];

/// Per-group keys start with this, then the group's path, a dot and a field.
pub const CGROUP_PREFIX: &str = "cgroup.";

/// The fields of `cgroup.<path>.<field>` and what they mean.
pub const CGROUP_FIELDS: &[(&str, &str)] = &[
    (
        "cpu_percent",
        "CPU % of one core over the last sample, its children included",
    ),
    (
        "throttled_percent",
        "share of its cpu.max periods throttled, % (null without a quota)",
    ),
    (
        "memory",
        "memory.current, bytes (null without the memory controller)",
    ),
    ("memory_max", "memory.max, bytes (null: no limit)"),
    ("memory_high", "memory.high, bytes (null: none)"),
    ("psi_cpu", "cpu.pressure some avg10, %"),
    ("psi_memory", "memory.pressure some avg10, %"),
    ("psi_io", "io.pressure some avg10, %"),
    ("io_read_bps", "bytes/s read from storage"),
    ("io_write_bps", "bytes/s written to storage"),
    ("pids", "tasks in it (pids.current)"),
];

/// Whether `key` names a field of a group (`cgroup./system.slice.memory`).
pub fn is_cgroup_key(key: &str) -> bool {
    key.strip_prefix(CGROUP_PREFIX)
        .and_then(|rest| rest.rsplit_once('.'))
        .is_some_and(|(path, field)| {
            path.starts_with('/') && CGROUP_FIELDS.iter().any(|(f, _)| *f == field)
        })
}
