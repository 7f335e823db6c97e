//! System metrics: every figure of the sampler's model published as its own key, plus
//! the whole snapshot (for `kernstat bar --daemon`). Keys for devices the machine lacks
//! (battery, GPU, temperature...) are simply not published.
//!
//! One table, [`METRICS`], says everything about a key: its name, what it means, its
//! unit, whether it is a rate (needs two samples some time apart), and how to read it
//! from a model. Publishing, `kernstat get --list`, the direct (daemon-less) path, the
//! documentation check and the Prometheus endpoint all read this table, so a key cannot
//! be published without being documented, or documented without being published.

use kernstat_model::{Model, Top, TOP_N};
use kernstat_render::SnapshotView;
use serde::{Serialize, Serializer};

use crate::cache::Cache;

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

/// A value read from a model, serialised as the JSON clients receive.
#[derive(Debug)]
pub enum Value<'a> {
    /// A floating-point figure, published with two decimals (as /proc/loadavg prints
    /// load and as a prompt wants a percentage; the snapshot keeps full precision).
    Rounded(f64),
    /// A floating-point figure, published whole.
    Float(f64),
    /// A single-precision reading from sysfs, published as the driver gave it.
    Single(f32),
    /// An integer.
    Int(u64),
    /// A word.
    Text(&'a str),
    /// Yes or no.
    Flag(bool),
    /// Per-CPU percentages (two decimals each).
    PerCpu(&'a [f64]),
    /// A top-N list.
    Top(&'a Top<TOP_N>),
    /// JSON made by the getter (snapshot, summary).
    Json(Vec<u8>),
}

fn r2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

impl Value<'_> {
    /// The figure as a number, for series that are one number (None for words, lists).
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            Value::Rounded(v) | Value::Float(v) => Some(v),
            Value::Single(v) => Some(v as f64),
            Value::Int(v) => Some(v as f64),
            Value::Flag(b) => Some(if b { 1.0 } else { 0.0 }),
            _ => None,
        }
    }

    /// The JSON clients receive.
    pub fn into_json(self) -> Vec<u8> {
        match self {
            Value::Json(j) => j,
            v => serde_json::to_vec(&v).unwrap_or_else(|_| b"null".to_vec()),
        }
    }
}

impl Serialize for Value<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Value::Rounded(v) => s.serialize_f64(r2(v)),
            Value::Float(v) => s.serialize_f64(v),
            Value::Single(v) => s.serialize_f32(v),
            Value::Int(v) => s.serialize_u64(v),
            Value::Text(t) => s.serialize_str(t),
            Value::Flag(b) => s.serialize_bool(b),
            Value::PerCpu(c) => s.collect_seq(c.iter().map(|&v| r2(v))),
            Value::Top(t) => t.serialize(s),
            // Already JSON: written as it is (serde_json's raw values), not re-parsed.
            Value::Json(ref j) => std::str::from_utf8(j)
                .ok()
                .and_then(|t| serde_json::value::RawValue::from_string(t.to_string()).ok())
                .ok_or_else(|| serde::ser::Error::custom("not JSON"))?
                .serialize(s),
        }
    }
}

/// What a getter reads: the model and how long its sample took.
#[derive(Clone, Copy, Debug)]
pub struct Sample<'a> {
    /// The model.
    pub model: &'a Model,
    /// Wall time of the sample, microseconds.
    pub sample_us: f64,
}

/// How a key appears on the Prometheus endpoint (rates and lists do not: the endpoint
/// exports the counters they are computed from, and per-process series of its own).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Prom {
    /// Not exported as itself.
    None,
    /// A gauge: the value times `scale` (to the base unit: MHz to hertz, % to a ratio).
    Gauge(&'static str, f64),
    /// An info metric: the word as the value of a label.
    Info(&'static str, &'static str),
}

/// One key.
#[derive(Clone, Copy)]
pub struct Metric {
    /// The key clients ask for.
    pub key: &'static str,
    /// What it means (for `get --list`, the docs and Prometheus' HELP).
    pub help: &'static str,
    /// Its unit.
    pub unit: Unit,
    /// Instant reading or rate.
    pub kind: Kind,
    /// Its value in a sample; None when the machine lacks the device.
    pub value: for<'a> fn(&Sample<'a>) -> Option<Value<'a>>,
    /// Its series on the Prometheus endpoint.
    pub prom: Prom,
}

impl std::fmt::Debug for Metric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metric").field("key", &self.key).finish()
    }
}

const fn metric(
    key: &'static str,
    help: &'static str,
    unit: Unit,
    kind: Kind,
    value: for<'a> fn(&Sample<'a>) -> Option<Value<'a>>,
) -> Metric {
    Metric {
        key,
        help,
        unit,
        kind,
        value,
        prom: Prom::None,
    }
}

impl Metric {
    /// The same key, exported to Prometheus as `prom`.
    const fn exported(self, prom: Prom) -> Metric {
        Metric { prom, ..self }
    }
}

fn snapshot_json(s: &Sample<'_>, model: &Model) -> Vec<u8> {
    serde_json::to_vec(&SnapshotView {
        model,
        sample_us: s.sample_us,
        self_cost_percent: None,
    })
    .unwrap_or_else(|_| b"null".to_vec())
}

use Kind::{Instant, Rate};
use Value::{Int, Rounded};

/// Every system key.
pub const METRICS: &[Metric] = &[
    metric(
        "cpu.percent",
        "machine CPU busy % (all CPUs = 100)",
        Unit::Percent,
        Rate,
        |s| Some(Rounded(s.model.cpu_percent)),
    ),
    metric("cpu.cores", "busy % of each CPU", Unit::Json, Rate, |s| {
        Some(Value::PerCpu(&s.model.cores_percent))
    }),
    metric(
        "cpu.freq_mhz",
        "CPU frequency, MHz (where cpufreq exists)",
        Unit::Megahertz,
        Instant,
        |s| s.model.hw.cpu_freq_mhz.map(Value::Single),
    )
    .exported(Prom::Gauge("kernstat_cpu_frequency_hertz", 1e6)),
    metric(
        "cpu.temp_c",
        "CPU temperature, °C (where a sensor exists)",
        Unit::Celsius,
        Instant,
        |s| s.model.hw.temp_c.map(Value::Single),
    )
    .exported(Prom::Gauge("kernstat_cpu_temperature_celsius", 1.0)),
    metric(
        "mem.used",
        "memory used, bytes (total - available)",
        Unit::Bytes,
        Instant,
        |s| Some(Int(s.model.mem.used_bytes)),
    )
    .exported(Prom::Gauge("kernstat_memory_used_bytes", 1.0)),
    metric(
        "mem.total",
        "memory total, bytes",
        Unit::Bytes,
        Instant,
        |s| Some(Int(s.model.mem.total_bytes)),
    )
    .exported(Prom::Gauge("kernstat_memory_total_bytes", 1.0)),
    metric(
        "mem.available",
        "memory available, bytes",
        Unit::Bytes,
        Instant,
        |s| Some(Int(s.model.mem.available_bytes)),
    )
    .exported(Prom::Gauge("kernstat_memory_available_bytes", 1.0)),
    metric(
        "mem.percent",
        "memory used %",
        Unit::Percent,
        Instant,
        |s| Some(Rounded(s.model.mem.used_percent)),
    ),
    metric("swap.used", "swap used, bytes", Unit::Bytes, Instant, |s| {
        Some(Int(s.model.mem.swap_used_bytes))
    })
    .exported(Prom::Gauge("kernstat_swap_used_bytes", 1.0)),
    metric(
        "swap.in_bps",
        "swap-in rate, bytes/s",
        Unit::BytesPerSecond,
        Rate,
        |s| Some(Value::Float(s.model.swap_in_bps.round())),
    ),
    metric(
        "swap.out_bps",
        "swap-out rate, bytes/s",
        Unit::BytesPerSecond,
        Rate,
        |s| Some(Value::Float(s.model.swap_out_bps.round())),
    ),
    metric(
        "load.one",
        "1-minute load average",
        Unit::Load,
        Instant,
        |s| Some(Rounded(s.model.load[0])),
    )
    .exported(Prom::Gauge("kernstat_load1", 1.0)),
    metric(
        "load.five",
        "5-minute load average",
        Unit::Load,
        Instant,
        |s| Some(Rounded(s.model.load[1])),
    )
    .exported(Prom::Gauge("kernstat_load5", 1.0)),
    metric(
        "load.fifteen",
        "15-minute load average",
        Unit::Load,
        Instant,
        |s| Some(Rounded(s.model.load[2])),
    )
    .exported(Prom::Gauge("kernstat_load15", 1.0)),
    metric(
        "psi.cpu.some",
        "CPU pressure, some, avg10 %",
        Unit::Percent,
        Instant,
        |s| s.model.psi.cpu_some.map(|l| Value::Single(l.avg10)),
    ),
    metric(
        "psi.memory.some",
        "memory pressure, some, avg10 %",
        Unit::Percent,
        Instant,
        |s| s.model.psi.memory_some.map(|l| Value::Single(l.avg10)),
    ),
    metric(
        "psi.memory.full",
        "memory pressure, full, avg10 %",
        Unit::Percent,
        Instant,
        |s| s.model.psi.memory_full.map(|l| Value::Single(l.avg10)),
    ),
    metric(
        "psi.io.some",
        "I/O pressure, some, avg10 %",
        Unit::Percent,
        Instant,
        |s| s.model.psi.io_some.map(|l| Value::Single(l.avg10)),
    ),
    metric(
        "psi.io.full",
        "I/O pressure, full, avg10 %",
        Unit::Percent,
        Instant,
        |s| s.model.psi.io_full.map(|l| Value::Single(l.avg10)),
    ),
    metric("procs.count", "processes", Unit::Count, Instant, |s| {
        Some(Int(s.model.process_count))
    })
    .exported(Prom::Gauge("kernstat_processes", 1.0)),
    metric(
        "procs.blocked",
        "processes in D",
        Unit::Count,
        Instant,
        |s| Some(Int(s.model.blocked_procs)),
    )
    .exported(Prom::Gauge("kernstat_processes_blocked", 1.0)),
    metric(
        "procs.zombie",
        "zombie processes",
        Unit::Count,
        Instant,
        |s| Some(Int(s.model.zombie_procs)),
    )
    .exported(Prom::Gauge("kernstat_processes_zombie", 1.0)),
    metric(
        "tasks.count",
        "tasks (threads)",
        Unit::Count,
        Instant,
        |s| Some(Int(s.model.task_count)),
    )
    .exported(Prom::Gauge("kernstat_tasks", 1.0)),
    metric(
        "tasks.running",
        "tasks running or runnable",
        Unit::Count,
        Instant,
        |s| Some(Int(s.model.running_tasks)),
    )
    .exported(Prom::Gauge("kernstat_tasks_running", 1.0)),
    metric(
        "top.cpu",
        "top 5 processes by CPU % [{pid, comm, value}]",
        Unit::Json,
        Rate,
        |s| Some(Value::Top(&s.model.top_cpu)),
    ),
    metric(
        "top.mem",
        "top 5 processes by resident memory, bytes",
        Unit::Json,
        Rate,
        |s| Some(Value::Top(&s.model.top_mem)),
    ),
    metric(
        "top.io",
        "top 5 processes by storage I/O, bytes/s (extra: write part)",
        Unit::Json,
        Rate,
        |s| Some(Value::Top(&s.model.top_io)),
    ),
    metric(
        "top.net",
        "top 5 processes by socket bytes/s, received + sent (extra: sent part); absent without BPF",
        Unit::Json,
        Rate,
        |s| s.model.net.as_ref().map(|n| Value::Top(&n.top)),
    ),
    metric(
        "cgroups",
        "every control group read (to the daemon's --cgroup-depth): [{path, depth, cpu_percent, throttled_percent, memory, io_read_bps, io_write_bps, pids, psi_cpu, psi_memory, psi_io, stall_percent, missing ...}]; absent without cgroup v2",
        Unit::Json,
        Rate,
        |s| {
            if s.model.cgroups.is_empty() {
                return None;
            }
            Some(Value::Json(serde_json::to_vec(&s.model.cgroups).ok()?))
        },
    ),
    metric(
        "network.links",
        "every interface: [{name, is_default, rx_bps, tx_bps, rx_pps, tx_pps, rx_bytes, tx_bytes, rx_errors, tx_errors, rx_dropped, tx_dropped}]",
        Unit::Json,
        Rate,
        |s| {
            Some(Value::Json(
                serde_json::to_vec(&s.model.links).unwrap_or_else(|_| b"[]".to_vec()),
            ))
        },
    ),
    metric(
        "network.sockets",
        "socket payload bytes/s of all processes, by kind: {attribution, rx_bps, tx_bps, tcp, udp, unix, other, exited_rx_bytes, exited_tx_bytes, lost}; absent without BPF",
        Unit::Json,
        Rate,
        |s| {
            let n = s.model.net.as_ref()?;
            let mut n = n.clone();
            n.top = Default::default();
            Some(Value::Json(serde_json::to_vec(&n).ok()?))
        },
    ),
    metric(
        "network.attribution",
        "whose socket bytes the per-process figures are: caller, or unavailable (no BPF)",
        Unit::Text,
        Instant,
        |s| {
            Some(Value::Text(
                s.model
                    .net
                    .as_ref()
                    .map_or("unavailable", |n| n.attribution.as_str()),
            ))
        },
    )
    .exported(Prom::Info("kernstat_network_attribution", "attribution")),
    metric(
        "gpu.busy",
        "GPU busy % (where a GPU exists)",
        Unit::Percent,
        Rate,
        |s| s.model.gpu_busy_percent.map(Rounded),
    )
    .exported(Prom::Gauge("kernstat_gpu_busy_ratio", 0.01)),
    metric(
        "gpu.freq_mhz",
        "GPU frequency, MHz",
        Unit::Megahertz,
        Instant,
        |s| {
            s.model
                .hw
                .gpu
                .and_then(|g| g.freq_mhz)
                .map(|f| Int(f.into()))
        },
    )
    .exported(Prom::Gauge("kernstat_gpu_frequency_hertz", 1e6)),
    metric(
        "power.profile",
        "platform power profile",
        Unit::Text,
        Instant,
        |s| {
            s.model
                .hw
                .power_profile
                .as_ref()
                .map(|p| Value::Text(p.as_str()))
        },
    )
    .exported(Prom::Info("kernstat_power_profile", "profile")),
    metric(
        "battery.percent",
        "battery charge %",
        Unit::Percent,
        Instant,
        |s| s.model.hw.battery.map(|b| Value::Single(b.percent)),
    )
    .exported(Prom::Gauge("kernstat_battery_charge_ratio", 0.01)),
    metric(
        "battery.status",
        "Charging, Discharging, Full, ...",
        Unit::Text,
        Instant,
        |s| {
            s.model
                .hw
                .battery
                .as_ref()
                .map(|b| Value::Text(b.status.as_str()))
        },
    )
    .exported(Prom::Info("kernstat_battery_status", "status")),
    metric(
        "battery.power_w",
        "battery power draw, W",
        Unit::Watts,
        Instant,
        |s| {
            s.model
                .hw
                .battery
                .and_then(|b| b.power_w)
                .map(Value::Single)
        },
    )
    .exported(Prom::Gauge("kernstat_battery_power_watts", 1.0)),
    metric(
        "battery.charging",
        "the battery is charging",
        Unit::Bool,
        Instant,
        |s| {
            s.model
                .hw
                .battery
                .as_ref()
                .map(|b| Value::Flag(b.status.as_str() == "Charging"))
        },
    ),
    metric(
        "battery.time_remaining_secs",
        "seconds until empty (discharging) or full (charging) at the present draw",
        Unit::Seconds,
        Instant,
        |s| {
            s.model
                .hw
                .battery
                .and_then(|b| b.time_remaining_s)
                .map(|t| Value::Int(u64::from(t)))
        },
    )
    .exported(Prom::Gauge("kernstat_battery_time_remaining_seconds", 1.0)),
    metric(
        "level",
        "alert level: normal, warning, critical",
        Unit::Text,
        Rate,
        |s| Some(Value::Text(s.model.level.as_str())),
    ),
    metric("source", "bpf or procfs", Unit::Text, Instant, |s| {
        Some(Value::Text(s.model.source.as_str()))
    })
    .exported(Prom::Info("kernstat_source", "source")),
    metric(
        "snapshot",
        "every metric and process (the `kernstat snapshot --json` object)",
        Unit::Json,
        Rate,
        |s| Some(Value::Json(snapshot_json(s, s.model))),
    ),
    metric(
        "summary",
        "the snapshot without the per-process list (what `bar --daemon` renders)",
        Unit::Json,
        Rate,
        |s| {
            // Bars need the aggregates and top lists, not every process: a tenth of the
            // bytes to send and parse each tick.
            let summary = Model {
                procs: Vec::new(),
                cores_percent: s.model.cores_percent.clone(),
                net: s.model.net.clone(),
                links: s.model.links.clone(),
                cgroups: Vec::new(),
                ..*s.model
            };
            Some(Value::Json(snapshot_json(s, &summary)))
        },
    ),
];

/// Keys that name other users' processes (pid, command, CPU, memory, I/O): a system
/// daemon on a machine whose /proc hides them ([`proc_hides_pids`]) keeps them out of
/// its world-readable snapshot and answers them to root only.
pub const PER_PROCESS_KEYS: &[&str] = &[
    "top.cpu", "top.mem", "top.io", "top.net", "snapshot", "summary",
];

/// Keys that carry per-process I/O or network counters (or lists ranked by them): a
/// system daemon answers each user with their own processes' counters only, root with
/// all, and publishes them for everyone (the snapshot) with none
/// ([`kernstat_model::Viewer`]).
pub const COUNTER_KEYS: &[&str] = &["top.io", "top.net", "snapshot", "summary"];

/// The value of one key computed from `sample` (None: the machine has none).
pub fn value_json(key: &str, sample: &Sample<'_>) -> Option<Vec<u8>> {
    let metric = metric_of(key)?;
    (metric.value)(sample).map(Value::into_json)
}

/// Whether /proc is mounted so that users cannot see each other's processes
/// (`hidepid=1`, `2`, `invisible`, `noaccess` or `ptraceable`).
pub fn proc_hides_pids() -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return false;
    };
    mountinfo_hides_pids(&info)
}

/// [`proc_hides_pids`] over a mountinfo text.
pub fn mountinfo_hides_pids(info: &str) -> bool {
    info.lines().any(|l| {
        let fields: Vec<&str> = l.split(' ').collect();
        let Some(sep) = fields.iter().position(|f| *f == "-") else {
            return false;
        };
        let (mount, fstype) = (fields.get(4), fields.get(sep + 1));
        let opts = [fields.get(5), fields.get(sep + 3)];
        mount == Some(&"/proc")
            && fstype == Some(&"proc")
            && opts.iter().flatten().flat_map(|o| o.split(',')).any(|o| {
                o.strip_prefix("hidepid=")
                    .is_some_and(|v| v != "0" && v != "off")
            })
    })
}

/// The row of `key`, if it is a system key.
pub fn metric_of(key: &str) -> Option<&'static Metric> {
    METRICS.iter().find(|m| m.key == key)
}

/// Publishes one model: every key the machine has a value for, and each control
/// group's fields as `cgroup.<path>.<field>`.
pub fn publish(cache: &Cache, m: &Model, sample_us: f64) {
    let sample = Sample {
        model: m,
        sample_us,
    };
    for metric in METRICS {
        if let Some(v) = (metric.value)(&sample) {
            cache.put(metric.key, None, v.into_json());
        }
    }
    // Groups that went away take their keys with them.
    if m.cgroups.is_empty() && cache.get("cgroups", None).is_none() {
        return;
    }
    let shown: std::collections::HashSet<&str> =
        m.cgroups.iter().map(|g| g.path.as_str()).collect();
    for key in cache.keys() {
        let gone = key
            .strip_prefix(CGROUP_PREFIX)
            .and_then(|rest| rest.rsplit_once('.'))
            .is_some_and(|(path, _)| !shown.contains(path));
        if gone {
            cache.remove(&key, None);
        }
    }
    for g in &m.cgroups {
        for (field, _) in CGROUP_FIELDS {
            let v = cgroup_field(g, field);
            let key = format!("{CGROUP_PREFIX}{}.{field}", g.path);
            cache.put(
                &key,
                None,
                serde_json::to_vec(&v).unwrap_or_else(|_| b"null".to_vec()),
            );
        }
    }
}

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

fn cgroup_field(g: &kernstat_model::cgroup::CgroupRate, field: &str) -> serde_json::Value {
    use serde_json::json;
    let avg10 = |p: &kernstat_model::cgroup::Pressure| p.some.map(|l| r2(f64::from(l.avg10)));
    match field {
        "cpu_percent" => json!(r2(g.cpu_percent)),
        "throttled_percent" => json!(g.throttled_percent.map(r2)),
        "memory" => json!(g.memory.map(|m| m.current)),
        "memory_max" => json!(g.memory.and_then(|m| m.max)),
        "memory_high" => json!(g.memory.and_then(|m| m.high)),
        "psi_cpu" => json!(avg10(&g.psi_cpu)),
        "psi_memory" => json!(avg10(&g.psi_memory)),
        "psi_io" => json!(avg10(&g.psi_io)),
        "io_read_bps" => json!(g.io_read_bps.map(r2)),
        "io_write_bps" => json!(g.io_write_bps.map(r2)),
        "pids" => json!(g.pids),
        _ => serde_json::Value::Null,
    }
}

/// Whether `key` names a field of a group (`cgroup./system.slice.memory`).
pub fn is_cgroup_key(key: &str) -> bool {
    key.strip_prefix(CGROUP_PREFIX)
        .and_then(|rest| rest.rsplit_once('.'))
        .is_some_and(|(path, field)| {
            path.starts_with('/') && CGROUP_FIELDS.iter().any(|(f, _)| *f == field)
        })
}

#[cfg(test)]
mod hidepid_tests {
    #[test]
    fn hidepid_is_read_from_mountinfo() {
        let plain = "22 1 0:21 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n";
        let hidden = "22 1 0:21 / /proc rw,relatime - proc proc rw,hidepid=invisible\n";
        let two = "22 1 0:21 / /proc rw,relatime - proc proc rw,hidepid=2,gid=4\n";
        let zero = "22 1 0:21 / /proc rw,relatime - proc proc rw,hidepid=0\n";
        let elsewhere = "30 22 0:50 / /srv/proc rw - proc proc rw,hidepid=2\n";
        assert!(!super::mountinfo_hides_pids(plain));
        assert!(super::mountinfo_hides_pids(hidden));
        assert!(super::mountinfo_hides_pids(two));
        assert!(!super::mountinfo_hides_pids(zero));
        assert!(!super::mountinfo_hides_pids(elsewhere));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publishes_what_the_model_has_and_nothing_it_lacks() {
        let c = Cache::new();
        let m = Model {
            cpu_percent: 12.5,
            load: [0.5, 0.25, 0.1],
            ..Default::default()
        };
        publish(&c, &m, 42.0);
        assert_eq!(&*c.get("cpu.percent", None).unwrap().json, b"12.5");
        assert_eq!(&*c.get("load.one", None).unwrap().json, b"0.5");
        assert!(
            c.get("battery.percent", None).is_none(),
            "no battery: no key"
        );
        let snap: serde_json::Value =
            serde_json::from_slice(&c.get("snapshot", None).unwrap().json).unwrap();
        assert_eq!(snap["cpu_percent"], 12.5);
        assert_eq!(snap["sample_us"], 42.0);
        for k in c.keys() {
            assert!(metric_of(&k).is_some(), "{k} is in the table");
        }
    }

    #[test]
    fn a_machine_with_every_device_publishes_every_key_of_the_table() {
        use kernstat_model::raw::{BatterySample, GpuSample, PsiLine};
        use kernstat_model::ShortStr;
        let line = PsiLine {
            avg10: 0.1,
            ..Default::default()
        };
        let mut m = Model {
            gpu_busy_percent: Some(3.333),
            ..Default::default()
        };
        m.hw.temp_c = Some(45.5);
        m.hw.cpu_freq_mhz = Some(2400.0);
        m.hw.gpu = Some(GpuSample {
            freq_mhz: Some(300),
            ..Default::default()
        });
        m.hw.power_profile = Some(ShortStr::from_str_lossy("balanced"));
        m.hw.battery = Some(BatterySample {
            percent: 87.0,
            status: ShortStr::from_str_lossy("Discharging"),
            power_w: Some(7.1),
            time_remaining_s: Some(3600),
        });
        m.psi.cpu_some = Some(line);
        m.psi.memory_some = Some(line);
        m.psi.memory_full = Some(line);
        m.psi.io_some = Some(line);
        m.psi.io_full = Some(line);
        m.net = Some(kernstat_model::net::NetModel::default());
        m.cgroups = vec![kernstat_model::cgroup::CgroupRate {
            path: "/system.slice".into(),
            ..Default::default()
        }];
        let c = Cache::new();
        publish(&c, &m, 1.0);
        let mut published = c.keys();
        published.sort();
        // Each group's fields, by the pattern the key list documents.
        let per_group: Vec<String> = published
            .iter()
            .filter(|k| k.starts_with("cgroup./"))
            .cloned()
            .collect();
        assert_eq!(per_group.len(), CGROUP_FIELDS.len(), "{per_group:?}");
        assert!(per_group.iter().all(|k| is_cgroup_key(k)));
        assert_eq!(
            &*c.get("cgroup./system.slice.memory", None).unwrap().json,
            b"null",
            "no memory controller in the group: null"
        );
        published.retain(|k| !k.starts_with("cgroup./"));
        // A group that goes away takes its keys along.
        m.cgroups.clear();
        publish(&c, &m, 1.0);
        assert!(c.keys().iter().all(|k| !k.starts_with("cgroup./")));
        let mut table: Vec<&str> = METRICS.iter().map(|m| m.key).collect();
        table.sort();
        assert_eq!(published, table);
        // Readings from sysfs keep the driver's single-precision figure in JSON.
        assert_eq!(&*c.get("battery.power_w", None).unwrap().json, b"7.1");
        // Derived from the status sysfs gave (Discharging) and the sample's estimate.
        assert_eq!(&*c.get("battery.charging", None).unwrap().json, b"false");
        assert_eq!(
            &*c.get("battery.time_remaining_secs", None).unwrap().json,
            b"3600"
        );
        assert_eq!(&*c.get("psi.io.full", None).unwrap().json, b"0.1");
        assert_eq!(&*c.get("gpu.busy", None).unwrap().json, b"3.33");
        assert_eq!(
            &*c.get("power.profile", None).unwrap().json,
            b"\"balanced\""
        );
    }

    #[test]
    fn json_values_serialise_as_the_json_they_hold() {
        let v = Value::Json(br#"{"a":[1,2]}"#.to_vec());
        assert_eq!(serde_json::to_string(&v).unwrap(), r#"{"a":[1,2]}"#);
        assert!(serde_json::to_string(&Value::Json(b"{".to_vec())).is_err());
    }
}
