//! System metrics: every figure of the sampler's model published as its own key, plus
//! the whole snapshot (for `kernstat bar --daemon`). Keys for devices the machine lacks
//! (battery, GPU, temperature...) are simply not published.
//!
//! The catalogue (kernstat-client's keys::system: [`SYSTEM_KEYS`]) says what each key
//! means, its unit and whether it is a rate; [`METRICS`] here reads each one from a
//! model, in the same order (a test checks it), and says how it appears on the
//! Prometheus endpoint. Publishing, the direct (daemon-less) path and the endpoint read
//! this table; `get --list` and the documentation check read the catalogue.

pub use kernstat_client::keys::system::{
    is_cgroup_key, system_key, KeyInfo, Kind, Unit, CGROUP_FIELDS, CGROUP_PREFIX, COUNTER_KEYS,
    PER_PROCESS_KEYS, SYSTEM_KEYS,
};
use kernstat_model::{Model, Top, TOP_N};
use kernstat_render::SnapshotView;
use serde::{Serialize, Serializer};

use crate::cache::Cache;

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

/// One key's value.
#[derive(Clone, Copy)]
pub struct Metric {
    /// The key clients ask for (the catalogue's row of the same place).
    pub key: &'static str,
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

const fn metric(key: &'static str, value: for<'a> fn(&Sample<'a>) -> Option<Value<'a>>) -> Metric {
    Metric {
        key,
        value,
        prom: Prom::None,
    }
}

impl Metric {
    /// The same key, exported to Prometheus as `prom`.
    const fn exported(self, prom: Prom) -> Metric {
        Metric { prom, ..self }
    }

    /// What the catalogue says of it (help, unit, kind).
    pub fn info(&self) -> &'static KeyInfo {
        system_key(self.key).expect("every metric is in the catalogue (tests check it)")
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

use Value::{Int, Rounded};

/// Every system key's value, in the catalogue's order ([`SYSTEM_KEYS`]).
pub const METRICS: &[Metric] = &[
    metric("cpu.percent", |s| Some(Rounded(s.model.cpu_percent))),
    metric("cpu.cores", |s| Some(Value::PerCpu(&s.model.cores_percent))),
    metric("cpu.freq_mhz", |s| {
        s.model.hw.cpu_freq_mhz.map(Value::Single)
    })
    .exported(Prom::Gauge("kernstat_cpu_frequency_hertz", 1e6)),
    metric("cpu.temp_c", |s| s.model.hw.temp_c.map(Value::Single))
        .exported(Prom::Gauge("kernstat_cpu_temperature_celsius", 1.0)),
    metric("mem.used", |s| Some(Int(s.model.mem.used_bytes)))
        .exported(Prom::Gauge("kernstat_memory_used_bytes", 1.0)),
    metric("mem.total", |s| Some(Int(s.model.mem.total_bytes)))
        .exported(Prom::Gauge("kernstat_memory_total_bytes", 1.0)),
    metric("mem.available", |s| Some(Int(s.model.mem.available_bytes)))
        .exported(Prom::Gauge("kernstat_memory_available_bytes", 1.0)),
    metric("mem.percent", |s| Some(Rounded(s.model.mem.used_percent))),
    metric("swap.used", |s| Some(Int(s.model.mem.swap_used_bytes)))
        .exported(Prom::Gauge("kernstat_swap_used_bytes", 1.0)),
    metric("swap.in_bps", |s| {
        Some(Value::Float(s.model.swap_in_bps.round()))
    }),
    metric("swap.out_bps", |s| {
        Some(Value::Float(s.model.swap_out_bps.round()))
    }),
    metric("load.one", |s| Some(Rounded(s.model.load[0])))
        .exported(Prom::Gauge("kernstat_load1", 1.0)),
    metric("load.five", |s| Some(Rounded(s.model.load[1])))
        .exported(Prom::Gauge("kernstat_load5", 1.0)),
    metric("load.fifteen", |s| Some(Rounded(s.model.load[2])))
        .exported(Prom::Gauge("kernstat_load15", 1.0)),
    metric("psi.cpu.some", |s| {
        s.model.psi.cpu_some.map(|l| Value::Single(l.avg10))
    }),
    metric("psi.memory.some", |s| {
        s.model.psi.memory_some.map(|l| Value::Single(l.avg10))
    }),
    metric("psi.memory.full", |s| {
        s.model.psi.memory_full.map(|l| Value::Single(l.avg10))
    }),
    metric("psi.io.some", |s| {
        s.model.psi.io_some.map(|l| Value::Single(l.avg10))
    }),
    metric("psi.io.full", |s| {
        s.model.psi.io_full.map(|l| Value::Single(l.avg10))
    }),
    metric("disk.util", |s| {
        let c = s.model.counters.as_ref()?;
        Some(Rounded(c.busiest_disk().map_or(0.0, |d| d.util_percent)))
    }),
    metric("disks", |s| {
        let c = s.model.counters.as_ref()?;
        Some(Value::Json(serde_json::to_vec(&c.disks).ok()?))
    }),
    metric("tcp.retrans_ps", |s| {
        s.model.counters.as_ref().map(|c| Rounded(c.tcp_retrans_ps))
    }),
    metric("tcp.retrans_percent", |s| {
        s.model
            .counters
            .as_ref()
            .map(|c| Rounded(c.tcp_retrans_percent))
    }),
    metric("tcp.retrans_top", |s| {
        let t = s.model.tcp.as_ref()?;
        Some(Value::Json(serde_json::to_vec(&t.top).ok()?))
    }),
    metric("tcp.connect_p99_ms", |s| {
        s.model.tcp.as_ref()?.connect_p99_ms.map(Rounded)
    }),
    metric("mem.reclaim_ps", |s| {
        s.model.counters.as_ref().map(|c| Rounded(c.pgscan_ps))
    }),
    metric("faults.major_ps", |s| {
        s.model.counters.as_ref().map(|c| Rounded(c.pgmajfault_ps))
    }),
    metric("oom.kills", |s| {
        s.model.counters.as_ref().map(|c| Int(c.oom_kills_total))
    }),
    metric("why.top", |s| {
        let top = s.model.why.as_ref()?["findings"].get(0).cloned();
        let text = match top {
            Some(f) if f["notable"] == true => f["verdict"].as_str().unwrap_or("").to_string(),
            _ => "ok".to_string(),
        };
        Some(Value::Json(serde_json::to_vec(&text).ok()?))
    }),
    metric("why.score", |s| {
        let f = s.model.why.as_ref()?["findings"].get(0)?.clone();
        let notable = f["notable"] == true;
        Some(Rounded(if notable {
            f["score"].as_f64().unwrap_or(0.0)
        } else {
            0.0
        }))
    }),
    metric("why.findings", |s| {
        Some(Value::Json(serde_json::to_vec(s.model.why.as_ref()?).ok()?))
    }),
    metric("oom.last", |s| {
        s.model.events.iter().rev().find_map(|e| match e {
            kernstat_model::events::Event::OomKill(_) => {
                Some(Value::Json(serde_json::to_vec(&e.line()).ok()?))
            }
        })
    }),
    metric("events.recent", |s| {
        Some(Value::Json(serde_json::to_vec(&s.model.events).ok()?))
    }),
    metric("procs.count", |s| Some(Int(s.model.process_count)))
        .exported(Prom::Gauge("kernstat_processes", 1.0)),
    metric("procs.blocked", |s| Some(Int(s.model.blocked_procs)))
        .exported(Prom::Gauge("kernstat_processes_blocked", 1.0)),
    metric("procs.zombie", |s| Some(Int(s.model.zombie_procs)))
        .exported(Prom::Gauge("kernstat_processes_zombie", 1.0)),
    metric("tasks.count", |s| Some(Int(s.model.task_count)))
        .exported(Prom::Gauge("kernstat_tasks", 1.0)),
    metric("tasks.running", |s| Some(Int(s.model.running_tasks)))
        .exported(Prom::Gauge("kernstat_tasks_running", 1.0)),
    metric("top.cpu", |s| Some(Value::Top(&s.model.top_cpu))),
    metric("top.mem", |s| Some(Value::Top(&s.model.top_mem))),
    metric("top.io", |s| Some(Value::Top(&s.model.top_io))),
    metric("top.net", |s| {
        s.model.net.as_ref().map(|n| Value::Top(&n.top))
    }),
    metric("cgroups", |s| {
        if s.model.cgroups.is_empty() {
            return None;
        }
        Some(Value::Json(serde_json::to_vec(&s.model.cgroups).ok()?))
    }),
    metric("network.links", |s| {
        Some(Value::Json(
            serde_json::to_vec(&s.model.links).unwrap_or_else(|_| b"[]".to_vec()),
        ))
    }),
    metric("network.sockets", |s| {
        let n = s.model.net.as_ref()?;
        let mut n = n.clone();
        n.top = Default::default();
        Some(Value::Json(serde_json::to_vec(&n).ok()?))
    }),
    metric("network.attribution", |s| {
        Some(Value::Text(
            s.model
                .net
                .as_ref()
                .map_or("unavailable", |n| n.attribution.as_str()),
        ))
    })
    .exported(Prom::Info("kernstat_network_attribution", "attribution")),
    metric("gpu.busy", |s| s.model.gpu_busy_percent.map(Rounded))
        .exported(Prom::Gauge("kernstat_gpu_busy_ratio", 0.01)),
    metric("gpu.freq_mhz", |s| {
        s.model
            .hw
            .gpu
            .and_then(|g| g.freq_mhz)
            .map(|f| Int(f.into()))
    })
    .exported(Prom::Gauge("kernstat_gpu_frequency_hertz", 1e6)),
    metric("power.profile", |s| {
        s.model
            .hw
            .power_profile
            .as_ref()
            .map(|p| Value::Text(p.as_str()))
    })
    .exported(Prom::Info("kernstat_power_profile", "profile")),
    metric("battery.percent", |s| {
        s.model.hw.battery.map(|b| Value::Single(b.percent))
    })
    .exported(Prom::Gauge("kernstat_battery_charge_ratio", 0.01)),
    metric("battery.status", |s| {
        s.model
            .hw
            .battery
            .as_ref()
            .map(|b| Value::Text(b.status.as_str()))
    })
    .exported(Prom::Info("kernstat_battery_status", "status")),
    metric("battery.power_w", |s| {
        s.model
            .hw
            .battery
            .and_then(|b| b.power_w)
            .map(Value::Single)
    })
    .exported(Prom::Gauge("kernstat_battery_power_watts", 1.0)),
    metric("battery.charging", |s| {
        s.model
            .hw
            .battery
            .as_ref()
            .map(|b| Value::Flag(b.status.as_str() == "Charging"))
    }),
    metric("battery.time_remaining_secs", |s| {
        s.model
            .hw
            .battery
            .and_then(|b| b.time_remaining_s)
            .map(|t| Value::Int(u64::from(t)))
    })
    .exported(Prom::Gauge("kernstat_battery_time_remaining_seconds", 1.0)),
    metric("level", |s| Some(Value::Text(s.model.level.as_str()))),
    metric("source", |s| Some(Value::Text(s.model.source.as_str())))
        .exported(Prom::Info("kernstat_source", "source")),
    metric("snapshot", |s| Some(Value::Json(snapshot_json(s, s.model)))),
    metric("summary", |s| {
        // Bars need the aggregates and top lists, not every process: a tenth of the
        // bytes to send and parse each tick.
        let summary = s.model.summary();
        Some(Value::Json(snapshot_json(s, &summary)))
    }),
];

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
    fn every_key_of_the_catalogue_is_read_in_its_order() {
        let ours: Vec<&str> = METRICS.iter().map(|m| m.key).collect();
        let catalogue: Vec<&str> = SYSTEM_KEYS.iter().map(|k| k.key).collect();
        assert_eq!(ours, catalogue);
    }

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
        m.counters = Some(Default::default());
        m.why = Some(
            serde_json::json!({"findings": [{"notable": true, "verdict": "x", "score": 0.5}]}),
        );
        m.tcp = Some(kernstat_model::tcp::TcpModel {
            connect_p99_ms: Some(1.0),
            ..Default::default()
        });
        m.events = vec![kernstat_model::events::Event::OomKill(Default::default())];
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
