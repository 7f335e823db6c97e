//! The rules: one per resource, each with its threshold and the source of that threshold
//! (the table docs/why.md prints), and the ranking.

use std::collections::HashMap;

use kernstat_model::events::Event;
use serde::{Deserialize, Serialize};

use crate::{Evidence, Finding, Party, Report, Resource, Snapshot, WindowInfo};

mod resources;
use resources::*;

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
    let start = w.start.groups_by_path();
    let mut v: Vec<Party> = w
        .end
        .groups
        .iter()
        .filter(|g| g.path != "/")
        .filter_map(|g| {
            let b = start.get(g.path.as_str())?;
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

#[cfg(test)]
mod tests;
