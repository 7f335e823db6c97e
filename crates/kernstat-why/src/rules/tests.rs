//! Unit tests of the rules (`rules/mod.rs`).

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
    let doc = include_str!("../../../../docs/why.md");
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
