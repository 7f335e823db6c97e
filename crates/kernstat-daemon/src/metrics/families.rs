//! The scrape's series families, one function per group of series (network, the
//! kernel's own counters, control groups), and the small encoders they share: a family,
//! an info metric, a single value, a labelled family, a histogram, the top processes.

use super::*;
use prometheus_client::encoding::{EncodeLabelSet, MetricEncoder};

pub(super) fn family(
    enc: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    kind: MetricType,
    body: impl FnOnce(&mut MetricEncoder<'_>) -> Result<(), std::fmt::Error>,
) -> Result<(), std::fmt::Error> {
    let mut m = enc.encode_descriptor(name, help, None, kind)?;
    body(&mut m)
}

/// An info metric as the text format 0.0.4 knows it (node_exporter's `*_info` gauges):
/// `name_info{label="value"} 1`. OpenMetrics' info type would break 0.0.4 parsers.
pub(super) fn info(
    enc: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    label: &str,
    value: &str,
) -> Result<(), std::fmt::Error> {
    let full = format!("{name}_info");
    let mut m = enc.encode_descriptor(&full, help, None, MetricType::Gauge)?;
    m.encode_family(&[(label, value)])?.encode_gauge(&1u64)
}

pub(super) fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// A per-process family: name, help, type, its processes, and each one's value.
pub(super) type ProcessFamily<'a> = (
    &'static str,
    &'static str,
    MetricType,
    Vec<&'a ProcRate>,
    fn(&ProcRate) -> f64,
);

/// A process's labels, written from its fields as they are (no string is built).
pub(super) type ProcLabels<'a> = ([(&'static str, u32); 1], [(&'static str, &'a str); 1]);

pub(super) fn proc_labels(p: &ProcRate) -> ProcLabels<'_> {
    ([("pid", p.pid)], [("comm", p.comm.as_str())])
}

/// A block operation's label (`read`, `write`, `op12`...), written without building a
/// string.
pub(super) struct OpLabel(pub kernstat_model::biolat::BioOp);

impl prometheus_client::encoding::EncodeLabelValue for OpLabel {
    fn encode(
        &self,
        encoder: &mut prometheus_client::encoding::LabelValueEncoder<'_>,
    ) -> Result<(), std::fmt::Error> {
        use std::fmt::Write;
        write!(encoder, "{}", self.0)
    }
}

/// The `n` processes with the largest `key` (ties: lower pid first), largest first.
pub(super) fn top_by(
    procs: &[ProcRate],
    n: usize,
    key: impl Fn(&ProcRate) -> f64,
) -> Vec<&ProcRate> {
    // One allocation whatever the number of processes (collect would grow it).
    let mut v: Vec<&ProcRate> = Vec::with_capacity(procs.len());
    v.extend(procs.iter().filter(|p| !p.kthread));
    v.sort_by(|a, b| key(b).total_cmp(&key(a)).then(a.pid.cmp(&b.pid)));
    v.truncate(n);
    v
}

pub(super) fn histogram(
    m: &mut MetricEncoder<'_>,
    e: &buckets::Encoded,
) -> Result<(), std::fmt::Error> {
    match &e.native {
        Some(n) => m.encode_histogram_with_native::<Vec<(String, String)>>(
            e.sum,
            e.count,
            &e.classic,
            None,
            NativeHistogram {
                schema: 0,
                zero_threshold: buckets::ZERO_THRESHOLD,
                zero_count: 0,
                negative: NativeHistogramBuckets {
                    spans: &[],
                    deltas: &[],
                },
                positive: NativeHistogramBuckets {
                    spans: &n.spans,
                    deltas: &n.deltas,
                },
                created: None,
            },
        ),
        None => m.encode_histogram::<Vec<(String, String)>>(e.sum, e.count, &e.classic, None),
    }
}

/// A counter or gauge without labels.
pub(super) fn single(
    enc: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    kind: MetricType,
    v: f64,
) -> Result<(), std::fmt::Error> {
    family(enc, name, help, kind, |m| encode_value(m, kind, v))
}

/// One counter's or gauge's value. A whole number (bytes, packets, events: most of the
/// series) is written as an integer: float formatting (`dtoa`) was 14 % of the
/// encoding's CPU when every value went through it (perf of one sample encoded 5,000
/// times in a row, 2026-11-27), and `1234` and `1234.0` are the same sample to a
/// scraper.
fn encode_value(
    m: &mut MetricEncoder<'_>,
    kind: MetricType,
    v: f64,
) -> Result<(), std::fmt::Error> {
    // Below 2^53 every whole f64 is exactly an integer.
    let whole = v.fract() == 0.0 && v.abs() < 9_007_199_254_740_992.0;
    match kind {
        MetricType::Counter if whole && v >= 0.0 => {
            m.encode_counter::<Vec<(String, String)>, u64, f64>(&(v as u64), None)
        }
        MetricType::Counter => m.encode_counter::<Vec<(String, String)>, f64, f64>(&v, None),
        _ if whole => m.encode_gauge(&(v as i64)),
        _ => m.encode_gauge(&v),
    }
}

/// A family of counters or gauges, one series per label set.
pub(super) fn labeled<L: EncodeLabelSet>(
    enc: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    kind: MetricType,
    rows: impl IntoIterator<Item = (L, f64)>,
) -> Result<(), std::fmt::Error> {
    family(enc, name, help, kind, |e| {
        for (labels, v) in rows {
            encode_value(&mut e.encode_family(&labels)?, kind, v)?;
        }
        Ok(())
    })
}

/// Per-interface counters (/proc/net/dev), all processes' socket bytes by kind, and
/// the top processes by socket bytes.
pub(super) fn network(
    enc: &mut DescriptorEncoder<'_>,
    s: &MetricsSample,
    top: usize,
) -> Result<(), std::fmt::Error> {
    use MetricType::Counter;
    let links = &s.model.links;
    type LinkValue = fn(&LinkRate) -> u64;
    let families: [(&str, &str, LinkValue); 8] = [
        (
            "kernstat_network_receive_bytes",
            "bytes received on an interface (/proc/net/dev)",
            |l| l.rx_bytes,
        ),
        (
            "kernstat_network_transmit_bytes",
            "bytes sent on an interface",
            |l| l.tx_bytes,
        ),
        (
            "kernstat_network_receive_packets",
            "packets received on an interface",
            |l| l.rx_packets,
        ),
        (
            "kernstat_network_transmit_packets",
            "packets sent on an interface",
            |l| l.tx_packets,
        ),
        (
            "kernstat_network_receive_errors",
            "receive errors on an interface",
            |l| l.rx_errors,
        ),
        (
            "kernstat_network_transmit_errors",
            "transmit errors on an interface",
            |l| l.tx_errors,
        ),
        (
            "kernstat_network_receive_drop",
            "packets dropped on receive",
            |l| l.rx_dropped,
        ),
        (
            "kernstat_network_transmit_drop",
            "packets dropped on transmit",
            |l| l.tx_dropped,
        ),
    ];
    if !links.is_empty() {
        for (name, help, value) in families {
            labeled(
                enc,
                name,
                help,
                Counter,
                links
                    .iter()
                    .map(|l| ([("device", l.name.as_str())], value(l) as f64)),
            )?;
        }
    }
    let Some(totals) = s.counters.socket_bytes else {
        return Ok(());
    };
    for (dir, name, help) in [
        (0, "kernstat_socket_receive_bytes", "socket payload bytes received by all processes, exited ones included, by socket kind (counted in the kernel at every receive)"),
        (1, "kernstat_socket_transmit_bytes", "socket payload bytes sent by all processes, by socket kind"),
    ] {
        labeled(
            enc,
            name,
            help,
            Counter,
            KINDS
                .iter()
                .zip(totals[dir])
                .map(|(kind, v)| ([("kind", *kind)], v as f64)),
        )?;
    }
    let mut busiest = top_by(&s.model.procs, top, |p| {
        p.net_rx_bps.unwrap_or(0.0) + p.net_tx_bps.unwrap_or(0.0)
    });
    busiest.retain(|p| {
        !p.counters_hidden && p.net_rx_bytes.unwrap_or(0) + p.net_tx_bytes.unwrap_or(0) > 0
    });
    for (name, help, value) in [
        (
            "kernstat_process_network_receive_bytes",
            "socket payload bytes a process received since kernstat started counting (the top processes by socket bytes over the last sample)",
            (|p: &ProcRate| p.net_rx_bytes.unwrap_or(0)) as fn(&ProcRate) -> u64,
        ),
        (
            "kernstat_process_network_transmit_bytes",
            "socket payload bytes a process sent since kernstat started counting (the top processes by socket bytes over the last sample)",
            |p: &ProcRate| p.net_tx_bytes.unwrap_or(0),
        ),
    ] {
        labeled(
            enc,
            name,
            help,
            Counter,
            busiest.iter().map(|p| (proc_labels(p), value(p) as f64)),
        )?;
    }
    Ok(())
}

/// The kernel's own counters (no hook): softirqs, faults, reclaim, OOM kills, TCP,
/// disks (/proc/diskstats), as counters (they only go forward).
pub(super) fn kernel_counters(
    enc: &mut DescriptorEncoder<'_>,
    k: &kernstat_model::counters::KernelCounters,
) -> Result<(), std::fmt::Error> {
    use kernstat_model::counters::SOFTIRQS;
    use MetricType::{Counter, Gauge};
    if !k.read {
        return Ok(());
    }
    labeled(
        enc,
        "kernstat_softirqs",
        "softirqs run, by kind, all CPUs (/proc/softirqs)",
        Counter,
        SOFTIRQS
            .iter()
            .zip(k.softirqs)
            .map(|(kind, n)| ([("kind", *kind)], n as f64)),
    )?;
    labeled(
        enc,
        "kernstat_page_faults",
        "page faults, minor and major (/proc/vmstat pgfault, pgmajfault)",
        Counter,
        [
            (
                [("kind", "minor")],
                k.pgfault.saturating_sub(k.pgmajfault) as f64,
            ),
            ([("kind", "major")], k.pgmajfault as f64),
        ],
    )?;
    labeled(
        enc,
        "kernstat_memory_reclaim_pages",
        "pages scanned and reclaimed by memory reclaim; direct: scanned by tasks stalled reclaiming themselves (/proc/vmstat)",
        Counter,
        [
            ([("kind", "scanned")], k.pgscan as f64),
            ([("kind", "reclaimed")], k.pgsteal as f64),
            ([("kind", "scanned_direct")], k.pgscan_direct as f64),
        ],
    )?;
    single(
        enc,
        "kernstat_oom_kills",
        "processes the OOM killer killed (/proc/vmstat oom_kill)",
        Counter,
        k.oom_kill as f64,
    )?;
    let tcp: [(&str, &str, u64); 4] = [
        (
            "kernstat_tcp_segments_sent",
            "TCP segments sent (/proc/net/snmp OutSegs)",
            k.tcp_out_segs,
        ),
        (
            "kernstat_tcp_segments_retransmitted",
            "TCP segments retransmitted (/proc/net/snmp RetransSegs)",
            k.tcp_retrans_segs,
        ),
        (
            "kernstat_tcp_connects",
            "TCP connections opened actively (/proc/net/snmp ActiveOpens)",
            k.tcp_active_opens,
        ),
        (
            "kernstat_tcp_connects_failed",
            "TCP connection attempts that failed (/proc/net/snmp AttemptFails)",
            k.tcp_attempt_fails,
        ),
    ];
    for (name, help, v) in tcp {
        single(enc, name, help, Counter, v as f64)?;
    }
    type DiskValue = fn(&kernstat_model::counters::DiskStat) -> f64;
    let disks: [(&str, &str, MetricType, DiskValue); 6] = [
        (
            "kernstat_disk_reads_completed",
            "reads completed (/proc/diskstats)",
            Counter,
            |d| d.reads as f64,
        ),
        (
            "kernstat_disk_writes_completed",
            "writes completed",
            Counter,
            |d| d.writes as f64,
        ),
        ("kernstat_disk_read_bytes", "bytes read", Counter, |d| {
            d.read_sectors as f64 * 512.0
        }),
        (
            "kernstat_disk_written_bytes",
            "bytes written",
            Counter,
            |d| d.write_sectors as f64 * 512.0,
        ),
        (
            "kernstat_disk_io_time_seconds",
            "time the device had I/O in flight (utilisation: its rate)",
            Counter,
            |d| d.io_ms as f64 / 1e3,
        ),
        (
            "kernstat_disk_io_in_progress",
            "requests in flight now",
            Gauge,
            |d| d.in_flight as f64,
        ),
    ];
    for (name, help, kind, value) in disks {
        labeled(
            enc,
            name,
            help,
            kind,
            k.disks
                .iter()
                .map(|d| ([("device", d.name.as_str())], value(d))),
        )?;
    }
    labeled(
        enc,
        "kernstat_disk_io_weighted_time_seconds",
        "time requests spent queued or in service, summed (its rate is the queue depth)",
        Counter,
        k.disks
            .iter()
            .map(|d| ([("device", d.name.as_str())], d.queue_ms as f64 / 1e3)),
    )?;
    Ok(())
}

/// Per-cgroup series, for every group the daemon reads (its --cgroup-depth bounds
/// them: 16 series per group with every controller, so 1,600 per 100 groups).
pub(super) fn cgroups(
    enc: &mut DescriptorEncoder<'_>,
    groups: &[kernstat_model::cgroup::CgroupRate],
) -> Result<(), std::fmt::Error> {
    use kernstat_model::cgroup::CgroupRate;
    use MetricType::{Counter, Gauge};
    if groups.is_empty() {
        return Ok(());
    }
    fn label(g: &CgroupRate) -> &str {
        g.path.as_str()
    }
    labeled(
        enc,
        "kernstat_cgroup_cpu_seconds",
        "CPU time of a control group and its children (cpu.stat), by mode",
        Counter,
        groups.iter().flat_map(|g| {
            [
                (
                    [("cgroup", label(g)), ("mode", "user")],
                    g.cpu.user_us as f64 / 1e6,
                ),
                (
                    [("cgroup", label(g)), ("mode", "system")],
                    g.cpu.system_us as f64 / 1e6,
                ),
            ]
        }),
    )?;
    // Each list below is allocated once at its largest (collect would grow it as it
    // goes): a scrape's allocations do not grow with the number of groups.
    let mut throttled: Vec<&CgroupRate> = Vec::with_capacity(groups.len());
    throttled.extend(groups.iter().filter(|g| g.cpu.throttled_us.is_some()));
    labeled(
        enc,
        "kernstat_cgroup_cpu_throttled_seconds",
        "time a group's tasks were throttled by its cpu.max quota (cpu.stat throttled_usec)",
        Counter,
        throttled.iter().map(|g| {
            (
                [("cgroup", label(g))],
                g.cpu.throttled_us.unwrap_or(0) as f64 / 1e6,
            )
        }),
    )?;
    labeled(
        enc,
        "kernstat_cgroup_cpu_throttled_periods",
        "cpu.max periods in which a group was throttled (cpu.stat nr_throttled)",
        Counter,
        throttled.iter().map(|g| {
            (
                [("cgroup", label(g))],
                g.cpu.throttled_periods.unwrap_or(0) as f64,
            )
        }),
    )?;
    let mut with_mem: Vec<(&CgroupRate, kernstat_model::cgroup::CgroupMemory)> =
        Vec::with_capacity(groups.len());
    with_mem.extend(groups.iter().filter_map(|g| g.memory.map(|m| (g, m))));
    labeled(
        enc,
        "kernstat_cgroup_memory_bytes",
        "memory a group uses (memory.current)",
        Gauge,
        with_mem
            .iter()
            .map(|(g, m)| ([("cgroup", label(g))], m.current as f64)),
    )?;
    labeled(
        enc,
        "kernstat_cgroup_memory_max_bytes",
        "a group's memory limit (memory.max), where one is set",
        Gauge,
        with_mem
            .iter()
            .filter_map(|(g, m)| m.max.map(|v| ([("cgroup", label(g))], v as f64))),
    )?;
    labeled(
        enc,
        "kernstat_cgroup_memory_oom_kills",
        "processes the OOM killer killed in a group (memory.events oom_kill)",
        Counter,
        with_mem
            .iter()
            .map(|(g, m)| ([("cgroup", label(g))], m.oom_kill as f64)),
    )?;
    let mut with_io: Vec<(&CgroupRate, u64, u64)> = Vec::with_capacity(groups.len());
    with_io.extend(groups.iter().filter_map(|g| {
        let io = g.io.as_ref()?;
        Some((
            g,
            io.iter().map(|d| d.rbytes).sum(),
            io.iter().map(|d| d.wbytes).sum(),
        ))
    }));
    labeled(
        enc,
        "kernstat_cgroup_io_read_bytes",
        "bytes a group read from storage, all devices (io.stat)",
        Counter,
        with_io
            .iter()
            .map(|(g, r, _)| ([("cgroup", label(g))], *r as f64)),
    )?;
    labeled(
        enc,
        "kernstat_cgroup_io_written_bytes",
        "bytes a group wrote to storage, all devices (io.stat)",
        Counter,
        with_io
            .iter()
            .map(|(g, _, w)| ([("cgroup", label(g))], *w as f64)),
    )?;
    labeled(
        enc,
        "kernstat_cgroup_pressure_stalled_seconds",
        "time a group's tasks were stalled on a resource (cgroup PSI: some = at least one, full = all non-idle)",
        Counter,
        groups.iter().flat_map(|g| {
            let rows = [
                ("cpu", "some", g.psi_cpu.some),
                ("cpu", "full", g.psi_cpu.full),
                ("memory", "some", g.psi_memory.some),
                ("memory", "full", g.psi_memory.full),
                ("io", "some", g.psi_io.some),
                ("io", "full", g.psi_io.full),
            ];
            rows.into_iter().filter_map(move |(resource, kind, line)| {
                let l = line?;
                Some((
                    [
                        ("cgroup", label(g)),
                        ("resource", resource),
                        ("kind", kind),
                    ],
                    l.total_us as f64 / 1e6,
                ))
            })
        }),
    )?;
    labeled(
        enc,
        "kernstat_cgroup_tasks",
        "tasks in a group (pids.current)",
        Gauge,
        groups
            .iter()
            .filter_map(|g| g.pids.map(|p| ([("cgroup", label(g))], p as f64))),
    )?;
    Ok(())
}
