//! `kernstat top --at TIME`: a recorded moment in the live view's place. The archive's
//! cursor stands on a frame; the rows and the header's figures are the rate engine's
//! over the interval from the frame before (the same rules as live), and the same view
//! and draw render them; keys step one sample forward (t) or back (T), or jump to a
//! time (b), as in atop. Processes that ended in the interval are rows of their own, in
//! state X.

use std::collections::HashMap;
use std::rc::Rc;

use kernstat_model::MemInfo;
use kernstat_record::Cursor;
use kernstat_sources::users::UserNames;

use crate::sample::Machine;
use crate::view::Proc;

/// The archive's cursor on the sample shown.
pub struct Replay {
    cursor: Cursor,
    /// How far the sample shown is from the time asked, ns (0 after a step).
    pub off_by_ns: u64,
    users: UserNames,
    names: HashMap<u32, Rc<str>>,
    /// What the cursor found damaged, to show once.
    pub warnings: Vec<String>,
}

impl Replay {
    /// The cursor, standing on the sample to show (the caller found it and said what it
    /// had to), `off_by_ns` from the time asked.
    pub fn new(cursor: Cursor, off_by_ns: u64) -> Replay {
        Replay {
            cursor,
            off_by_ns,
            users: UserNames::default(),
            names: HashMap::new(),
            warnings: Vec::new(),
        }
    }

    /// One sample forward or back; false at the end of the archive.
    pub fn step(&mut self, forward: bool) -> bool {
        let moved = if forward {
            self.cursor.forward()
        } else {
            self.cursor.back()
        };
        self.warnings.append(&mut self.cursor.warnings);
        if moved {
            self.off_by_ns = 0;
        }
        moved
    }

    /// The sample nearest to `when` (as --at takes it); Err: why not (outside the
    /// archive, or in a gap: the sentence names the archive's span).
    pub fn jump(&mut self, when: &str) -> Result<(), String> {
        let t = kernstat_record::time::parse_time(when, jiff::Zoned::now())?;
        let r = self.cursor.seek_at(t, false).map_err(|e| e.to_string());
        self.warnings.append(&mut self.cursor.warnings);
        self.off_by_ns = r?;
        Ok(())
    }

    /// Seconds the sample on screen covers (since the sample before it).
    pub fn interval_s(&self) -> f64 {
        self.cursor.current().map_or(0.0, |c| {
            kernstat_record::replay::interval_s(self.cursor.before(), c)
        })
    }

    /// When the sample on screen was taken, for the header, with how far it is from
    /// the time asked when that is not nothing.
    pub fn stamp(&self) -> String {
        let t = self.cursor.current().map_or(0, |f| f.time_unix_ns);
        let mut s = kernstat_record::time::local_stamp(t);
        if self.off_by_ns >= 1_000_000_000 {
            s.push_str(&format!(
                " ({} from the time asked)",
                kernstat_record::time::span_text(self.off_by_ns)
            ));
        }
        s
    }

    /// The header's figures and the table's rows of the sample on screen.
    pub fn show(&mut self, procs: &mut Vec<Proc>) -> Machine {
        procs.clear();
        let Some(cur) = self.cursor.current() else {
            return Machine::default();
        };
        let before = self.cursor.before();
        let users = &mut self.users;
        let names = &mut self.names;
        let mut name = |uid: u32| -> Rc<str> {
            names
                .entry(uid)
                .or_insert_with(|| Rc::from(users.name(uid)))
                .clone()
        };
        for (row, rate) in kernstat_record::replay::rows(before, cur) {
            procs.push(Proc {
                pid: row.pid,
                tgid: row.pid,
                ppid: row.ppid,
                uid: row.uid,
                user: name(row.uid),
                state: row.state,
                threads: row.threads,
                nice: row.nice,
                prio: row.priority,
                cpu_percent: rate.cpu_percent,
                cpu_ns: row.cpu_ns,
                rss_bytes: row.rss_bytes,
                read_bps: rate.read_bps,
                write_bps: rate.write_bps,
                comm: Rc::from(row.comm.as_str()),
                cmd: Rc::from(row.cmd.as_str()),
                cgroup: row.cgroup,
                kthread: row.kthread,
                runq_p99_us: None,
                write_calls_per_s: None,
                small_write_share: None,
                net_rx_bps: rate.net_rx_bps,
                net_tx_bps: rate.net_tx_bps,
                tcp_retrans_per_s: None,
            });
        }
        let m = kernstat_record::replay::model(before, cur);
        Machine {
            core_busy: m.cores_percent.clone(),
            mem: MemInfo {
                total: m.mem.total_bytes,
                available: m.mem.available_bytes,
                free: m.mem.available_bytes,
                swap_total: m.mem.swap_total_bytes,
                swap_free: m.mem.swap_total_bytes.saturating_sub(m.mem.swap_used_bytes),
                total_source: m.mem.total_source,
            },
            load: m.load,
            psi: m.psi,
            hw: m.hw,
            running: m.running_tasks,
            tasks: m.task_count as usize,
            source: "archive",
            oom: None,
            links: m.links.clone(),
            net: m.net.as_ref().map(|n| kernstat_model::net::NetModel {
                top: Default::default(),
                ..n.clone()
            }),
            net_unavailable: m
                .net
                .is_none()
                .then(|| "per-process network was not counted when this was recorded".into()),
        }
    }

    /// The control groups of the sample on screen, over its interval.
    pub fn groups(&self) -> Vec<kernstat_model::cgroup::CgroupRate> {
        let Some(cur) = self.cursor.current() else {
            return Vec::new();
        };
        kernstat_record::replay::model(self.cursor.before(), cur).cgroups
    }
}
