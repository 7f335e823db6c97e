//! The flight recorder in the daemon (`kernstat daemon --record DIR`): every
//! --record-interval, one frame of what the daemon's sample already computed (the model:
//! machine figures and every process's rates), what a process table adds from the task
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
use kernstat_model::ps::{PsRow, RowExtras};
use kernstat_model::record::{Frame, ProcDetail};
use kernstat_model::Model;
use kernstat_record::{Retention, Writer};
use kernstat_sources::Want;
use std::collections::HashMap;

use kernstat_collect::tasks::{self, TaskSource};

/// Where and how the daemon records.
#[derive(Clone, Debug)]
pub struct RecordOptions {
    /// The archive directory.
    pub dir: std::path::PathBuf,
    /// Between frames.
    pub interval: Duration,
    /// What the archive keeps.
    pub retention: Retention,
    /// A group that may read the archive (None: its owner and root only).
    pub group: Option<u32>,
}

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
    /// Command lines by (pid, start): read once per process, from /proc when it is
    /// first seen (reading every process's from the iterator at every frame was 0.6 ms
    /// of a 1 ms read at 300 processes here; a command line does not change after exec
    /// but for the few processes that rewrite it). Also what an ended process keeps.
    commands: HashMap<(u32, u64), String>,
    /// The last write failed (said once until one succeeds).
    failing: bool,
    dir: String,
}

const WANT: Want = Want {
    cmdline: false,
    cgroup: false,
};

impl Recorder {
    /// Opens everything recording needs while the daemon is privileged: the archive
    /// directory (for a system daemon owned by `owner`, for it alone or with
    /// --record-group: command lines and every process's counters are in it), the task
    /// iterator and the exits hook.
    pub fn open(
        opts: &RecordOptions,
        no_bpf: bool,
        owner: Option<(u32, u32)>,
    ) -> anyhow::Result<Recorder> {
        let (dir, group) = (opts.dir.as_path(), opts.group);
        match owner {
            Some((uid, gid)) => hand_over(dir, uid, gid, group)?,
            None => std::fs::create_dir_all(dir)
                .with_context(|| format!("--record {}: creating it", dir.display()))?,
        }
        let file_mode = if group.is_some() { 0o640 } else { 0o600 };
        let writer = Writer::open(dir, opts.retention, file_mode)
            .with_context(|| format!("--record {}", dir.display()))?;
        let tasks = TaskSource::open(no_bpf, &tasks::pin_dir(), true)?;
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
            interval: opts.interval,
            next_due: Instant::now(),
            commands: HashMap::new(),
            failing: false,
            dir: dir.display().to_string(),
        })
    }

    /// Time between frames.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// Records one frame from the daemon's latest model (and the kernel histograms the
    /// metrics sources hold, with --collect), if one is due by `now`.
    pub fn maybe_record(
        &mut self,
        model: &Model,
        metrics: Option<&crate::metrics_feed::MetricsSources>,
        now: Instant,
    ) {
        if now < self.next_due {
            return;
        }
        while self.next_due <= now {
            self.next_due += self.interval;
        }
        if let Err(e) = self.record(model, metrics) {
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

    fn record(
        &mut self,
        model: &Model,
        metrics: Option<&crate::metrics_feed::MetricsSources>,
    ) -> anyhow::Result<()> {
        let time_unix_ns = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let boot_ns = kernstat_sources::boottime_ns();
        let tasks = self
            .tasks
            .read(false, WANT, &mut self.procfs_extra)
            .context("reading the processes")?;
        let mut commands = HashMap::with_capacity(tasks.len());
        for t in &tasks {
            let key = (t.pid, t.start_ns);
            let cmd = match self.commands.remove(&key) {
                Some(c) => c,
                None => tasks::read_command_line(t),
            };
            commands.insert(key, cmd);
        }
        let details: Vec<ProcDetail> = tasks
            .iter()
            .map(|t| {
                let extras = RowExtras {
                    cpu_percent: 0.0,
                    user: String::new(),
                    cmd: commands
                        .get(&(t.pid, t.start_ns))
                        .cloned()
                        .unwrap_or_default(),
                    cgroup: String::new(),
                };
                ProcDetail::of(&PsRow::from_task(t, false, extras))
            })
            .collect();
        let mut exited = match self.exits.as_mut() {
            Some(e) => e.drain()?,
            None => Vec::new(),
        };
        let lost_now = self.exits.as_ref().map_or(0, |e| e.lost());
        for e in exited.iter_mut() {
            e.exit_unix_ns = time_unix_ns.saturating_sub(boot_ns.saturating_sub(e.exit_ns));
            if let Some(c) = self.commands.get(&(e.pid, e.start_ns)) {
                e.cmd = c.clone();
            }
        }
        let (runqlat_us, writes) = metrics.map(|m| m.recorded()).unwrap_or_default();
        let frame = Frame {
            time_unix_ns,
            boot_ns,
            model: model.clone(),
            details,
            exited,
            exits_lost: lost_now - self.exits_lost,
            exits_source: if self.exits.is_some() { "bpf" } else { "" }.into(),
            runqlat_us,
            writes,
        };
        self.exits_lost = lost_now;
        self.commands = commands;
        self.writer.append(&frame)?;
        Ok(())
    }
}

/// The archive directory of a system daemon, which writes it as its unprivileged user:
/// made (the user's, mode 0700, or 2750 with `group`) when missing; an existing one is
/// used when that user already owns it, or handed over when it is root's and empty
/// (a directory made for it) or root's and holding only archive files (what systemd, or
/// an administrator's `chown -R root:`, leaves of one: the files are handed over with
/// it, each through the directory's descriptor, links refused); anything else (a link,
/// another's directory, a directory with other files in it) is refused, so
/// `--record /etc` changes nothing.
fn hand_over(dir: &Path, uid: u32, gid: u32, group: Option<u32>) -> anyhow::Result<()> {
    use rustix::fs::{Mode, OFlags};
    let refuse = |why: &str| -> anyhow::Result<()> {
        anyhow::bail!(
            "--record {}: {why}; refusing to give it to the daemon's user (name a new directory, or one that user owns)",
            dir.display()
        )
    };
    let ctx = || format!("--record {}", dir.display());
    if !dir.exists() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .create(dir)
            .with_context(ctx)?;
    }
    // Everything below acts on this descriptor: a link swapped in after the checks
    // cannot redirect the chown.
    let fd = match rustix::fs::open(
        dir,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::LOOP | rustix::io::Errno::NOTDIR) => {
            return refuse("not a directory (or a link)")
        }
        Err(e) => return Err(std::io::Error::from(e)).with_context(ctx),
    };
    let md = rustix::fs::fstat(&fd).with_context(ctx)?;
    let (dir_mode, file_mode, owner_gid) = match group {
        Some(g) => (0o2750, 0o640, g),
        None => (0o700, 0o600, gid),
    };
    if md.st_uid != uid && md.st_uid != 0 {
        return refuse("it belongs to another user");
    }
    // What is in it: nothing, or archive files only (regular, not links).
    let mut files: Vec<std::ffi::CString> = Vec::new();
    let mut space = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
    let mut entries = rustix::fs::RawDir::new(&fd, &mut space);
    while let Some(e) = entries.next() {
        let e = e.map_err(std::io::Error::from).with_context(ctx)?;
        let name = e.file_name().to_bytes();
        if matches!(name, b"." | b"..") {
            continue;
        }
        let ours = std::str::from_utf8(name).is_ok_and(kernstat_record::is_archive_entry);
        if !ours || e.file_type() != rustix::fs::FileType::RegularFile {
            return if md.st_uid == uid {
                Ok(())
            } else {
                refuse("it is root's and holds files that are not an archive's")
            };
        }
        files.push(e.file_name().to_owned());
    }
    let set = |target: rustix::fs::Uid, mode: u32, file: Option<&std::ffi::CStr>| {
        let g = Some(rustix::fs::Gid::from_raw(owner_gid));
        match file {
            None => {
                rustix::fs::fchown(&fd, Some(target), g)?;
                rustix::fs::fchmod(&fd, Mode::from_raw_mode(mode))
            }
            Some(f) => {
                let ffd = rustix::fs::openat(
                    &fd,
                    f,
                    OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
                    Mode::empty(),
                )?;
                if rustix::fs::fstat(&ffd)?.st_mode & 0o170000 != 0o100000 {
                    return Err(rustix::io::Errno::INVAL);
                }
                rustix::fs::fchown(&ffd, Some(target), g)?;
                rustix::fs::fchmod(&ffd, Mode::from_raw_mode(mode))
            }
        }
    };
    let target = rustix::fs::Uid::from_raw(uid);
    for f in &files {
        set(target, file_mode, Some(f))
            .map_err(std::io::Error::from)
            .with_context(|| format!("--record {}: {f:?}", dir.display()))?;
    }
    set(target, dir_mode, None)
        .map_err(std::io::Error::from)
        .with_context(ctx)?;
    Ok(())
}
