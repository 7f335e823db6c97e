//! A recorded window: its two ends as snapshots and the events and retransmits recorded
//! between them, read through a cursor (`kernstat why --at`, `kernstat view`).

use kernstat_model::events::Event;
use kernstat_record::archive::Cursor;
use kernstat_record::frame::Frame;

use crate::{findings, Between, ProcSnap, Report, Snapshot, Thresholds};

/// Ended processes a window keeps, at most (a fork storm's).
const MAX_ENDED: usize = 100_000;

/// A recorded frame as a snapshot (its processes' groups as recorded).
pub fn snapshot_of(f: &Frame) -> Snapshot {
    let raw = kernstat_record::replay::raw_sample(f);
    let cg = |pid: u32| {
        let i = f.procs.partition_point(|p| p.pid < pid);
        f.procs
            .get(i)
            .filter(|p| p.pid == pid && !p.cgroup.is_empty())
            .map(|p| p.cgroup.clone())
    };
    Snapshot::of(&raw, f.time_unix_ns, &cg)
}

/// The findings of the window of `window_ns` ending at the frame `cursor` stands on
/// (None: it stands on none). The window starts at the frame nearest to its start (the
/// archive's first at worst); the cursor is left on the window's end.
pub fn recorded(cursor: &mut Cursor, window_ns: u64, thresholds: &Thresholds) -> Option<Report> {
    let end = cursor.current()?.clone();
    let from = end.time_unix_ns.saturating_sub(window_ns);
    cursor.seek_nearest(from);
    let start = cursor.current().cloned().unwrap_or_else(|| end.clone());
    let mut events: Vec<Event> = Vec::new();
    let mut ended: Vec<ProcSnap> = Vec::new();
    let mut retrans: Vec<(u32, String, Option<String>, u64)> = Vec::new();
    while cursor
        .current()
        .is_some_and(|f| f.time_unix_ns < end.time_unix_ns)
        && cursor.forward()
    {
        let f = cursor.current().expect("standing");
        events.extend(f.events.iter().map(|e| e.to_model()));
        if ended.len() < MAX_ENDED {
            ended.extend(f.ended.iter().map(|e| ProcSnap {
                pid: e.pid,
                start: e.start_ns,
                comm: e.comm.clone(),
                cgroup: (!e.cgroup.is_empty()).then(|| e.cgroup.clone()),
                cpu_ns: e.cpu_ns,
                io_bytes: e.read_bytes + e.write_bytes,
                ..ProcSnap::default()
            }));
        }
        for r in &f.retransmits {
            let cgroup = (!r.cgroup.is_empty()).then(|| r.cgroup.clone());
            let full = retrans.len() >= 4096;
            match retrans.iter_mut().find(|x| x.0 == r.pid && x.1 == r.comm) {
                Some(x) => x.3 += r.count,
                None if !full => retrans.push((r.pid, r.comm.clone(), cgroup, r.count)),
                None => {}
            }
        }
    }
    Some(findings(
        &snapshot_of(&start),
        &snapshot_of(&end),
        &Between {
            events: &events,
            retransmits: &retrans,
            ended: &ended,
        },
        thresholds,
        "recorded",
    ))
}
