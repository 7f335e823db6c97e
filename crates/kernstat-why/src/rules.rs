//! The rules: one per resource, each with its threshold and the source of that threshold
//! (the table docs/why.md prints), and the ranking.

use std::collections::HashMap;

use kernstat_model::events::Event;
use serde::{Deserialize, Serialize};

use crate::{Evidence, Finding, Party, Report, Resource, Snapshot, WindowInfo};

/// A rule as docs/why.md lists it.
#[derive(Clone, Copy, Debug)]
pub struct Rule {
    /// The resource.
    pub resource: Resource,
    /// What its score measures.
    pub score: &'static str,
    /// Its default "notable" threshold (a fraction of the window).
    pub threshold: f64,
    /// Where the rule and its threshold come from.
    pub source: &'static str,
}

/// Every rule.
pub const RULES: &[Rule] = &[
    Rule {
        resource: Resource::Cpu,
        score: "share of the window in which some runnable task waited for a CPU (/proc/pressure/cpu some)",
        threshold: 0.10,
        source: "USE method (saturation: run-queue wait); the 60-second checklist's vmstat r > CPUs",
    },
    Rule {
        resource: Resource::Memory,
        score: "share of the window in which some task stalled on memory (/proc/pressure/memory some)",
        threshold: 0.10,
        source: "PSI (Facebook's oomd and systemd-oomd act at 60 % for 30 s; 10 % is worth a look); atop flags > 10 swap-outs/s",
    },
    Rule {
        resource: Resource::Io,
        score: "share of the window in which some task stalled on I/O (/proc/pressure/io some)",
        threshold: 0.10,
        source: "USE method (saturation: queue and wait); iostat -x %util and await; pmie's disk rules",
    },
    Rule {
        resource: Resource::Throttling,
        score: "the most throttled group's throttled time per second of window (cpu.stat throttled_usec)",
        threshold: 0.10,
        source: "cgroup v2 cpu.max; Kubernetes' CPUThrottlingHigh alert (25 % of periods)",
    },
    Rule {
        resource: Resource::Network,
        score: "ten times the share of TCP segments retransmitted (/proc/net/snmp): 1 % is 0.10",
        threshold: 0.10,
        source: "the 60-second checklist's sar -n ETCP retrans/s; 1 % loss halves a TCP flow's throughput (Mathis et al.)",
    },
    Rule {
        resource: Resource::Oom,
        score: "1 when the OOM killer killed a process in the window",
        threshold: 0.10,
        source: "the 60-second checklist's dmesg | tail",
    },
    Rule {
        resource: Resource::Thermal,
        score: "0.3 at or above 90 °C (the CPU slows itself down near its limit)",
        threshold: 0.10,
        source: "Intel and AMD throttle near Tj max (95-105 °C)",
    },
];

/// Thresholds by resource (a user config may change them).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Thresholds {
    /// By resource name (cpu, memory, io, throttling, network, oom, thermal).
    pub notable: HashMap<String, f64>,
}

impl Default for Thresholds {
    fn default() -> Self {
        Thresholds {
            notable: RULES
                .iter()
                .map(|r| (r.resource.name().to_string(), r.threshold))
                .collect(),
        }
    }
}

impl Thresholds {
    /// Checks a user's thresholds: known resources, each a finite fraction above 0.
    pub fn check(&self) -> Result<(), String> {
        for (name, v) in &self.notable {
            if !RULES.iter().any(|r| r.resource.name() == name) {
                let known: Vec<&str> = RULES.iter().map(|r| r.resource.name()).collect();
                return Err(format!(
                    "[why.notable] {name:?} is not one of {}",
                    known.join(", ")
                ));
            }
            if !(v.is_finite() && *v > 0.0) {
                return Err(format!(
                    "[why.notable] {name}: a score above 0 (0.10 is 10 % of the window)"
                ));
            }
        }
        Ok(())
    }

    /// The defaults with `user`'s entries over them.
    pub fn with(user: &HashMap<String, f64>) -> Self {
        let mut t = Thresholds::default();
        t.notable.extend(user.iter().map(|(k, v)| (k.clone(), *v)));
        t
    }

    fn of(&self, r: Resource) -> f64 {
        self.notable.get(r.name()).copied().unwrap_or(0.10)
    }
}

fn rule(r: Resource) -> &'static Rule {
    RULES
        .iter()
        .find(|x| x.resource == r)
        .expect("every resource has a rule")
}

fn pct(v: f64) -> String {
    format!("{:.1} %", v * 100.0)
}

/// What the window holds beyond its two ends.
#[derive(Clone, Debug, Default)]
pub struct Between<'a> {
    /// Kernel events in the window.
    pub events: &'a [Event],
    /// TCP segments retransmitted in the window per process: (pid, command, group,
    /// segments).
    pub retransmits: &'a [(u32, String, Option<String>, u64)],
    /// Processes that ended in the window, with their last counters (the recorder's
    /// exit hook): a burst that ended before the window did is still its culprit.
    pub ended: &'a [crate::ProcSnap],
}

/// The window's findings from its two ends, ranked (highest score first).
pub fn findings(
    start: &Snapshot,
    end: &Snapshot,
    between: &Between<'_>,
    t: &Thresholds,
    source: &str,
) -> Report {
    let dt_ns = end.mono_ns.saturating_sub(start.mono_ns).max(1);
    let w = Window {
        start,
        end,
        ended: between.ended,
        dt_s: dt_ns as f64 / 1e9,
    };
    let mut out = vec![
        cpu(&w, t),
        memory(&w, t),
        io(&w, t),
        throttling(&w, t),
        network(&w, between, t),
    ];
    out.extend(oom(between, t));
    out.extend(thermal(&w, t));
    out.retain(|f| f.score > 0.0 || f.resource == Resource::Cpu);
    out.sort_by(|a, b| b.score.total_cmp(&a.score));
    Report {
        window: WindowInfo {
            start_unix_ns: start.unix_ns,
            end_unix_ns: end.unix_ns,
            seconds: w.dt_s,
            source: source.to_string(),
        },
        findings: out,
    }
}

struct Window<'a> {
    start: &'a Snapshot,
    end: &'a Snapshot,
    /// Processes that ended in the window, with their last counters.
    ended: &'a [crate::ProcSnap],
    dt_s: f64,
}

impl Window<'_> {
    /// A pressure total's growth as a fraction of the window.
    fn stall(&self, i: usize) -> Option<f64> {
        let (a, b) = (self.start.psi_us[i]?, self.end.psi_us[i]?);
        Some((b.saturating_sub(a) as f64 / 1e6 / self.dt_s).clamp(0.0, 1.0))
    }

    /// Per process alive at the end, or ended in the window (born in it or not):
    /// f(before, last).
    fn per_proc<F: Fn(Option<&crate::ProcSnap>, &crate::ProcSnap) -> u64>(
        &self,
        f: F,
    ) -> Vec<(&crate::ProcSnap, u64)> {
        let ended = self
            .ended
            .iter()
            .filter(|p| self.end.proc(p.pid, p.start).is_none());
        self.end
            .procs
            .iter()
            .chain(ended)
            .filter(|p| !p.kthread)
            .map(|p| (p, f(self.start.proc(p.pid, p.start), p)))
            .filter(|(_, v)| *v > 0)
            .collect()
    }
}

fn party(p: &crate::ProcSnap, share: f64) -> Party {
    Party {
        pid: Some(p.pid),
        comm: p.comm.clone(),
        cgroup: p.cgroup.clone(),
        share,
    }
}

/// The `n` largest of `v` as parties, each with its value over `whole`.
fn top_parties(mut v: Vec<(&crate::ProcSnap, u64)>, whole: f64, n: usize) -> Vec<Party> {
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.pid.cmp(&b.0.pid)));
    v.truncate(n);
    v.into_iter()
        .map(|(p, x)| {
            party(
                p,
                if whole > 0.0 {
                    (x as f64 / whole).min(1.0)
                } else {
                    0.0
                },
            )
        })
        .collect()
}

/// Groups whose pressure of kind `i` (cpu 0, memory 1, io 2) grew most: victims.
fn group_victims(w: &Window<'_>, i: usize, n: usize) -> Vec<Party> {
    let mut v: Vec<Party> = w
        .end
        .groups
        .iter()
        .filter(|g| g.path != "/")
        .filter_map(|g| {
            let b = w.start.groups.iter().find(|x| x.path == g.path)?;
            let d = g.psi_us[i]?.saturating_sub(b.psi_us[i]?);
            (d > 0).then(|| Party {
                pid: None,
                comm: String::new(),
                cgroup: Some(g.path.clone()),
                share: (d as f64 / 1e6 / w.dt_s).min(1.0),
            })
        })
        .collect();
    v.sort_by(|a, b| b.share.total_cmp(&a.share));
    v.truncate(n);
    v
}

/// A finding of resource `r` scored `score`, its rule's evidence first.
fn finding(
    (r, score): (Resource, f64),
    t: &Thresholds,
    verdict: String,
    culprits: Vec<Party>,
    victims: Vec<Party>,
    mut evidence: Vec<Evidence>,
    next: String,
) -> Finding {
    let threshold = t.of(r);
    let rule = rule(r);
    evidence.insert(
        0,
        Evidence {
            what: format!("{}: {}", rule.score, pct(score)),
            threshold: Some(format!("notable at {}", pct(threshold))),
            source: Some(rule.source.to_string()),
        },
    );
    Finding {
        resource: r,
        score,
        notable: score >= threshold,
        verdict,
        culprits,
        victims,
        evidence,
        next,
    }
}

fn cpu(w: &Window<'_>, t: &Thresholds) -> Finding {
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
fn throttled_groups<'a>(w: &Window<'a>) -> Vec<(&'a str, u64)> {
    let window_ns = (w.dt_s * 1e9) as u64;
    w.end
        .groups
        .iter()
        .filter_map(|g| {
            let before = w.start.groups.iter().find(|x| x.path == g.path)?;
            let d = g.throttled_us?.checked_sub(before.throttled_us?)?;
            (d > 0).then(|| (g.path.as_str(), (d * 1000).min(window_ns)))
        })
        .collect()
}

/// Whether a process's group `cgroup` is `group` or below it.
fn within(cgroup: Option<&str>, group: &str) -> bool {
    cgroup.is_some_and(|c| {
        c == group || group == "/" || c.strip_prefix(group).is_some_and(|r| r.starts_with('/'))
    })
}

fn memory(w: &Window<'_>, t: &Thresholds) -> Finding {
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

fn io(w: &Window<'_>, t: &Thresholds) -> Finding {
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

fn throttling(w: &Window<'_>, t: &Thresholds) -> Finding {
    let mut worst: Option<(&crate::GroupSnap, f64)> = None;
    for g in &w.end.groups {
        let (Some(now), Some(b)) = (
            g.throttled_us,
            w.start.groups.iter().find(|x| x.path == g.path),
        ) else {
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

fn network(w: &Window<'_>, between: &Between<'_>, t: &Thresholds) -> Finding {
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

fn oom(between: &Between<'_>, t: &Thresholds) -> Option<Finding> {
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

fn thermal(w: &Window<'_>, t: &Thresholds) -> Option<Finding> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ProcSnap;

    fn snap(t_s: u64, cpu_psi: u64, procs: Vec<ProcSnap>) -> Snapshot {
        Snapshot {
            unix_ns: t_s * 1_000_000_000,
            mono_ns: t_s * 1_000_000_000,
            ncpus: 2,
            busy_ns: t_s * 2_000_000_000,
            psi_us: [Some(cpu_psi), Some(0), Some(0), Some(0), Some(0)],
            page_size: 4096,
            procs,
            ..Snapshot::default()
        }
    }

    fn p(pid: u32, cpu_s: u64, delay_s: u64) -> ProcSnap {
        ProcSnap {
            pid,
            start: 1,
            comm: format!("p{pid}"),
            cpu_ns: cpu_s * 1_000_000_000,
            run_delay_ns: delay_s * 1_000_000_000,
            ..ProcSnap::default()
        }
    }

    #[test]
    fn cpu_saturation_ranks_first_with_its_culprit_and_victim() {
        let a = snap(0, 0, vec![p(1, 0, 0), p(2, 0, 0)]);
        let b = snap(10, 4_000_000, vec![p(1, 15, 1), p(2, 1, 3)]);
        let r = findings(&a, &b, &Between::default(), &Thresholds::default(), "test");
        let f = &r.findings[0];
        assert_eq!(f.resource, Resource::Cpu);
        assert!(f.notable && (f.score - 0.4).abs() < 1e-9, "{f:?}");
        assert_eq!(f.culprits[0].pid, Some(1));
        assert_eq!(f.victims[0].pid, Some(2));
        assert!(f.verdict.starts_with("CPU saturated"), "{}", f.verdict);
    }

    /// A task under a small cpu.max quota waits while throttled on idle CPUs: PSI's
    /// `some` and its run delay grow, yet the CPUs are not saturated. Throttling ranks
    /// first and the CPU finding keeps only the other tasks' share of the wait.
    #[test]
    fn waiting_under_a_quota_is_throttling_not_saturation() {
        let group = |throttled_s: u64| crate::GroupSnap {
            path: "/t/thr".into(),
            throttled_us: Some(throttled_s * 1_000_000),
            quota: Some((20_000, 100_000)),
            ..Default::default()
        };
        let in_group = |pid, cpu_s, delay_s| ProcSnap {
            cgroup: Some("/t/thr".into()),
            ..p(pid, cpu_s, delay_s)
        };
        let mut a = snap(0, 0, vec![in_group(1, 0, 0), p(2, 0, 0)]);
        a.groups.push(group(0));
        // 10 s: the quota held the group back 9 s; `some` grew 8.2 s; the looping task
        // waited 9 s, another task 1 s: 90 % of the wait is throttling.
        let mut b = snap(10, 8_200_000, vec![in_group(1, 2, 9), p(2, 1, 1)]);
        b.groups.push(group(9));
        let r = findings(&a, &b, &Between::default(), &Thresholds::default(), "test");
        assert_eq!(r.findings[0].resource, Resource::Throttling, "{r:?}");
        let cpu = r
            .findings
            .iter()
            .find(|f| f.resource == Resource::Cpu)
            .unwrap();
        assert!((cpu.score - 0.082).abs() < 1e-9, "{cpu:?}");
        assert!(!cpu.notable);
        assert!(
            cpu.evidence.iter().any(|e| e
                .what
                .contains("90.0 % of that wait was in throttled groups (/t/thr)")),
            "{cpu:?}"
        );
        // A group throttled for a moment takes that moment off its tasks' waits, no
        // more: the CPU's own saturation stays.
        let mut c = snap(0, 0, vec![in_group(1, 0, 0), p(2, 0, 0)]);
        c.groups.push(group(0));
        let mut d = snap(10, 8_200_000, vec![in_group(1, 2, 9), p(2, 1, 1)]);
        d.groups.push(crate::GroupSnap {
            throttled_us: Some(1_000),
            ..group(0)
        });
        let r = findings(&c, &d, &Between::default(), &Thresholds::default(), "test");
        let cpu = r
            .findings
            .iter()
            .find(|f| f.resource == Resource::Cpu)
            .unwrap();
        assert!(
            (cpu.score - 0.82 * (1.0 - 0.001 / 10.0)).abs() < 1e-9,
            "{cpu:?}"
        );
        assert_eq!(r.findings[0].resource, Resource::Cpu, "{r:?}");
        // The group's own processes are still in a group below it.
        assert!(within(Some("/t/thr/x"), "/t/thr"));
        assert!(!within(Some("/t/thrx"), "/t/thr"));
    }

    #[test]
    fn a_quiet_machine_has_nothing_notable() {
        let a = snap(0, 0, vec![p(1, 0, 0)]);
        let b = snap(10, 50_000, vec![p(1, 1, 0)]);
        let r = findings(&a, &b, &Between::default(), &Thresholds::default(), "test");
        assert!(r.top().is_none(), "{r:?}");
    }

    #[test]
    fn an_oom_kill_is_first() {
        let a = snap(0, 0, vec![]);
        let b = snap(10, 0, vec![]);
        let events = [Event::OomKill(kernstat_model::events::OomKill {
            pid: 7,
            comm: "hog".into(),
            limit: "/x".into(),
            ..Default::default()
        })];
        let between = Between {
            events: &events,
            retransmits: &[],
            ended: &[],
        };
        let r = findings(&a, &b, &between, &Thresholds::default(), "test");
        assert_eq!(r.findings[0].resource, Resource::Oom);
        assert_eq!(r.findings[0].victims[0].pid, Some(7));
    }

    #[test]
    fn a_process_that_ended_in_the_window_is_still_its_culprit() {
        let a = snap(0, 0, vec![p(2, 0, 0)]);
        let b = snap(10, 6_000_000, vec![p(2, 1, 0)]);
        let burst = ProcSnap {
            pid: 9,
            start: 9,
            comm: "burst".into(),
            cpu_ns: 8_000_000_000,
            ..ProcSnap::default()
        };
        let between = Between {
            ended: std::slice::from_ref(&burst),
            ..Between::default()
        };
        let r = findings(&a, &b, &between, &Thresholds::default(), "test");
        let cpu = r
            .findings
            .iter()
            .find(|f| f.resource == Resource::Cpu)
            .unwrap();
        assert_eq!(cpu.culprits[0].pid, Some(9), "{cpu:?}");
    }

    #[test]
    fn docs_why_lists_the_rules_as_the_code_has_them() {
        let doc = include_str!("../../../docs/why.md");
        let table = doc
            .split("<!-- rules: kept equal to kernstat-why's RULES by a test -->")
            .nth(1)
            .and_then(|t| t.split("<!-- /rules -->").next())
            .expect("docs/why.md has the rules table");
        let rows: Vec<&str> = table
            .lines()
            .filter(|l| l.starts_with("| ") && !l.starts_with("| resource"))
            .collect();
        assert_eq!(rows.len(), RULES.len(), "{table}");
        for (row, r) in rows.iter().zip(RULES) {
            let want = format!(
                "| {} | {} | {:.2} | {} |",
                r.resource.name(),
                r.score,
                r.threshold,
                r.source.replace('|', "\\|")
            );
            assert_eq!(*row, want);
        }
    }
}
