//! The flight recorder in the daemon (`kernstat daemon --record DIR`): every
//! --record-interval, one frame of the machine's, every process's and every group's
//! cumulative counters (the daemon's latest raw sample, and a read of every process
//! from the task iterator for what a table shows), with the processes that ended since
//! the frame before from the exit hook, appended to the archive (kernstat-record: the
//! frame is made there, bounded per user, and written by its one writer). Opened while
//! the daemon may still load BPF and create the directory; recording runs on the
//! sampler's thread, after a sample is published.
//!
//! A write that fails (a full disk) is said once, loses nothing already written, and
//! recording resumes by itself when a write succeeds again, said once too. An archive
//! over its size with nothing left to delete but its last day pauses the recorder (said
//! once) until it fits again.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::Context;
use kernstat_bpf::exits::Exits;
use kernstat_model::RawSample;
use kernstat_record::build::{Bounds, FrameBuilder, Inputs};
use kernstat_record::{Retention, Writer};
use kernstat_sources::Want;

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

/// What the recorder has done, for `kernstat status` and the start line.
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct RecorderState {
    /// The archive.
    pub dir: String,
    /// "recording", "paused" (over its size), "failing" (the last write failed).
    pub state: &'static str,
    /// The archive's first and last frames, ns since the Unix epoch.
    pub first_unix_ns: Option<u64>,
    /// See `first_unix_ns`.
    pub last_unix_ns: Option<u64>,
    /// The archive's size, bytes.
    pub bytes: u64,
    /// Frames written since the daemon started.
    pub frames: u64,
    /// Seconds between frames.
    pub interval_s: f64,
}

impl RecorderState {
    /// One line for the daemon's start: where, how often, what the archive holds.
    pub fn describe(&self) -> String {
        let size = kernstat_render::human::bytes_string(self.bytes as f64);
        let held = match (self.first_unix_ns, self.last_unix_ns) {
            (Some(a), Some(b)) => format!(
                "it holds {} to {}, {size}",
                kernstat_record::time::local_stamp(a),
                kernstat_record::time::local_stamp(b)
            ),
            _ => "empty so far".to_string(),
        };
        format!(
            "recording every {} to {} ({held}; `kernstat top --at -10m` replays it)",
            kernstat_record::time::span_text((self.interval_s * 1e9) as u64),
            self.dir
        )
    }
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
    builder: FrameBuilder,
    /// The last write failed (said once until one succeeds).
    failing: bool,
    /// Over its size with only its floor left (said once until it fits).
    paused: bool,
    /// Group paths by id, for processes in groups deeper than the daemon reads.
    paths: Option<(kernstat_sources::cgroup::CgroupPaths, Instant)>,
    state: RecorderState,
    /// Kernel events since the last frame (recorded with the next).
    events: Vec<kernstat_model::events::Event>,
    /// Retransmits per socket since the last frame: each sample holds only its own
    /// interval's, and frames are usually several samples apart.
    retransmits: Vec<kernstat_model::tcp::SocketRetrans>,
}

const WANT: Want = Want {
    cmdline: false,
    cgroup: true,
};

impl Recorder {
    /// Opens everything recording needs while the daemon is privileged: the archive
    /// directory (for a system daemon owned by `owner`, for it alone or with
    /// --record-group: command lines and every process's counters are in it) and its
    /// writer's lock, the task iterator and the exit hook.
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
            .map_err(|e| anyhow::anyhow!("--record: {e}"))?;
        if let Some((uid, gid)) = owner {
            let gid = group.unwrap_or(gid);
            writer
                .give_lock_to(uid, gid)
                .with_context(|| format!("--record {}: the lock file", dir.display()))?;
        }
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
        let span = kernstat_record::Archive::open(dir)
            .ok()
            .and_then(|a| a.span().ok().flatten());
        let state = RecorderState {
            dir: dir.display().to_string(),
            state: "recording",
            first_unix_ns: span.map(|s| s.0),
            last_unix_ns: span.map(|s| s.1),
            bytes: writer.total_bytes(),
            frames: 0,
            interval_s: opts.interval.as_secs_f64(),
        };
        Ok(Recorder {
            writer,
            tasks,
            procfs_extra: None,
            exits,
            exits_lost: 0,
            interval: opts.interval,
            next_due: Instant::now(),
            builder: FrameBuilder::new(Bounds::default()),
            failing: false,
            paused: false,
            paths: None,
            state,
            events: Vec::new(),
            retransmits: Vec::new(),
        })
    }

    /// Time between frames.
    pub fn interval(&self) -> Duration {
        self.interval
    }

    /// What it has done so far.
    pub fn state(&self) -> &RecorderState {
        &self.state
    }

    /// Kernel events to record with the next frame.
    pub fn note_events(&mut self, events: &[kernstat_model::events::Event]) {
        self.events.extend_from_slice(events);
        // Bounded while recording is paused or failing (a storm of kills).
        let excess = self.events.len().saturating_sub(1000);
        self.events.drain(..excess);
    }

    /// A sample's retransmits, to record with the next frame (merged per socket;
    /// bounded while recording is paused).
    pub fn note_retransmits(&mut self, list: &[kernstat_model::tcp::SocketRetrans]) {
        for s in list {
            let full = self.retransmits.len() >= 4096;
            match self
                .retransmits
                .iter_mut()
                .find(|r| r.ino == s.ino && r.pid == s.pid)
            {
                Some(r) => r.count += s.count,
                None if !full => self.retransmits.push(s.clone()),
                None => {}
            }
        }
    }

    /// Records one frame from the daemon's latest raw sample (and the kernel histograms
    /// the metrics sources hold, with --collect), if one is due by `now`.
    pub fn maybe_record(
        &mut self,
        raw: &RawSample,
        metrics: Option<&crate::metrics_feed::MetricsSources>,
        now: Instant,
    ) {
        if now < self.next_due {
            return;
        }
        while self.next_due <= now {
            self.next_due += self.interval;
        }
        let dir = self.state.dir.clone();
        match self.record(raw, metrics) {
            Err(e) => {
                if !self.failing {
                    eprintln!(
                        "kernstat daemon: recording to {dir} stopped: {e:#} (the samples already written are kept; retrying at every sample)"
                    );
                    self.failing = true;
                }
                self.state.state = "failing";
            }
            Ok(()) => {
                if self.failing {
                    eprintln!("kernstat daemon: recording to {dir} resumed");
                    self.failing = false;
                }
                self.state.state = if self.paused { "paused" } else { "recording" };
            }
        }
        for note in self.writer.notes.drain(..) {
            eprintln!("kernstat daemon: --record: {note}");
        }
    }

    fn now_unix_ns() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    }

    fn record(
        &mut self,
        raw: &RawSample,
        metrics: Option<&crate::metrics_feed::MetricsSources>,
    ) -> anyhow::Result<()> {
        let time_unix_ns = Self::now_unix_ns();
        if self.paused {
            let (_, over) = self.writer.prune(time_unix_ns)?;
            if over {
                return Ok(());
            }
            eprintln!(
                "kernstat daemon: recording to {} resumed: the archive fits its --max-size again",
                self.state.dir
            );
            self.paused = false;
        }
        let boot_ns = kernstat_sources::boottime_ns();
        let mut rows = self
            .tasks
            .read(false, WANT, &mut self.procfs_extra)
            .context("reading the processes")?;
        self.place_in_groups(raw, &mut rows);
        let ended = match self.exits.as_mut() {
            Some(e) => Some(e.drain()?),
            None => None,
        };
        let lost_now = self.exits.as_ref().map_or(0, |e| e.lost());
        let mut hists = metrics.map(|m| m.recorded()).unwrap_or_default();
        if raw.tcp.present {
            hists.connect_us = Some(raw.tcp.connect.slots.clone());
        }
        let mut frame = self.builder.build(
            Inputs {
                time_unix_ns,
                boot_ns,
                raw,
                tasks: &rows,
                ended,
                ended_lost: lost_now - self.exits_lost,
                hists,
            },
            tasks::read_command_line,
        );
        self.exits_lost = lost_now;
        frame.retransmits = kernstat_record::build::retransmits_of(&self.retransmits);
        self.retransmits.clear();
        frame.events = self
            .events
            .iter()
            .map(kernstat_record::frame::Event::of)
            .collect();
        let appended = self.writer.append(&frame)?;
        self.events.clear();
        self.state.frames += 1;
        self.state.bytes = self.writer.total_bytes();
        self.state.last_unix_ns = Some(time_unix_ns);
        self.state.first_unix_ns.get_or_insert(time_unix_ns);
        if appended.over_budget && !self.paused {
            eprintln!(
                "kernstat daemon: recording to {} paused: the archive is over its --max-size and holds only its last day, which retention keeps; it resumes when it fits",
                self.state.dir
            );
            self.paused = true;
        }
        Ok(())
    }

    /// Fills in the group paths the task iterator does not give (it gives ids): from
    /// the groups the daemon read, else from a walk of the hierarchy (at most once a
    /// minute, when a process is in a group not seen yet).
    fn place_in_groups(&mut self, raw: &RawSample, rows: &mut [kernstat_model::ps::TaskRow]) {
        let known: std::collections::HashMap<u64, &str> = raw
            .cgroups
            .groups
            .iter()
            .map(|g| (g.id, g.path.as_str()))
            .collect();
        let unknown = rows.iter().any(|t| {
            t.cgroup_path.is_none() && t.cgroup_id != 0 && !known.contains_key(&t.cgroup_id)
        });
        let stale = self
            .paths
            .as_ref()
            .is_none_or(|(_, at)| at.elapsed() > Duration::from_secs(60));
        if unknown && stale {
            self.paths = Some((
                kernstat_sources::cgroup::CgroupPaths::scan(&kernstat_sources::Roots::default()),
                Instant::now(),
            ));
        }
        for t in rows.iter_mut().filter(|t| t.cgroup_path.is_none()) {
            t.cgroup_path = match known.get(&t.cgroup_id) {
                Some(p) => Some(p.to_string()),
                None => self
                    .paths
                    .as_ref()
                    .map(|(p, _)| p.path(t.cgroup_id))
                    .filter(|p| p.starts_with('/')),
            };
        }
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
