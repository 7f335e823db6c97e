//! cgroup v2: where the hierarchy is mounted, the path of a cgroup id (ids are the
//! directories' inode numbers, which is what BPF's bpf_get_current_cgroup_id and the
//! task iterator report), the id and depth of a directory a user names (`runqlat
//! --cgroup`), and [`CgroupReader`], which reads every group's figures.
//!
//! The reader walks the hierarchy from an open directory: each group's files are read
//! with openat relative to the group's directory (no path walk from /), only the files
//! of controllers the group has (`cgroup.controllers`), and the limits (cpu.max,
//! memory.max ...) once per group and then every tenth reading, as they rarely move.

use std::collections::HashMap;
use std::ffi::CStr;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use kernstat_model::cgroup::{
    CgroupCpu, CgroupMemory, CgroupSample, CgroupTree, IoDevice, Pressure,
};

use crate::file::{fields, lines, parse_u64, spaced_value};
use crate::Roots;

/// cgroup2's statfs magic (linux/magic.h).
pub const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// Why a directory cannot be used as a cgroup filter.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// It cannot be read.
    #[error("{0}: {1}")]
    Io(PathBuf, std::io::Error),
    /// It is not a directory on a cgroup2 mount.
    #[error("{0}: not a cgroup v2 directory (e.g. /sys/fs/cgroup/user.slice)")]
    NotCgroup2(PathBuf),
}

/// Where cgroup2 is mounted, from `<proc>/self/mounts`.
pub fn cgroup2_mount(roots: &Roots) -> Option<PathBuf> {
    let mounts = std::fs::read_to_string(roots.proc.join("self/mounts")).ok()?;
    mounts.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        (f.get(2) == Some(&"cgroup2")).then(|| PathBuf::from(f[1]))
    })
}

fn is_cgroup2(p: &Path) -> bool {
    // f_type's width differs between architectures: the cast is not always a no-op.
    #[allow(clippy::unnecessary_cast)]
    rustix::fs::statfs(p)
        .map(|s| s.f_type as i64 == CGROUP2_SUPER_MAGIC)
        .unwrap_or(false)
}

/// The cgroup id (its directory's inode) and level (depth below the hierarchy's root)
/// of `path`, which must be a directory on a cgroup2 mount.
pub fn target(path: &Path) -> Result<(u64, i32), TargetError> {
    let io = |e| TargetError::Io(path.to_path_buf(), e);
    let md = std::fs::metadata(path).map_err(io)?;
    if !md.is_dir() || !is_cgroup2(path) {
        return Err(TargetError::NotCgroup2(path.to_path_buf()));
    }
    let canon = path.canonicalize().map_err(io)?;
    let mut level = 0;
    let mut p = canon.as_path();
    while let Some(parent) = p.parent() {
        let same_mount = std::fs::metadata(parent).map_err(io)?.dev() == md.dev();
        if !is_cgroup2(parent) || !same_mount {
            break;
        }
        level += 1;
        p = parent;
    }
    Ok((md.ino(), level))
}

/// cgroup id -> path below the hierarchy's root ("/user.slice/..."), from one walk.
#[derive(Clone, Debug, Default)]
pub struct CgroupPaths {
    by_id: HashMap<u64, String>,
}

impl CgroupPaths {
    /// Walks the cgroup2 hierarchy mounted on this machine (empty without one).
    pub fn scan(roots: &Roots) -> Self {
        cgroup2_mount(roots)
            .map(|root| Self::scan_dir(&root))
            .unwrap_or_default()
    }

    /// Walks the hierarchy whose root directory is `root`.
    pub fn scan_dir(root: &Path) -> Self {
        let mut by_id = HashMap::new();
        let mut stack = vec![root.to_path_buf()];
        while let Some(dir) = stack.pop() {
            if let Ok(md) = std::fs::metadata(&dir) {
                use std::os::unix::ffi::OsStrExt;
                let rel = dir.strip_prefix(root).unwrap_or(&dir);
                let mut shown = String::new();
                for part in rel.components() {
                    shown.push('/');
                    shown.push_str(&kernstat_model::text::escape_name(
                        part.as_os_str().as_bytes(),
                    ));
                }
                if shown.is_empty() {
                    shown.push('/');
                }
                by_id.insert(md.ino(), shown);
            }
            if let Ok(rd) = std::fs::read_dir(&dir) {
                for e in rd.flatten() {
                    if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                        stack.push(e.path());
                    }
                }
            }
        }
        CgroupPaths { by_id }
    }

    /// The path of `id`: "" for 0 (no cgroup known), "#id" for one that has gone.
    pub fn path(&self, id: u64) -> String {
        self.by_id.get(&id).cloned().unwrap_or_else(|| {
            if id == 0 {
                String::new()
            } else {
                format!("#{id}")
            }
        })
    }
}

/// What a reading includes beyond the cheap files.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CgroupWant {
    /// memory.stat (anon, file, kernel, sock): the dearest file (the kernel flushes its
    /// per-CPU statistics to answer), so only when shown.
    pub memory_stat: bool,
}

/// Readings of the limits kept between readings, per group path.
#[derive(Clone, Copy, Debug, Default)]
struct Limits {
    cpu_max: Option<(Option<u64>, Option<u64>)>,
    weight: Option<u64>,
    mem_max: Option<u64>,
    mem_high: Option<u64>,
    pids_max: Option<u64>,
    read_at: u64,
}

/// A group's directory and the files read from it, kept open between readings, so
/// that a reading is one pread per file where openat + pread + close were three calls.
/// Measured with `kernstat cgroups --bench 20` over 102 groups here (strace -c): 26
/// system calls per group per reading before, 40 µs per group.
#[derive(Debug)]
struct GroupFiles {
    /// The directory's inode: a group removed and made again under the same name is
    /// another directory (its getdents entry shows the new inode).
    ino: u64,
    dir: OwnedFd,
    /// Each file read, and None for one that was missing (tried again when limits are).
    files: HashMap<&'static CStr, Option<OwnedFd>>,
    /// cgroup.controllers as last read (again when the limits are).
    controllers: Option<Vec<u8>>,
    /// Subdirectories as last listed, names as the kernel gives them (not always UTF-8),
    /// sorted (again when the hierarchy's count of groups changed, and when the limits
    /// are read).
    children: Option<Vec<(Vec<u8>, u64)>>,
    /// Its files stay open between readings (within the reader's descriptor budget);
    /// otherwise each is opened, read and closed.
    keep: bool,
    /// cpu, memory and io pressure as last read.
    pressure: [KeptPressure; 3],
}

/// A pressure file as last read, and when.
#[derive(Clone, Copy, Debug, Default)]
struct KeptPressure {
    /// What it said (None: not read yet, or unreadable).
    last: Option<Pressure>,
    /// When it was read (monotonic ns).
    read_ns: u64,
    /// The reading at which its "some" total was last seen to move (the first reading
    /// counts as one), monotonic ns.
    moved_ns: u64,
}

impl GroupFiles {
    fn new(dir: OwnedFd, ino: u64) -> Self {
        GroupFiles {
            ino,
            dir,
            files: HashMap::new(),
            controllers: None,
            children: None,
            keep: true,
            pressure: [KeptPressure::default(); 3],
        }
    }

    /// The file's content now (pread from offset 0 makes kernfs generate it again).
    /// A file that could not be opened for want of descriptors (EMFILE, ENFILE) is
    /// missing this time only.
    fn read<'a>(
        &mut self,
        buf: &'a mut [u8],
        name: &'static CStr,
        retry: bool,
    ) -> Option<&'a [u8]> {
        let known = self.files.get(name).map(|f| f.is_some());
        if known == Some(false) && !retry {
            return None;
        }
        let opened;
        let fd = if known == Some(true) {
            self.files.get(name)?.as_ref()?
        } else {
            match rustix::fs::openat(
                &self.dir,
                name,
                rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            ) {
                Ok(fd) if self.keep => {
                    self.files.insert(name, Some(fd));
                    self.files.get(name)?.as_ref()?
                }
                Ok(fd) => {
                    opened = fd;
                    &opened
                }
                Err(rustix::io::Errno::MFILE | rustix::io::Errno::NFILE) => return None,
                Err(_) => {
                    self.files.insert(name, None);
                    return None;
                }
            }
        };
        match rustix::io::pread(fd, &mut *buf, 0) {
            Ok(n) => Some(&buf[..n]),
            Err(_) => {
                self.files.insert(name, None);
                None
            }
        }
    }

    /// Descriptors it keeps open.
    fn kept(&self) -> usize {
        1 + self.files.values().filter(|f| f.is_some()).count()
    }

    /// Subdirectories with their inodes (getdents on the kept descriptor, from its
    /// start).
    fn subdirectories(&self) -> Vec<(Vec<u8>, u64)> {
        let mut out = Vec::new();
        if rustix::fs::seek(&self.dir, rustix::fs::SeekFrom::Start(0)).is_err() {
            return out;
        }
        let mut space = [std::mem::MaybeUninit::<u8>::uninit(); 8192];
        let mut d = rustix::fs::RawDir::new(&self.dir, &mut space);
        while let Some(Ok(e)) = d.next() {
            let name = e.file_name().to_bytes();
            if e.file_type() == rustix::fs::FileType::Directory && name != b"." && name != b".." {
                out.push((name.to_vec(), e.ino()));
            }
        }
        out
    }
}

/// Reads every group of the cgroup v2 hierarchy.
#[derive(Debug)]
pub struct CgroupReader {
    mount: PathBuf,
    hybrid: bool,
    buf: Vec<u8>,
    readings: u64,
    limits: HashMap<String, Limits>,
    /// Every group read at the last reading, by path.
    open: HashMap<String, GroupFiles>,
    /// The root's nr_descendants at the last reading.
    descendants: Option<u64>,
    /// How many groups one reading reads at most, and how many children of one parent.
    bounds: CgroupBounds,
    /// Descriptors the kept files may hold (half the soft RLIMIT_NOFILE at open).
    fd_budget: usize,
    /// Pressure files read since open (tests: a quiet group's are not).
    pressure_files_read: u64,
    /// AVERAGES_LAG_NS (unit tests: shorter).
    averages_lag_ns: u64,
}

/// Readings between two reads of a group's limits.
pub const LIMITS_EVERY: u64 = 10;

/// How much of a hierarchy one reading takes. Anyone with a delegated subtree (a
/// container's root, a user's systemd) can make groups by the thousand: past these
/// bounds groups are not read, and their parent (whose figures include theirs, the
/// files being hierarchical) says how many with `truncated`. Shallow groups go first:
/// a reading fills each level before the next, and no parent gets more than its share.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CgroupBounds {
    /// Groups read in all (the root included).
    pub max_groups: usize,
    /// Children read under one parent.
    pub max_children: usize,
}

impl Default for CgroupBounds {
    fn default() -> Self {
        CgroupBounds {
            max_groups: 1000,
            max_children: 250,
        }
    }
}

impl CgroupReader {
    /// The hierarchy mounted here: None without cgroup v2.
    pub fn open(roots: &Roots) -> Option<Self> {
        let mount = cgroup2_mount(roots)?;
        let mounts = std::fs::read_to_string(roots.proc.join("self/mounts")).unwrap_or_default();
        let hybrid = mounts
            .lines()
            .any(|l| l.split_whitespace().nth(2) == Some("cgroup"));
        Some(Self::at(mount, hybrid))
    }

    /// The hierarchy whose root directory is `mount` (tests: a fake tree).
    pub fn at(mount: PathBuf, hybrid: bool) -> Self {
        CgroupReader {
            mount,
            hybrid,
            buf: vec![0; 64 * 1024],
            readings: 0,
            limits: HashMap::new(),
            open: HashMap::new(),
            descendants: None,
            bounds: CgroupBounds::default(),
            fd_budget: fd_budget(),
            pressure_files_read: 0,
            averages_lag_ns: AVERAGES_LAG_NS,
        }
    }

    /// Reads at most this much of the hierarchy.
    pub fn with_bounds(mut self, bounds: CgroupBounds) -> Self {
        self.bounds = bounds;
        self
    }

    /// Keeps at most `n` descriptors open between readings (tests).
    pub fn with_fd_budget(mut self, n: usize) -> Self {
        self.fd_budget = n;
        self
    }

    /// Descriptors kept open between readings now.
    pub fn open_descriptors(&self) -> usize {
        self.open.values().map(GroupFiles::kept).sum()
    }

    /// Pressure files read since open (each a pread, or an open, a pread and a close).
    pub fn pressure_files_read(&self) -> u64 {
        self.pressure_files_read
    }

    /// Where the hierarchy is mounted.
    pub fn mount(&self) -> &Path {
        &self.mount
    }

    /// Reads every group at most `max_depth` below the root (None: all), within the
    /// reader's bounds, parents before children, siblings by name. A group removed
    /// during the walk is skipped.
    pub fn read(
        &mut self,
        want: CgroupWant,
        max_depth: Option<u32>,
    ) -> std::io::Result<CgroupTree> {
        let mut before = std::mem::take(&mut self.open);
        let root = match before.remove("/") {
            Some(r) => r,
            None => {
                let dir = crate::file::open_dir(&self.mount)?;
                let ino = rustix::fs::fstat(&dir).map_or(0, |m| m.st_ino);
                GroupFiles::new(dir, ino)
            }
        };
        let mut tree = CgroupTree {
            mount: self.mount.display().to_string(),
            layout: if self.hybrid { "hybrid" } else { "v2" }.into(),
            taken_ns: crate::monotonic_ns(),
            groups: Vec::new(),
        };
        let refresh_limits = self.readings.is_multiple_of(LIMITS_EVERY);
        self.readings += 1;
        // Listing every group's directory was 3 of its 8 system calls per reading: lists
        // are kept, and taken again when the hierarchy's count of groups (the root's
        // cgroup.stat) moved, or with the limits (a group removed and another made
        // between two readings leave the count as it was).
        let mut root = root;
        let count = root
            .read(&mut self.buf, c"cgroup.stat", true)
            .and_then(|b| spaced_value(b, b"nr_descendants"));
        let relist = refresh_limits || count.is_none() || count != self.descendants;
        self.descendants = count;
        // Level by level (a queue), so that shallow groups are read first and a deep
        // or crowded subtree meets the bounds, not its siblings; the order people read
        // (a tree: parents first, siblings by name) is made at the end.
        let mut kept_fds = 0;
        let mut queue: std::collections::VecDeque<(GroupFiles, String, u32, StallMoved)> =
            std::collections::VecDeque::from([(root, "/".to_string(), 0, [true; 3])]);
        let mut admitted = 1;
        while let Some((mut files, path, depth, parent_moved)) = queue.pop_front() {
            files.keep = kept_fds + MAX_FILES_PER_GROUP <= self.fd_budget;
            if !files.keep {
                files.files.clear();
            }
            let (mut g, moved) =
                self.group(&mut files, &path, depth, want, refresh_limits, parent_moved);
            if max_depth.is_none_or(|m| depth < m) {
                let children = match files.children.take() {
                    Some(c) if !relist => c,
                    _ => {
                        let mut c = files.subdirectories();
                        c.sort_unstable();
                        c
                    }
                };
                let mut taken = 0;
                for (name, ino) in &children {
                    if taken >= self.bounds.max_children || admitted >= self.bounds.max_groups {
                        g.truncated += 1;
                        continue;
                    }
                    let shown = kernstat_model::text::escape_name(name);
                    let child = if path == "/" {
                        format!("/{shown}")
                    } else {
                        format!("{path}/{shown}")
                    };
                    let kept = before.remove(&child).filter(|c| c.ino == *ino);
                    let files_of_child = match kept {
                        Some(c) => c,
                        None => {
                            let Ok(cname) = std::ffi::CString::new(name.as_slice()) else {
                                continue;
                            };
                            match rustix::fs::openat(
                                &files.dir,
                                cname.as_c_str(),
                                rustix::fs::OFlags::RDONLY
                                    | rustix::fs::OFlags::DIRECTORY
                                    | rustix::fs::OFlags::CLOEXEC,
                                rustix::fs::Mode::empty(),
                            ) {
                                Ok(fd) => GroupFiles::new(fd, *ino),
                                // No descriptor left: not read this time, said as truncated.
                                Err(rustix::io::Errno::MFILE | rustix::io::Errno::NFILE) => {
                                    g.truncated += 1;
                                    continue;
                                }
                                Err(_) => continue, // removed meanwhile
                            }
                        }
                    };
                    taken += 1;
                    admitted += 1;
                    queue.push_back((files_of_child, child, depth + 1, moved));
                }
                files.children = Some(children);
            }
            tree.groups.push(g);
            if files.keep {
                kept_fds += files.kept();
                self.open.insert(path, files);
            }
        }
        tree.groups.sort_by(|a, b| tree_order(&a.path, &b.path));
        // What is left in `before` is gone (or beyond the bounds now): closed here.
        let open = &self.open;
        self.limits.retain(|p, _| open.contains_key(p));
        Ok(tree)
    }

    fn group(
        &mut self,
        dir: &mut GroupFiles,
        path: &str,
        depth: u32,
        want: CgroupWant,
        refresh_limits: bool,
        parent_moved: StallMoved,
    ) -> (CgroupSample, StallMoved) {
        let mut g = CgroupSample {
            path: path.to_string(),
            id: dir.ino,
            depth,
            ..CgroupSample::default()
        };
        let retry = refresh_limits;
        let buf = &mut self.buf;
        if refresh_limits || dir.controllers.is_none() {
            dir.controllers = Some(
                dir.read(buf, c"cgroup.controllers", retry)
                    .map(|b| b.to_vec())
                    .unwrap_or_default(),
            );
        }
        // Taken out while the files are read (they borrow `dir` mutably), put back
        // below: no copy per group per reading.
        let controllers = dir.controllers.take().unwrap_or_default();
        let has = |c: &[u8]| fields(&controllers).any(|f| f == c);
        g.read_ns = crate::monotonic_ns();
        let alive = dir
            .read(buf, c"cpu.stat", retry)
            .map(|b| g.cpu = parse_cpu_stat(b));
        if alive.is_none() {
            g.missing.push("cpu: no cpu.stat".into());
        }
        let root = depth == 0;
        let why = |what: &str, ctl: &str| -> String {
            if self.hybrid {
                format!("{what}: the {ctl} controller is on cgroup v1 here (hybrid layout); kernstat reads cgroup v2")
            } else if root {
                format!("{what}: not kept for the root group")
            } else {
                format!("{what}: the {ctl} controller is not enabled for this group (its parent's cgroup.subtree_control)")
            }
        };
        // Memory.
        let mem_current = if has(b"memory") {
            dir.read(buf, c"memory.current", retry)
                .and_then(|b| parse_u64(b.trim_ascii()))
        } else {
            None
        };
        match mem_current {
            Some(current) => {
                let mut m = CgroupMemory {
                    current,
                    ..Default::default()
                };
                m.peak = dir
                    .read(buf, c"memory.peak", retry)
                    .and_then(|b| parse_u64(b.trim_ascii()));
                m.swap = dir
                    .read(buf, c"memory.swap.current", retry)
                    .and_then(|b| parse_u64(b.trim_ascii()));
                if let Some(b) = dir.read(buf, c"memory.events", retry) {
                    m.oom = spaced_value(b, b"oom").unwrap_or(0);
                    m.oom_kill = spaced_value(b, b"oom_kill").unwrap_or(0);
                    m.high_events = spaced_value(b, b"high").unwrap_or(0);
                }
                if want.memory_stat {
                    if let Some(b) = dir.read(buf, c"memory.stat", retry) {
                        parse_memory_stat(b, &mut m);
                    }
                }
                g.memory = Some(m);
            }
            None => g.missing.push(why("memory", "memory")),
        }
        // I/O.
        if has(b"io") {
            g.io = dir.read(buf, c"io.stat", retry).map(parse_io_stat);
        }
        if g.io.is_none() {
            g.missing.push(why("io", "io"));
        }
        // Tasks.
        if has(b"pids") {
            g.pids = dir
                .read(buf, c"pids.current", retry)
                .and_then(|b| parse_u64(b.trim_ascii()));
        }
        if g.pids.is_none() {
            g.missing.push(why("pids", "pids"));
        }
        // Pressure (kept per group whatever the controllers, since 4.20): three of a
        // quiet group's five files and most of its reading's CPU (psi_show's formatting).
        // A quiet group's is kept from its last reading where the files cannot have
        // moved since (see `pressure_kept`); every file is read at the readings that
        // read the limits too.
        let mut moved = [true; 3];
        let now_ns = g.read_ns;
        for (i, (name, slot)) in [
            (c"cpu.pressure", &mut g.psi_cpu),
            (c"memory.pressure", &mut g.psi_memory),
            (c"io.pressure", &mut g.psi_io),
        ]
        .into_iter()
        .enumerate()
        {
            let kept = &mut dir.pressure[i];
            if alive.is_some() && !refresh_limits && !parent_moved[i] {
                if let Some(p) = pressure_kept(kept, self.averages_lag_ns) {
                    *slot = p;
                    moved[i] = false;
                    continue;
                }
            }
            self.pressure_files_read += 1;
            let now = dir.read(buf, name, retry).map(|b| {
                let (some, full) = crate::system::parse_psi(b);
                Pressure { some, full }
            });
            let kept = &mut dir.pressure[i];
            if let Some(p) = now {
                *slot = p;
                // A file without a "some" line counts as moved: children are read.
                moved[i] = kept.last.is_none_or(|l| total(&l) != total(&p)) || p.some.is_none();
            }
            if moved[i] {
                kept.moved_ns = now_ns;
            }
            kept.last = now;
            kept.read_ns = now_ns;
        }
        // Limits: read again every LIMITS_EVERY readings.
        let cached = self.limits.get(path).copied();
        let limits = match cached {
            Some(l) if !refresh_limits => l,
            _ => {
                let buf = &mut self.buf;
                let num = |b: Option<&[u8]>| b.and_then(|b| parse_u64(b.trim_ascii()));
                // A controller's files exist only where cgroup.controllers names it:
                // not trying the others saves a failed openat each (five a group on a
                // hybrid machine, whose v2 groups have no controller: most of the
                // reading that reads every file, ~30 ms at 1,002 groups).
                let (cpu, memory, pids) = (has(b"cpu"), has(b"memory"), has(b"pids"));
                let cpu_max = cpu
                    .then(|| dir.read(buf, c"cpu.max", retry).map(parse_cpu_max))
                    .flatten();
                let mut number = |controller: bool, file: &'static CStr| {
                    controller
                        .then(|| num(dir.read(buf, file, retry)))
                        .flatten()
                };
                let l = Limits {
                    cpu_max,
                    weight: number(cpu, c"cpu.weight"),
                    mem_max: number(memory, c"memory.max"),
                    mem_high: number(memory, c"memory.high"),
                    pids_max: number(pids, c"pids.max"),
                    read_at: self.readings,
                };
                self.limits.insert(path.to_string(), l);
                l
            }
        };
        let _ = limits.read_at;
        if let Some((quota, period)) = limits.cpu_max {
            g.cpu.max_us = quota;
            g.cpu.period_us = period;
        }
        g.cpu.weight = limits.weight;
        if let Some(m) = g.memory.as_mut() {
            m.max = limits.mem_max;
            m.high = limits.mem_high;
        }
        g.pids_max = limits.pids_max;
        dir.controllers = Some(controllers);
        (g, moved)
    }
}

/// Whether each of a group's cpu, memory and io "some" stall totals moved since the
/// reading before (or could not be compared, or was not read): its children's pressure
/// is kept only where it did not.
type StallMoved = [bool; 3];

/// How long after a pressure file's total last moved its averages may still read as
/// before: the kernel recomputes them every PSI_FREQ (2 s), at a read or in its own
/// work, so a read 2 s after a stall shows it in the averages. With a margin.
pub const AVERAGES_LAG_NS: u64 = 3_000_000_000;

/// A group's pressure as last read, where it is its pressure now without reading the
/// file (called when its parent's "some" total did not move since the reading before:
/// a stalled task is stalled in each group above it, so a group's totals move with its
/// parent's). Only where the last read showed averages of 0.00 (they decay while
/// nothing stalls, so only zero ones stay as they were) that were recomputed after the
/// total last moved (AVERAGES_LAG_NS: a total moves at once, its averages up to 2 s
/// later). What this misses: the kernel weights each CPU's stall by whole jiffies of
/// the group's activity in each interval it aggregates (closed by any read of the
/// files and by its own averaging every 2 s, so a parent's and a child's intervals
/// differ), so a burst of a few ms can move a group's total and not its parent's; and
/// a stall that begins between the parent's read and this group's. Both show at the
/// next reading that reads every file (one in LIMITS_EVERY), the totals being
/// cumulative.
fn pressure_kept(kept: &KeptPressure, lag_ns: u64) -> Option<Pressure> {
    let last = kept.last?;
    let zero = |l: &Option<kernstat_model::raw::PsiLine>| {
        l.is_none_or(|l| l.avg10 == 0.0 && l.avg60 == 0.0)
    };
    let settled = kept.read_ns.saturating_sub(kept.moved_ns) >= lag_ns;
    (last.some.is_some() && zero(&last.some) && zero(&last.full) && settled).then_some(last)
}

/// A pressure file's "some" total (what a child's stall would move).
fn total(p: &Pressure) -> Option<u64> {
    p.some.map(|l| l.total_us)
}

/// The most files one group keeps open: its directory, cgroup.stat, cgroup.controllers,
/// cpu.stat, four memory files, memory.stat, io.stat, pids.current, three pressure files
/// and five limits.
const MAX_FILES_PER_GROUP: usize = 20;

/// Half the soft limit on descriptors: the rest is for everything else (a daemon's
/// clients).
fn fd_budget() -> usize {
    rustix::process::getrlimit(rustix::process::Resource::Nofile)
        .current
        .map_or(usize::MAX, |n| usize::try_from(n / 2).unwrap_or(usize::MAX))
}

/// Parents before children, siblings by name: paths compared component by component.
fn tree_order(a: &str, b: &str) -> std::cmp::Ordering {
    let a = a.split('/').filter(|c| !c.is_empty());
    let b = b.split('/').filter(|c| !c.is_empty());
    a.cmp(b)
}

/// cpu.stat: usage_usec user_usec system_usec, and with a quota nr_periods nr_throttled
/// throttled_usec.
pub fn parse_cpu_stat(b: &[u8]) -> CgroupCpu {
    CgroupCpu {
        usage_us: spaced_value(b, b"usage_usec").unwrap_or(0),
        user_us: spaced_value(b, b"user_usec").unwrap_or(0),
        system_us: spaced_value(b, b"system_usec").unwrap_or(0),
        periods: spaced_value(b, b"nr_periods"),
        throttled_periods: spaced_value(b, b"nr_throttled"),
        throttled_us: spaced_value(b, b"throttled_usec"),
        ..Default::default()
    }
}

/// cpu.max: "QUOTA PERIOD" or "max PERIOD".
pub fn parse_cpu_max(b: &[u8]) -> (Option<u64>, Option<u64>) {
    let mut f = fields(b);
    let quota = f.next().and_then(parse_u64);
    let period = f.next().and_then(parse_u64);
    (quota, period)
}

/// memory.stat's anon, file, sock and kernel (5.18+; before, its parts added up).
pub fn parse_memory_stat(b: &[u8], m: &mut CgroupMemory) {
    m.anon = spaced_value(b, b"anon");
    m.file = spaced_value(b, b"file");
    m.sock = spaced_value(b, b"sock");
    m.kernel = spaced_value(b, b"kernel").or_else(|| {
        let parts = [&b"kernel_stack"[..], b"slab", b"percpu", b"sock"];
        let v: Vec<u64> = parts.iter().filter_map(|k| spaced_value(b, k)).collect();
        (!v.is_empty()).then(|| v.iter().sum())
    });
}

/// io.stat: "MAJ:MIN rbytes=.. wbytes=.. rios=.. wios=.. dbytes=.. dios=..", a line per
/// device.
pub fn parse_io_stat(b: &[u8]) -> Vec<IoDevice> {
    let mut out = Vec::new();
    for line in lines(b) {
        let mut f = fields(line);
        let Some(dev) = f.next() else { continue };
        let Some(colon) = dev.iter().position(|&c| c == b':') else {
            continue;
        };
        let mut d = IoDevice {
            major: parse_u64(&dev[..colon]).unwrap_or(0) as u32,
            minor: parse_u64(&dev[colon + 1..]).unwrap_or(0) as u32,
            ..Default::default()
        };
        for kv in f {
            let Some(eq) = kv.iter().position(|&c| c == b'=') else {
                continue;
            };
            let v = parse_u64(&kv[eq + 1..]).unwrap_or(0);
            match &kv[..eq] {
                b"rbytes" => d.rbytes = v,
                b"wbytes" => d.wbytes = v,
                b"rios" => d.rios = v,
                b"wios" => d.wios = v,
                _ => {}
            }
        }
        out.push(d);
    }
    out
}

#[cfg(test)]
#[path = "cgroup_tests.rs"]
mod tests;
