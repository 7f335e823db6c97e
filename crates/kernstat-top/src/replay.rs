//! `kernstat top --at TIME`: a recorded sample in the live view's place. The frame is
//! turned into the header's figures and the table's rows, and the same view and draw
//! render it; keys step one sample forward (t) or back (T), or jump to a time (b), as
//! in atop.

use std::collections::HashMap;
use std::rc::Rc;

use kernstat_model::record::Frame;
use kernstat_model::{MemInfo, Model};
use kernstat_record::Archive;
use kernstat_sources::users::UserNames;

use crate::sample::Machine;
use crate::view::Proc;

/// The archive and the sample shown.
pub struct Replay {
    archive: Archive,
    /// The sample on screen.
    pub frame: Frame,
    users: UserNames,
    names: HashMap<u32, Rc<str>>,
}

impl Replay {
    /// The archive in `dir` at the sample `frame` (the caller found it and said what it
    /// had to).
    pub fn open(dir: &std::path::Path, frame: Frame) -> std::io::Result<Replay> {
        Ok(Replay {
            archive: Archive::open(dir)?,
            frame,
            users: UserNames::default(),
            names: HashMap::new(),
        })
    }

    /// One sample forward or back; false at the end of the archive.
    pub fn step(&mut self, forward: bool) -> bool {
        match self
            .archive
            .step(self.frame.time_unix_ns, forward, &mut |_| {})
        {
            Some(f) => {
                self.frame = f;
                true
            }
            None => false,
        }
    }

    /// The sample nearest to `when` (as --at takes it); Err: why not.
    pub fn jump(&mut self, when: &str) -> Result<(), String> {
        let t = kernstat_record::time::parse_time(when, jiff::Zoned::now())?;
        self.frame = self.archive.at(t, &mut |_| {})?;
        Ok(())
    }

    /// When the sample on screen was taken, for the header.
    pub fn stamp(&self) -> String {
        kernstat_record::time::local_stamp(self.frame.time_unix_ns)
    }

    /// The header's figures and the table's rows of the sample on screen. Processes
    /// that ended since the sample before are rows too, with state X: CPU % over the
    /// interval when they started in it (all their CPU time is in it), else over their
    /// life.
    pub fn show(&mut self, procs: &mut Vec<Proc>) -> Machine {
        let f = &self.frame;
        let m: &Model = &f.model;
        procs.clear();
        let mut name = |uid: u32| -> Rc<str> {
            let users = &mut self.users;
            self.names
                .entry(uid)
                .or_insert_with(|| Rc::from(users.name(uid)))
                .clone()
        };
        for (row, rate) in f.processes().iter().zip(&m.procs) {
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
                cpu_percent: row.cpu_percent,
                cpu_ns: row.cpu_ns,
                rss_bytes: row.rss_bytes,
                read_bps: rate.read_bps,
                write_bps: rate.write_bps,
                comm: Rc::from(row.comm.as_str()),
                cmd: Rc::from(row.cmd.as_str()),
                cgroup: String::new(),
                kthread: row.kthread,
                runq_p99_us: None,
                write_calls_per_s: None,
                small_write_share: None,
                net_rx_bps: row.net_rx_bps,
                net_tx_bps: row.net_tx_bps,
            });
        }
        let interval_ns = (m.interval_s * 1e9) as u64;
        for e in &f.exited {
            let lived = e.exit_ns.saturating_sub(e.start_ns).max(1);
            let born_inside = e.start_ns + interval_ns >= f.boot_ns;
            let over = if born_inside {
                interval_ns.max(1)
            } else {
                lived
            };
            let cmd = if e.cmd.is_empty() { &e.comm } else { &e.cmd };
            procs.push(Proc {
                pid: e.pid,
                tgid: e.pid,
                ppid: e.ppid,
                uid: e.uid,
                user: name(e.uid),
                state: 'X',
                threads: 0,
                nice: 0,
                prio: 0,
                cpu_percent: e.cpu_ns as f64 / over as f64 * 100.0,
                cpu_ns: e.cpu_ns,
                rss_bytes: e.maxrss_bytes,
                read_bps: 0.0,
                write_bps: 0.0,
                comm: Rc::from(e.comm.as_str()),
                cmd: Rc::from(cmd.as_str()),
                cgroup: String::new(),
                kthread: false,
                runq_p99_us: None,
                write_calls_per_s: None,
                small_write_share: None,
                net_rx_bps: None,
                net_tx_bps: None,
            });
        }
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
            links: m.links.clone(),
            net: m.net.as_ref().map(|n| kernstat_model::net::KindRate {
                rx_bps: n.rx_bps,
                tx_bps: n.tx_bps,
            }),
            net_unavailable: m
                .net
                .is_none()
                .then(|| "per-process network was not counted when this was recorded".into()),
        }
    }
}
