//! A report for people (what `kernstat why` prints without `--json`), and keeping one
//! group's share of it (`--cgroup`). Every name in a report (a command, a group path, a
//! verdict quoting them) may come from another user: each is printed through
//! `printable`, so no control byte reaches the terminal.

use std::fmt::Write as _;

use kernstat_model::text::printable;

use crate::{Party, Report};

impl Report {
    /// Keeps only what concerns group `path` (and below) in culprits and victims.
    pub fn keep_group(&mut self, path: &str) {
        // "/a" and "/a/" are the same group; "/" is every group.
        let path = path.trim_end_matches('/');
        let below = format!("{path}/");
        let inside = |c: &Option<String>| {
            c.as_deref()
                .is_some_and(|c| path.is_empty() || c == path || c.starts_with(&below))
        };
        for f in &mut self.findings {
            f.culprits.retain(|p| inside(&p.cgroup));
            f.victims.retain(|p| inside(&p.cgroup));
        }
    }
}

fn parties(ps: &[Party]) -> String {
    ps.iter()
        .take(3)
        .map(|p| {
            let name = match p.pid {
                Some(pid) => format!("{pid} {}", printable(&p.comm)),
                None => printable(p.cgroup.as_deref().unwrap_or_default()).into_owned(),
            };
            format!("{name} ({:.0} %)", p.share * 100.0)
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The report as text: a line for the window (`stamp` is its end, as the caller shows
/// times), then each notable finding with its parties, evidence and next command; on a
/// quiet machine one line saying so and the highest score for reference.
pub fn render(r: &Report, stamp: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} window of {:.0} s ending {stamp}",
        r.window.source, r.window.seconds
    );
    let quiet = r.top().is_none();
    if quiet {
        let _ = writeln!(
            out,
            "Nothing notable: every score is below its threshold (docs/why.md)."
        );
    }
    for (i, f) in r.findings.iter().enumerate() {
        if !f.notable && (i > 0 || !quiet) {
            continue;
        }
        let _ = writeln!(
            out,
            "\n{}. [{}] {} (score {:.2}{})",
            i + 1,
            f.resource.name(),
            printable(&f.verdict),
            f.score,
            if f.notable { "" } else { ", not notable" }
        );
        if !f.culprits.is_empty() {
            let _ = writeln!(out, "   culprits: {}", parties(&f.culprits));
        }
        if !f.victims.is_empty() {
            let _ = writeln!(out, "   victims:  {}", parties(&f.victims));
        }
        for e in f.evidence.iter().skip(1) {
            let _ = writeln!(out, "   - {}", printable(&e.what));
        }
        let _ = writeln!(out, "   next: {}", printable(&f.next));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Finding, Resource, WindowInfo};

    fn report() -> Report {
        let party = |pid: Option<u32>, comm: &str, cgroup: &str| Party {
            pid,
            comm: comm.into(),
            cgroup: Some(cgroup.into()),
            share: 0.5,
        };
        Report {
            window: WindowInfo {
                seconds: 10.0,
                source: "live".into(),
                ..WindowInfo::default()
            },
            findings: vec![Finding {
                resource: Resource::Cpu,
                score: 0.5,
                notable: true,
                verdict: "CPU saturated in /evil\u{1b}[2J".into(),
                culprits: vec![
                    party(Some(7), "spin\u{1b}]0;x\u{7}", "/a/b"),
                    party(None, "", "/c\n"),
                ],
                victims: vec![party(Some(8), "w", "/a")],
                evidence: Vec::new(),
                next: "kernstat runqlat -p 7 5 1".into(),
            }],
        }
    }

    #[test]
    fn no_control_byte_of_a_name_reaches_the_text() {
        let t = render(&report(), "now");
        assert!(!t.chars().any(|c| c.is_control() && c != '\n'), "{t:?}");
        assert!(t.contains("7 spin"), "{t}");
    }

    #[test]
    fn keeping_a_group_keeps_it_and_below_only() {
        let mut r = report();
        r.keep_group("/a/");
        let f = &r.findings[0];
        assert_eq!(f.culprits.len(), 1);
        assert_eq!(f.culprits[0].pid, Some(7));
        assert_eq!(f.victims.len(), 1);
        r.keep_group("/a/b");
        assert!(r.findings[0].victims.is_empty());
    }
}
