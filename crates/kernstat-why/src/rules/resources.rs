//! One finder per resource: what its score is over the window, who caused it (the
//! parties) and who suffered (the victims), with the evidence a person can check.

use super::*;

pub(super) fn cpu(w: &Window<'_>, t: &Thresholds) -> Finding {
    let busy = w.end.busy_ns.saturating_sub(w.start.busy_ns) as f64;
    let util = busy / (w.dt_s * 1e9 * f64::from(w.end.ncpus));
    let delays = w.per_proc(|b, p| {
        p.run_delay_ns
            .saturating_sub(b.map_or(0, |b| b.run_delay_ns))
    });
    let waited: u64 = delays.iter().map(|d| d.1).sum();
    // A task of a group held back by its cpu.max quota stays runnable while throttled:
    // its wait is in PSI's `some` and in its run delay, on CPUs that may be idle. That
    // is the throttling finding's, not saturation: each task's run delay, up to the
    // time its group was throttled, comes off this score (on a 2-CPU guest one looping
    // task under a 0.2-CPU quota made `some` 78 % with the CPUs 12 % busy; a group
    // throttled a millisecond takes a millisecond off a task's wait, no more).
    let throttled = throttled_groups(w);
    let waited_throttled: u64 = delays
        .iter()
        .map(|(p, d)| {
            let held = throttled
                .iter()
                .filter(|(g, _)| within(p.cgroup.as_deref(), g))
                .map(|(_, ns)| *ns)
                .max()
                .unwrap_or(0);
            (*d).min(held)
        })
        .sum();
    let unthrottled = if waited > 0 {
        1.0 - waited_throttled as f64 / waited as f64
    } else {
        1.0
    };
    // PSI where the kernel has it; else the tasks' summed run delay per CPU.
    let score = unthrottled
        * w.stall(0)
            .unwrap_or_else(|| (waited as f64 / 1e9 / w.dt_s / f64::from(w.end.ncpus)).min(1.0));
    let used = w.per_proc(|b, p| p.cpu_ns.saturating_sub(b.map_or(0, |b| b.cpu_ns)));
    let culprits = top_parties(used, busy, 5);
    let mut victims = top_parties(delays, w.dt_s * 1e9, 5);
    victims.extend(group_victims(w, 0, 3));
    let mut evidence = vec![
        Evidence {
            what: format!("CPUs busy {} of {} CPUs", pct(util), w.end.ncpus),
            ..Evidence::default()
        },
        Evidence {
            what: format!(
                "tasks waited {:.2} s in all for a CPU (run delay, /proc/PID/schedstat)",
                waited as f64 / 1e9
            ),
            ..Evidence::default()
        },
    ];
    if waited_throttled > 0 {
        evidence.push(Evidence {
            what: format!(
                "{} of that wait was in throttled groups ({}): scored as throttling, not here",
                pct(1.0 - unthrottled),
                throttled
                    .iter()
                    .map(|(g, _)| *g)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            ..Evidence::default()
        });
    }
    let verdict = if score >= t.of(Resource::Cpu) {
        format!(
            "CPU saturated: tasks waited {} of the window to run (CPUs {} busy)",
            pct(score),
            pct(util)
        )
    } else {
        format!(
            "CPU: tasks waited {} of the window to run (CPUs {} busy)",
            pct(score),
            pct(util)
        )
    };
    let next = victims
        .iter()
        .find_map(|v| v.pid)
        .map_or("kernstat runqlat -P 5 1".to_string(), |pid| {
            format!("kernstat runqlat -p {pid} 5 1")
        });
    finding(
        (Resource::Cpu, score),
        t,
        verdict,
        culprits,
        victims,
        evidence,
        next,
    )
}

/// The groups throttled in the window: (path, how long, ns — at most the window's
/// length, as one task could wait no longer: cpu.stat sums its CPUs' throttled time).
pub(super) fn throttled_groups<'a>(w: &Window<'a>) -> Vec<(&'a str, u64)> {
    let window_ns = (w.dt_s * 1e9) as u64;
    let start = w.start.groups_by_path();
    w.end
        .groups
        .iter()
        .filter_map(|g| {
            let before = start.get(g.path.as_str())?;
            let d = g.throttled_us?.checked_sub(before.throttled_us?)?;
            (d > 0).then(|| (g.path.as_str(), (d * 1000).min(window_ns)))
        })
        .collect()
}

/// Whether a process's group `cgroup` is `group` or below it.
pub(super) fn within(cgroup: Option<&str>, group: &str) -> bool {
    cgroup.is_some_and(|c| {
        c == group || group == "/" || c.strip_prefix(group).is_some_and(|r| r.starts_with('/'))
    })
}

pub(super) fn memory(w: &Window<'_>, t: &Thresholds) -> Finding {
    let score = w.stall(1).unwrap_or(0.0);
    let full = w.stall(2).unwrap_or(0.0);
    let per_s = |a: u64, b: u64| b.saturating_sub(a) as f64 / w.dt_s;
    let swap_out = per_s(w.start.swap_out_pages, w.end.swap_out_pages);
    let swap_in = per_s(w.start.swap_in_pages, w.end.swap_in_pages);
    let mut evidence = vec![Evidence {
        what: format!(
            "all non-idle tasks stalled (memory full) {} of the window",
            pct(full)
        ),
        ..Evidence::default()
    }];
    if w.end.kernel.read && w.start.kernel.read {
        let k = (&w.start.kernel, &w.end.kernel);
        evidence.push(Evidence {
            what: format!(
                "reclaim scanned {:.0} pages/s ({:.0} by tasks reclaiming themselves), {:.0} major faults/s",
                per_s(k.0.pgscan, k.1.pgscan),
                per_s(k.0.pgscan_direct, k.1.pgscan_direct),
                per_s(k.0.pgmajfault, k.1.pgmajfault)
            ),
            ..Evidence::default()
        });
    }
    evidence.push(Evidence {
        what: format!("swapped out {:.0} and in {:.0} pages/s", swap_out, swap_in),
        threshold: Some("atop: > 10 swap-outs/s".into()),
        source: Some("atop's MEM/SWP thresholds".into()),
    });
    evidence.push(Evidence {
        what: format!(
            "memory available {:.0} MiB of {:.0} MiB",
            w.end.mem_available as f64 / (1 << 20) as f64,
            w.end.mem_total as f64 / (1 << 20) as f64
        ),
        ..Evidence::default()
    });
    let growth = w.per_proc(|b, p| p.rss_bytes.saturating_sub(b.map_or(0, |b| b.rss_bytes)));
    let grown: u64 = growth.iter().map(|g| g.1).sum();
    let culprits = if grown > 0 {
        top_parties(growth, grown as f64, 5)
    } else {
        let all: u64 = w.end.procs.iter().map(|p| p.rss_bytes).sum();
        top_parties(
            w.end
                .procs
                .iter()
                .filter(|p| !p.kthread)
                .map(|p| (p, p.rss_bytes))
                .collect(),
            all as f64,
            5,
        )
    };
    let verdict = if score >= t.of(Resource::Memory) {
        format!(
            "Memory pressure: tasks stalled on memory {} of the window",
            pct(score)
        )
    } else {
        format!("Memory: tasks stalled {} of the window", pct(score))
    };
    finding(
        (Resource::Memory, score),
        t,
        verdict,
        culprits,
        group_victims(w, 1, 5),
        evidence,
        "kernstat top --sort -mem".into(),
    )
}

pub(super) fn io(w: &Window<'_>, t: &Thresholds) -> Finding {
    let score = w.stall(3).unwrap_or(0.0);
    let mut evidence = vec![Evidence {
        what: format!(
            "all non-idle tasks stalled on I/O (io full) {} of the window",
            pct(w.stall(4).unwrap_or(0.0))
        ),
        ..Evidence::default()
    }];
    if let Some(r) = kernstat_model::counters::rates(&w.start.kernel, &w.end.kernel, w.dt_s) {
        if let Some(d) = r.busiest_disk() {
            evidence.push(Evidence {
                what: format!(
                    "{} busy {:.0} % of the window, {:.1} requests queued, {:.1} ms a request",
                    d.name, d.util_percent, d.queue_depth, d.await_ms
                ),
                threshold: Some(
                    "iostat: %util near 100 on one device, await well above the device's norm"
                        .into(),
                ),
                source: Some("iostat -x (the 60-second checklist)".into()),
            });
        }
    }
    let bytes = w.per_proc(|b, p| p.io_bytes.saturating_sub(b.map_or(0, |b| b.io_bytes)));
    let total: u64 = bytes.iter().map(|b| b.1).sum();
    let culprits = top_parties(bytes, total as f64, 5);
    let mut victims: Vec<Party> = w
        .end
        .procs
        .iter()
        .filter(|p| p.blocked && !p.kthread)
        .take(5)
        .map(|p| party(p, 0.0))
        .collect();
    victims.extend(group_victims(w, 2, 3));
    let verdict = if score >= t.of(Resource::Io) {
        format!(
            "I/O saturated: tasks stalled on storage {} of the window",
            pct(score)
        )
    } else {
        format!("I/O: tasks stalled {} of the window", pct(score))
    };
    finding(
        (Resource::Io, score),
        t,
        verdict,
        culprits,
        victims,
        evidence,
        "kernstat biolat -D 1 5".into(),
    )
}

pub(super) fn throttling(w: &Window<'_>, t: &Thresholds) -> Finding {
    let mut worst: Option<(&crate::GroupSnap, f64)> = None;
    let start = w.start.groups_by_path();
    for g in &w.end.groups {
        let (Some(now), Some(b)) = (g.throttled_us, start.get(g.path.as_str())) else {
            continue;
        };
        let share =
            (now.saturating_sub(b.throttled_us.unwrap_or(now)) as f64 / 1e6 / w.dt_s).min(1.0);
        if worst.is_none_or(|(_, s)| share > s) {
            worst = Some((g, share));
        }
    }
    let (score, culprits, evidence, verdict) = match worst {
        Some((g, share)) if share > 0.0 => {
            let mut c = vec![Party {
                pid: None,
                comm: String::new(),
                cgroup: Some(g.path.clone()),
                share,
            }];
            let inside = w.per_proc(|b, p| {
                if within(p.cgroup.as_deref(), &g.path) {
                    p.cpu_ns.saturating_sub(b.map_or(0, |b| b.cpu_ns))
                } else {
                    0
                }
            });
            let used: u64 = inside.iter().map(|x| x.1).sum();
            c.extend(top_parties(inside, used as f64, 3));
            let quota = g
                .quota
                .map(|(q, p)| format!("cpu.max {q} {p} ({:.2} CPUs)", q as f64 / p.max(1) as f64))
                .unwrap_or_default();
            (
                share,
                c,
                vec![Evidence {
                    what: format!("{} throttled {} of the window; {quota}", g.path, pct(share)),
                    ..Evidence::default()
                }],
                format!(
                    "CPU-throttled: {} was held back {} of the window by its cpu.max quota",
                    g.path,
                    pct(share)
                ),
            )
        }
        _ => (
            0.0,
            Vec::new(),
            Vec::new(),
            "No group throttled".to_string(),
        ),
    };
    let victims = culprits.clone();
    finding(
        (Resource::Throttling, score),
        t,
        verdict,
        culprits,
        victims,
        evidence,
        "kernstat cgroups --sort -throttled".into(),
    )
}

/// The segment size assumed when segments are estimated from bytes (Ethernet's MSS).
const SEGMENT_BYTES: u64 = 1448;
/// Retransmits counted per process below which no share is estimated from them.
const MIN_ATTRIBUTED_RETRANSMITS: u64 = 20;

pub(super) fn network(w: &Window<'_>, between: &Between<'_>, t: &Thresholds) -> Finding {
    let (k0, k1) = (&w.start.kernel, &w.end.kernel);
    let sent = k1.tcp_out_segs.saturating_sub(k0.tcp_out_segs);
    let retrans = k1.tcp_retrans_segs.saturating_sub(k0.tcp_retrans_segs);
    let share = if k0.read && k1.read && sent > 0 {
        retrans as f64 / sent as f64
    } else {
        0.0
    };
    let total: u64 = between.retransmits.iter().map(|r| r.3).sum();
    // Sockets in another network namespace (a container's) are not in this namespace's
    // /proc/net/snmp; their processes' retransmits are (the tracepoint sees every
    // namespace), and their segments sent are estimated from their bytes sent.
    let sent_by_them: u64 = between
        .retransmits
        .iter()
        .filter(|r| r.0 != 0)
        .map(|r| {
            w.end
                .procs
                .iter()
                .filter(|p| p.pid == r.0)
                .map(|p| {
                    let before = w.start.proc(p.pid, p.start).map_or(0, |b| b.net_tx_bytes);
                    p.net_tx_bytes.saturating_sub(before)
                })
                .sum::<u64>()
        })
        .sum();
    let estimated_segs = sent_by_them / SEGMENT_BYTES;
    let estimated = if total >= MIN_ATTRIBUTED_RETRANSMITS && estimated_segs > 0 {
        total as f64 / (estimated_segs + total) as f64
    } else {
        0.0
    };
    let from_processes = estimated > share;
    let (share, retrans, sent) = if from_processes {
        (estimated, total, estimated_segs + total)
    } else {
        (share, retrans, sent)
    };
    let score = (share * 10.0).min(1.0);
    let mut by: Vec<&(u32, String, Option<String>, u64)> = between.retransmits.iter().collect();
    by.sort_by_key(|r| std::cmp::Reverse(r.3));
    let culprits: Vec<Party> = by
        .iter()
        .take(5)
        .map(|(pid, comm, cgroup, n)| Party {
            pid: (*pid != 0).then_some(*pid),
            comm: comm.clone(),
            cgroup: cgroup.clone(),
            share: if total > 0 {
                *n as f64 / total as f64
            } else {
                0.0
            },
        })
        .collect();
    let verdict = if score >= t.of(Resource::Network) {
        format!(
            "Packet loss: {} of TCP segments were retransmitted ({retrans} of {sent})",
            pct(share)
        )
    } else {
        format!("Network: {} of TCP segments retransmitted", pct(share))
    };
    finding(
        (Resource::Network, score),
        t,
        verdict,
        culprits.clone(),
        culprits,
        std::iter::once(Evidence {
            what: format!("{:.1} segments retransmitted per second", retrans as f64 / w.dt_s),
            ..Evidence::default()
        })
        .chain(from_processes.then(|| Evidence {
            what: format!(
                "the share is the retransmitting processes' (in another network namespace): their segments sent estimated from their bytes sent at {SEGMENT_BYTES} B a segment"
            ),
            ..Evidence::default()
        }))
        .collect(),
        "kernstat tcp".into(),
    )
}

pub(super) fn oom(between: &Between<'_>, t: &Thresholds) -> Option<Finding> {
    let kills: Vec<&kernstat_model::events::OomKill> = between
        .events
        .iter()
        .map(|e| match e {
            Event::OomKill(k) => k,
        })
        .collect();
    let last = kills.last()?;
    let grown: i64 = last.growers.iter().map(|g| g.2.max(0)).sum();
    let culprits: Vec<Party> = last
        .growers
        .iter()
        .map(|(pid, comm, grew)| Party {
            pid: Some(*pid),
            comm: comm.clone(),
            cgroup: None,
            share: (*grew).max(0) as f64 / grown.max(1) as f64,
        })
        .collect();
    let victims: Vec<Party> = kills
        .iter()
        .map(|k| Party {
            pid: Some(k.pid),
            comm: k.comm.clone(),
            cgroup: (!k.group.is_empty()).then(|| k.group.clone()),
            share: 1.0,
        })
        .collect();
    Some(finding(
        (Resource::Oom, 1.0),
        t,
        format!(
            "OOM kill: {} process{} killed; the last, pid {} ({}), for the limit of {}",
            kills.len(),
            if kills.len() == 1 { "" } else { "es" },
            last.pid,
            last.comm,
            last.limit
        ),
        culprits,
        victims,
        kills
            .iter()
            .map(|k| Evidence {
                what: k.line(),
                ..Evidence::default()
            })
            .collect(),
        "kernstat events".into(),
    ))
}

pub(super) fn thermal(w: &Window<'_>, t: &Thresholds) -> Option<Finding> {
    let temp = w.end.temp_c?;
    let score = if temp >= 90.0 { 0.3 } else { 0.0 };
    Some(finding(
        (Resource::Thermal, score),
        t,
        format!("CPU at {temp:.0} °C"),
        Vec::new(),
        Vec::new(),
        Vec::new(),
        "kernstat top".into(),
    ))
}
