//! System metrics: every figure of the sampler's model published as its own key, plus
//! the whole snapshot (for `kernstat bar --daemon`). Keys for devices the machine lacks
//! (battery, GPU, temperature...) are simply not published.

use kernstat_model::Model;
use kernstat_render::SnapshotView;
use serde::Serialize;

use crate::cache::Cache;

fn put<T: Serialize + ?Sized>(cache: &Cache, key: &str, v: &T) {
    if let Ok(json) = serde_json::to_vec(v) {
        cache.put(key, None, json);
    }
}

/// Every system key and its meaning (for `list` documentation and the README).
pub const SYSTEM_KEYS: &[(&str, &str)] = &[
    ("cpu.percent", "machine CPU busy %"),
    ("cpu.cores", "busy % of each CPU"),
    ("cpu.freq_mhz", "CPU frequency, MHz (where cpufreq exists)"),
    ("cpu.temp_c", "CPU temperature, °C (where a sensor exists)"),
    ("mem.used", "memory used, bytes (total - available)"),
    ("mem.total", "memory total, bytes"),
    ("mem.available", "memory available, bytes"),
    ("mem.percent", "memory used %"),
    ("swap.used", "swap used, bytes"),
    ("swap.in_bps", "swap-in rate, bytes/s"),
    ("swap.out_bps", "swap-out rate, bytes/s"),
    ("load.one", "1-minute load average"),
    ("load.five", "5-minute load average"),
    ("load.fifteen", "15-minute load average"),
    ("psi.cpu.some", "CPU pressure, some, avg10 %"),
    ("psi.memory.some", "memory pressure, some, avg10 %"),
    ("psi.memory.full", "memory pressure, full, avg10 %"),
    ("psi.io.some", "I/O pressure, some, avg10 %"),
    ("psi.io.full", "I/O pressure, full, avg10 %"),
    ("procs.count", "processes"),
    ("procs.blocked", "processes in D"),
    ("procs.zombie", "zombie processes"),
    ("tasks.count", "tasks (threads)"),
    ("tasks.running", "tasks running or runnable"),
    ("top.cpu", "top 5 processes by CPU % [{pid, comm, value}]"),
    ("top.mem", "top 5 processes by resident memory, bytes"),
    (
        "top.io",
        "top 5 processes by storage I/O, bytes/s (extra: write part)",
    ),
    ("gpu.busy", "GPU busy % (where a GPU exists)"),
    ("gpu.freq_mhz", "GPU frequency, MHz"),
    ("power.profile", "platform power profile"),
    ("battery.percent", "battery charge %"),
    ("battery.status", "Charging, Discharging, Full, ..."),
    ("battery.power_w", "battery power draw, W"),
    ("level", "alert level: normal, warning, critical"),
    ("source", "bpf or procfs"),
    (
        "snapshot",
        "every metric and process (the `kernstat snapshot --json` object)",
    ),
    (
        "summary",
        "the snapshot without the per-process list (what `bar --daemon` renders)",
    ),
];

/// Whether `key` is a rate or a share of time, which takes two samples some time apart
/// (the others are readings of one instant).
pub fn is_rate(key: &str) -> bool {
    key.starts_with("cpu.percent")
        || key == "cpu.cores"
        || key.ends_with("_bps")
        || key.starts_with("top.")
        || key == "gpu.busy"
        || key == "level"
        || key == "snapshot"
        || key == "summary"
}

/// Two decimals, as /proc/loadavg prints load and as a prompt wants a percentage (the
/// snapshot key keeps full precision).
fn r2(v: f64) -> f64 {
    (v * 100.0).round() / 100.0
}

/// Publishes one model.
pub fn publish(cache: &Cache, m: &Model, sample_us: f64) {
    put(cache, "cpu.percent", &r2(m.cpu_percent));
    let cores: Vec<f64> = m.cores_percent.iter().map(|&c| r2(c)).collect();
    put(cache, "cpu.cores", &cores);
    if let Some(f) = m.hw.cpu_freq_mhz {
        put(cache, "cpu.freq_mhz", &f);
    }
    if let Some(t) = m.hw.temp_c {
        put(cache, "cpu.temp_c", &t);
    }
    put(cache, "mem.used", &m.mem.used_bytes);
    put(cache, "mem.total", &m.mem.total_bytes);
    put(cache, "mem.available", &m.mem.available_bytes);
    put(cache, "mem.percent", &r2(m.mem.used_percent));
    put(cache, "swap.used", &m.mem.swap_used_bytes);
    put(cache, "swap.in_bps", &m.swap_in_bps.round());
    put(cache, "swap.out_bps", &m.swap_out_bps.round());
    put(cache, "load.one", &r2(m.load[0]));
    put(cache, "load.five", &r2(m.load[1]));
    put(cache, "load.fifteen", &r2(m.load[2]));
    let psi = [
        ("psi.cpu.some", m.psi.cpu_some),
        ("psi.memory.some", m.psi.memory_some),
        ("psi.memory.full", m.psi.memory_full),
        ("psi.io.some", m.psi.io_some),
        ("psi.io.full", m.psi.io_full),
    ];
    for (k, l) in psi {
        if let Some(l) = l {
            put(cache, k, &l.avg10);
        }
    }
    put(cache, "procs.count", &m.process_count);
    put(cache, "procs.blocked", &m.blocked_procs);
    put(cache, "procs.zombie", &m.zombie_procs);
    put(cache, "tasks.count", &m.task_count);
    put(cache, "tasks.running", &m.running_tasks);
    put(cache, "top.cpu", &m.top_cpu);
    put(cache, "top.mem", &m.top_mem);
    put(cache, "top.io", &m.top_io);
    if let Some(g) = m.gpu_busy_percent {
        put(cache, "gpu.busy", &r2(g));
    }
    if let Some(f) = m.hw.gpu.and_then(|g| g.freq_mhz) {
        put(cache, "gpu.freq_mhz", &f);
    }
    if let Some(p) = m.hw.power_profile {
        put(cache, "power.profile", p.as_str());
    }
    if let Some(b) = m.hw.battery {
        put(cache, "battery.percent", &b.percent);
        put(cache, "battery.status", b.status.as_str());
        if let Some(w) = b.power_w {
            put(cache, "battery.power_w", &w);
        }
    }
    put(cache, "level", m.level.as_str());
    put(cache, "source", m.source.as_str());
    put(
        cache,
        "snapshot",
        &SnapshotView {
            model: m,
            sample_us,
            self_cost_percent: None,
        },
    );
    // Bars need the aggregates and top lists, not every process: a tenth of the bytes
    // to send and parse each tick.
    let summary = Model {
        procs: Vec::new(),
        cores_percent: m.cores_percent.clone(),
        ..*m
    };
    put(
        cache,
        "summary",
        &SnapshotView {
            model: &summary,
            sample_us,
            self_cost_percent: None,
        },
    );
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
            assert!(
                SYSTEM_KEYS.iter().any(|(n, _)| *n == k),
                "{k} is documented"
            );
        }
    }
}
