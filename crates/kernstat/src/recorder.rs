//! The flight recorder in the daemon (`kernstat daemon --record DIR`): every
//! --record-interval, one frame of what the daemon's sample already computed (the model:
//! machine figures and every process's rates), every process's table row from the task
//! iterator (ppid, uid, command line, start, threads), and the processes that ended
//! since the previous frame from the exits hook, appended to the archive
//! (kernstat-record). Opened while the daemon may still load BPF and create the
//! directory; recording runs on the sampler's thread, after a sample is published.
//!
//! A write that fails (a full disk) is said once, loses nothing already written, and
//! recording resumes by itself when a write succeeds again, said once too.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use kernstat_bpf::exits::Exits;
use kernstat_model::ps::{command_line, CpuInterval, PsRow, RowExtras, TaskRow};
use kernstat_model::record::Frame;
use kernstat_model::Model;
use kernstat_record::{Retention, Writer};
use kernstat_sources::Want;

use crate::cli::DaemonArgs;
use crate::tasks::TaskSource;

/// The recorder's state between frames.
pub struct Recorder {
    writer: Writer,
    tasks: TaskSource,
    procfs_extra: Option<kernstat_sources::ProcfsPs>,
    exits: Option<Exits>,
    exits_lost: u64,
    interval: Duration,
    /// When the next frame is due.
    pub next_due: Instant,
    /// The previous frame's rows (CPU % over the interval; command lines of processes
    /// that end before the next frame) and when they were read.
    prev: Option<(Vec<TaskRow>, Instant)>,
    /// The last write failed (said once until one succeeds).
    failing: bool,
    dir: String,
}

const WANT: Want = Want {
    cmdline: true,
    cgroup: false,
};

impl Recorder {
    /// Opens everything recording needs while the daemon is privileged: the archive
    /// directory (for a system daemon owned by `owner`, group adm if there is one, mode
    /// 2750: command lines are for root and adm), the task iterator and the exits hook.
    pub fn open(
        args: &DaemonArgs,
        dir: &Path,
        owner: Option<(u32, u32)>,
    ) -> anyhow::Result<Recorder> {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("--record {}: creating it", dir.display()))?;
        if let Some((uid, gid)) = owner {
            let adm = kernstat_sources::users::group_id("adm").unwrap_or(gid);
            std::os::unix::fs::chown(dir, Some(uid), Some(adm))
                .with_context(|| format!("--record {}: chown", dir.display()))?;
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o2750))
                .with_context(|| format!("--record {}: chmod", dir.display()))?;
        }
        let writer = Writer::open(
            dir,
            Retention {
                max_age: args.retain,
                max_bytes: args.max_size,
            },
        )
        .with_context(|| format!("--record {}", dir.display()))?;
        let no_bpf = args.source.no_bpf;
        let tasks = TaskSource::open(no_bpf, Path::new(kernstat_bpf::ps::DEFAULT_PIN_DIR), true)?;
        let exits = if no_bpf {
            None
        } else {
            match Exits::load() {
                Ok(e) => Some(e),
                Err(e) => {
                    eprintln!(
                        "kernstat daemon: --record: processes that end between two samples will not be recorded ({e})"
                    );
                    None
                }
            }
        };
        Ok(Recorder {
            writer,
            tasks,
            procfs_extra: None,
            exits,
            exits_lost: 0,
            interval: args.record_interval,
            next_due: Instant::now(),
            prev: None,
            failing: false,
            dir: dir.display().to_string(),
        })
    }

    /// Records one frame from the daemon's latest model, if one is due by `now`.
    pub fn maybe_record(&mut self, model: &Model, now: Instant) {
        if now < self.next_due {
            return;
        }
        while self.next_due <= now {
            self.next_due += self.interval;
        }
        if let Err(e) = self.record(model) {
            if !self.failing {
                eprintln!(
                    "kernstat daemon: recording to {} stopped: {e:#} (the samples already written are kept; retrying at every sample)",
                    self.dir
                );
                self.failing = true;
            }
        } else if self.failing {
            eprintln!("kernstat daemon: recording to {} resumed", self.dir);
            self.failing = false;
        }
    }

    fn record(&mut self, model: &Model) -> anyhow::Result<()> {
        let read_at = Instant::now();
        let time_unix_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let boot_ns = boottime_ns();
        let tasks = self
            .tasks
            .read(false, WANT, &mut self.procfs_extra)
            .context("reading the processes")?;
        let cpu = self.prev.as_ref().map(|(rows, at)| {
            CpuInterval::new(rows, read_at.duration_since(*at).as_nanos() as u64)
        });
        let processes: Vec<PsRow> = tasks
            .iter()
            .map(|t| {
                let extras = RowExtras {
                    cpu_percent: cpu.as_ref().map_or(0.0, |c| c.percent(t)),
                    user: String::new(),
                    cmd: command_line(t),
                    cgroup: String::new(),
                };
                PsRow::from_task(t, false, extras)
            })
            .collect();
        let mut exited = match self.exits.as_mut() {
            Some(e) => e.drain()?,
            None => Vec::new(),
        };
        let lost_now = self.exits.as_ref().map_or(0, |e| e.lost());
        for e in exited.iter_mut() {
            e.exit_unix_ns = time_unix_ns.saturating_sub(boot_ns.saturating_sub(e.exit_ns));
            if let Some((rows, _)) = &self.prev {
                if let Some(t) = rows
                    .iter()
                    .find(|t| t.pid == e.pid && t.start_ns == e.start_ns)
                {
                    e.cmd = command_line(t);
                }
            }
        }
        let frame = Frame {
            time_unix_ns,
            boot_ns,
            model: model.clone(),
            processes,
            exited,
            exits_lost: lost_now - self.exits_lost,
            exits_source: if self.exits.is_some() { "bpf" } else { "" }.into(),
        };
        self.exits_lost = lost_now;
        self.prev = Some((tasks, read_at));
        self.writer.append(&frame)?;
        Ok(())
    }
}

fn boottime_ns() -> u64 {
    let ts = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
