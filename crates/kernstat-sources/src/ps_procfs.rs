//! The process table from /proc: `kernstat ps --no-bpf`, the fallback, and the baseline
//! `ps --bench` measures the iterator against.
//!
//! Per process it reads what the iterator gives: /proc/PID/stat (state, ppid, times,
//! priority, threads, start, sizes), /proc/PID/status (real uid and gid), /proc/PID/io
//! (storage bytes; needs the right to ptrace the process), /proc/PID/cmdline and
//! /proc/PID/cgroup (the cgroup v2 line). It is as cheap as procfs allows: files opened
//! relative to a kept directory fd with paths built on the stack, one pread each into
//! kept buffers, byte-level parsing, and a visitor that borrows those buffers, so the walk
//! itself allocates nothing per process.

use std::io;
use std::mem::MaybeUninit;
use std::os::fd::OwnedFd;

use rustix::fs::{openat, Mode, OFlags};

use kernstat_model::ps::TaskRow;
use kernstat_model::TaskName;

use crate::file::{
    fields, keyed_value, lines, ns_per_tick, numeric_entries, open_dir, page_size, parse_i64,
    parse_u64, read_at, ProcPath,
};
use crate::Roots;

const PF_KTHREAD: u64 = 0x0020_0000;

/// One task as read from /proc, borrowing the walker's buffers.
#[derive(Debug)]
pub struct TaskView<'a> {
    /// Parsed numbers (cmdline and cgroup_path left empty).
    pub row: TaskRow,
    /// The command line bytes (NUL separated), leaders only.
    pub cmdline: &'a [u8],
    /// The cgroup v2 path from /proc/PID/cgroup ("0::/path"), if any.
    pub cgroup: &'a [u8],
}

/// Which optional files to read per process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Want {
    /// /proc/PID/cmdline.
    pub cmdline: bool,
    /// /proc/PID/cgroup.
    pub cgroup: bool,
}

impl Want {
    /// Everything.
    pub const ALL: Want = Want {
        cmdline: true,
        cgroup: true,
    };
}

/// Walks /proc.
#[derive(Debug)]
pub struct ProcfsPs {
    proc_dir: OwnedFd,
    dirbuf: Vec<MaybeUninit<u8>>,
    pids: Vec<u32>,
    files: PidFiles,
    /// The files `visit_kept` keeps open.
    kept: Option<KeptFiles>,
}

/// One process's stat, status and io, open between readings (`visit_kept`).
#[derive(Debug)]
struct KeptFiles {
    pid: u32,
    stat: OwnedFd,
    status: Option<OwnedFd>,
    /// None once a read failed (another user's process: EACCES), not tried again.
    io: Option<OwnedFd>,
}

/// The per-process readers and their buffers.
#[derive(Debug)]
struct PidFiles {
    taskdirbuf: Vec<MaybeUninit<u8>>,
    tids: Vec<u32>,
    stat: Vec<u8>,
    status: Vec<u8>,
    io: Vec<u8>,
    cmdline: Vec<u8>,
    cgroup: Vec<u8>,
    ns_per_tick: u64,
    page_size: u64,
}

impl ProcfsPs {
    /// Opens `roots.proc`.
    pub fn open(roots: &Roots) -> io::Result<Self> {
        let proc_dir = open_dir(&roots.proc)?;
        Ok(ProcfsPs {
            proc_dir,
            dirbuf: vec![MaybeUninit::uninit(); 64 * 1024],
            pids: Vec::with_capacity(4096),
            files: PidFiles {
                taskdirbuf: vec![MaybeUninit::uninit(); 16 * 1024],
                tids: Vec::with_capacity(256),
                stat: vec![0; 4096],
                status: vec![0; 8192],
                io: vec![0; 1024],
                cmdline: vec![0; 4096],
                cgroup: vec![0; 4096],
                ns_per_tick: ns_per_tick(),
                page_size: page_size(),
            },
            kept: None,
        })
    }

    /// Calls `f` for every process (every task, with `threads`). Processes that exit
    /// during the walk are skipped.
    pub fn walk(
        &mut self,
        threads: bool,
        want: Want,
        mut f: impl FnMut(&TaskView<'_>),
    ) -> io::Result<()> {
        numeric_entries(&self.proc_dir, &mut self.dirbuf, &mut self.pids)?;
        for &pid in &self.pids {
            self.files
                .visit_pid(&self.proc_dir, pid, threads, want, &mut f);
        }
        Ok(())
    }

    /// Calls `f` for one process (and its threads, with `threads`), reading the files
    /// `want` asks for; false if it is gone.
    pub fn visit_one(
        &mut self,
        pid: u32,
        threads: bool,
        want: Want,
        mut f: impl FnMut(&TaskView<'_>),
    ) -> bool {
        self.files
            .visit_pid(&self.proc_dir, pid, threads, want, &mut f)
    }

    /// Calls `f` for one process (not its threads) from its stat, status and io files,
    /// kept open between calls: one pread each, where `visit_one` walks three paths and
    /// opens and closes three files (for a process read at every refresh: `top` reads
    /// PID 1 so, which this machine's kernel hides from task walks; the three opens and a
    /// stat of /proc/1 were 16 % of a refresh's CPU in `perf record`). A kept file of a
    /// process that exited reads nothing (ESRCH), so a pid used again is opened again,
    /// never misread; io that cannot be read (another user's process) is not tried
    /// again. False if the process is gone.
    pub fn visit_kept(&mut self, pid: u32, want: Want, mut f: impl FnMut(&TaskView<'_>)) -> bool {
        let files = &mut self.files;
        let kept = match self.kept.take().filter(|k| k.pid == pid) {
            Some(k) => k,
            None => {
                let open = |name: &[u8]| {
                    let mut path = ProcPath::new();
                    path.num(pid);
                    openat(
                        &self.proc_dir,
                        path.push(name).cstr(),
                        OFlags::RDONLY | OFlags::CLOEXEC,
                        Mode::empty(),
                    )
                    .ok()
                };
                let Some(stat) = open(b"/stat") else {
                    return false;
                };
                KeptFiles {
                    pid,
                    stat,
                    status: open(b"/status"),
                    io: open(b"/io"),
                }
            }
        };
        let Some(mut row) = read_kept(&kept.stat, &mut files.stat)
            .and_then(|b| parse_stat(b, files.ns_per_tick, files.page_size))
        else {
            return false; // gone: opened again next time
        };
        let mut kept = kept;
        row.tid = pid;
        row.pid = pid;
        row.leader = true;
        if let Some(status) = kept
            .status
            .as_ref()
            .and_then(|fd| read_kept(fd, &mut files.status))
        {
            set_ids(&mut row, status);
        }
        if !row.kthread {
            match kept.io.as_ref().map(|fd| read_kept(fd, &mut files.io)) {
                Some(Some(io)) => set_io(&mut row, io),
                Some(None) => kept.io = None,
                None => {}
            }
        }
        let mut path = ProcPath::new();
        path.num(pid);
        let base = path.len();
        let cmdline: &[u8] = if row.kthread || !want.cmdline {
            &[]
        } else {
            read_at(
                &self.proc_dir,
                path.push(b"/cmdline").cstr(),
                &mut files.cmdline,
            )
            .unwrap_or(&[])
        };
        path.truncate(base);
        let cgroup = if want.cgroup {
            read_at(
                &self.proc_dir,
                path.push(b"/cgroup").cstr(),
                &mut files.cgroup,
            )
            .map(cgroup_v2_path)
            .unwrap_or(&[])
        } else {
            &[]
        };
        f(&TaskView {
            row,
            cmdline,
            cgroup,
        });
        self.kept = Some(kept);
        true
    }

    /// Every process (task) as owned rows.
    pub fn read(&mut self, threads: bool, want: Want) -> io::Result<Vec<TaskRow>> {
        let mut rows = Vec::new();
        self.walk(threads, want, |v| rows.push(v.to_row()))?;
        Ok(rows)
    }
}

impl TaskView<'_> {
    /// An owned copy with the command line and cgroup path filled in.
    pub fn to_row(&self) -> TaskRow {
        let mut r = self.row.clone();
        r.cmdline = self.cmdline.to_vec();
        r.cgroup_path =
            (!self.cgroup.is_empty()).then(|| String::from_utf8_lossy(self.cgroup).into_owned());
        r
    }
}

impl PidFiles {
    fn visit_pid(
        &mut self,
        dir: &OwnedFd,
        pid: u32,
        threads: bool,
        want: Want,
        f: &mut impl FnMut(&TaskView<'_>),
    ) -> bool {
        let mut path = ProcPath::new();
        path.num(pid);
        let base = path.len();
        let Some(mut row) = self.read_task(dir, &mut path, pid, pid) else {
            return false;
        };
        row.leader = true;
        path.truncate(base);
        let cmdline: &[u8] = if row.kthread || !want.cmdline {
            &[]
        } else {
            read_at(dir, path.push(b"/cmdline").cstr(), &mut self.cmdline).unwrap_or(&[])
        };
        path.truncate(base);
        let cgroup = if want.cgroup {
            read_at(dir, path.push(b"/cgroup").cstr(), &mut self.cgroup)
                .map(cgroup_v2_path)
                .unwrap_or(&[])
        } else {
            &[]
        };
        if !threads {
            f(&TaskView {
                row,
                cmdline,
                cgroup,
            });
            return true;
        }
        // With --threads: every task of the process, each with its own counters.
        path.truncate(base);
        let Ok(task_dir) = openat(
            dir,
            path.push(b"/task").cstr(),
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        ) else {
            return false;
        };
        let mut tids = std::mem::take(&mut self.tids);
        if numeric_entries(&task_dir, &mut self.taskdirbuf, &mut tids).is_err() {
            self.tids = tids;
            return false;
        }
        // The leader's own view: the group's command line and cgroup.
        let cmdline = cmdline.to_vec();
        let cgroup = cgroup.to_vec();
        for &tid in &tids {
            let mut p = ProcPath::new();
            p.num(tid);
            if let Some(mut t) = self.read_task(&task_dir, &mut p, tid, pid) {
                t.leader = tid == pid;
                let cmd: &[u8] = if t.leader { &cmdline } else { &[] };
                f(&TaskView {
                    row: t,
                    cmdline: cmd,
                    cgroup: &cgroup,
                });
            }
        }
        self.tids = tids;
        true
    }

    /// Reads stat, status and io under `path` (a pid or tid directory name).
    fn read_task(
        &mut self,
        dir: &OwnedFd,
        path: &mut ProcPath,
        tid: u32,
        pid: u32,
    ) -> Option<TaskRow> {
        let base = path.len();
        let stat = read_at(dir, path.push(b"/stat").cstr(), &mut self.stat)?;
        let mut row = parse_stat(stat, self.ns_per_tick, self.page_size)?;
        row.tid = tid;
        row.pid = pid;
        path.truncate(base);
        if let Some(status) = read_at(dir, path.push(b"/status").cstr(), &mut self.status) {
            set_ids(&mut row, status);
        }
        if !row.kthread {
            path.truncate(base);
            if let Some(io) = read_at(dir, path.push(b"/io").cstr(), &mut self.io) {
                set_io(&mut row, io);
            }
        }
        Some(row)
    }
}

/// A kept file's content now (pread from offset 0 makes procfs generate it again).
fn read_kept<'a>(fd: &OwnedFd, buf: &'a mut [u8]) -> Option<&'a [u8]> {
    let n = rustix::io::pread(fd, &mut *buf, 0).ok()?;
    Some(&buf[..n])
}

/// The path from the "0::/path" line of /proc/PID/cgroup (cgroup v2).
pub fn cgroup_v2_path(buf: &[u8]) -> &[u8] {
    lines(buf)
        .find_map(|l| l.strip_prefix(b"0::"))
        .unwrap_or(&[])
}

/// A row's ids from its /proc/PID/status.
fn set_ids(row: &mut TaskRow, status: &[u8]) {
    (row.uid, row.euid, row.gid) = parse_ids(status);
}

/// A row's storage bytes from its /proc/PID/io.
fn set_io(row: &mut TaskRow, io: &[u8]) {
    row.read_bytes = keyed_value(io, b"read_bytes").unwrap_or(0);
    row.write_bytes = keyed_value(io, b"write_bytes").unwrap_or(0);
}

/// (uid, euid, gid) from /proc/PID/status.
pub fn parse_ids(status: &[u8]) -> (u32, u32, u32) {
    let mut uid = (0, 0);
    let mut gid = 0;
    for l in lines(status) {
        if let Some(rest) = l.strip_prefix(b"Uid:") {
            let mut f = fields(rest);
            uid.0 = f.next().and_then(parse_u64).unwrap_or(0) as u32;
            uid.1 = f.next().and_then(parse_u64).unwrap_or(0) as u32;
        } else if let Some(rest) = l.strip_prefix(b"Gid:") {
            gid = fields(rest).next().and_then(parse_u64).unwrap_or(0) as u32;
            break;
        }
    }
    (uid.0, uid.1, gid)
}

/// Parses /proc/PID/stat into a row (ids and I/O left for the caller).
pub fn parse_stat(data: &[u8], ns_per_tick: u64, page_size: u64) -> Option<TaskRow> {
    let open = data.iter().position(|&b| b == b'(')?;
    let close = data.iter().rposition(|&b| b == b')')?;
    if close < open {
        return None;
    }
    let mut row = TaskRow {
        comm: TaskName::from_bytes(&data[open + 1..close]),
        ..Default::default()
    };
    let (mut utime, mut stime, mut cutime, mut cstime) = (0, 0, 0, 0);
    for (i, f) in fields(&data[close + 1..]).enumerate() {
        let num = || parse_u64(f).unwrap_or(0);
        match i + 3 {
            3 => row.state = f.first().copied().unwrap_or(b'?'),
            4 => row.ppid = num() as u32,
            9 => row.kthread = num() & PF_KTHREAD != 0,
            14 => utime = num(),
            15 => stime = num(),
            16 => cutime = num(),
            17 => cstime = num(),
            18 => row.prio = parse_i64(f).unwrap_or(0) as i32,
            19 => row.nice = parse_i64(f).unwrap_or(0) as i32,
            20 => row.threads = num() as u32,
            22 => row.start_ns = num().saturating_mul(ns_per_tick),
            23 => row.vsz_bytes = num(),
            24 => row.rss_bytes = num().saturating_mul(page_size),
            41 => {
                row.policy = num() as u8;
                break;
            }
            _ => {}
        }
    }
    row.cpu_ns = utime.saturating_add(stime).saturating_mul(ns_per_tick);
    row.reaped_children_cpu_ns = cutime.saturating_add(cstime).saturating_mul(ns_per_tick);
    Some(row)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields() {
        let line = b"77 (my proc) R 1 77 77 0 -1 4194304 10 0 0 0 30 20 7 3 20 0 4 0 500 8192000 300 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n";
        let r = parse_stat(line, 10_000_000, 4096).unwrap();
        assert_eq!(r.comm.as_str(), "my proc");
        assert_eq!(r.state, b'R');
        assert_eq!(r.ppid, 1);
        assert_eq!(r.cpu_ns, 500_000_000);
        assert_eq!(r.reaped_children_cpu_ns, 100_000_000);
        assert_eq!(r.prio, 20);
        assert_eq!(r.nice, 0);
        assert_eq!(r.threads, 4);
        assert_eq!(r.start_ns, 5_000_000_000);
        assert_eq!(r.vsz_bytes, 8_192_000);
        assert_eq!(r.rss_bytes, 300 * 4096);
        assert_eq!(r.policy, 0);
    }

    #[test]
    fn ids_and_cgroup() {
        let status = b"Name:\tbash\nUid:\t1000\t1001\t1000\t1000\nGid:\t100\t100\t100\t100\n";
        assert_eq!(parse_ids(status), (1000, 1001, 100));
        assert_eq!(
            cgroup_v2_path(b"12:pids:/x\n0::/user.slice/a.scope\n"),
            b"/user.slice/a.scope"
        );
        assert_eq!(cgroup_v2_path(b"1:name=systemd:/\n"), b"");
    }

    #[test]
    fn a_kept_process_reads_like_a_visit_and_goes_with_its_process() {
        let mut w = ProcfsPs::open(&Roots::default()).unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = child.id();
        let want = Want {
            cmdline: true,
            cgroup: false,
        };
        let mut one = Vec::new();
        assert!(w.visit_one(pid, false, want, |v| one.push(v.to_row())));
        for _ in 0..2 {
            let mut kept = Vec::new();
            assert!(w.visit_kept(pid, want, |v| kept.push(v.to_row())));
            let (a, b) = (&one[0], &kept[0]);
            assert_eq!(
                (a.pid, a.ppid, a.uid, a.gid, a.start_ns, &a.comm, &a.cmdline),
                (b.pid, b.ppid, b.uid, b.gid, b.start_ns, &b.comm, &b.cmdline)
            );
            assert!(b.leader && b.comm.as_str() == "sleep");
        }
        child.kill().unwrap();
        child.wait().unwrap();
        // Its kept files read nothing now (ESRCH), and nothing else has its pid yet.
        assert!(!w.visit_kept(pid, want, |_| panic!("a row of a reaped process")));
    }

    #[test]
    fn a_kept_process_whose_io_cannot_be_read_is_not_tried_again() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("42");
        std::fs::create_dir_all(dir.join("io")).unwrap(); // a directory: pread fails
        let stat = "42 (x) S 1 42 42 0 -1 0 0 0 0 0 30 20 0 0 20 0 1 0 500 8192 3 0\n";
        std::fs::write(dir.join("stat"), stat).unwrap();
        std::fs::write(dir.join("status"), "Uid:\t7\t7\t7\t7\nGid:\t8\t8\t8\t8\n").unwrap();
        let roots = Roots {
            proc: t.path().to_path_buf(),
            sys: t.path().join("sys"),
        };
        let mut w = ProcfsPs::open(&roots).unwrap();
        let want = Want {
            cmdline: false,
            cgroup: false,
        };
        let mut rows = Vec::new();
        assert!(w.visit_kept(42, want, |v| rows.push(v.to_row())));
        std::fs::remove_dir(dir.join("io")).unwrap();
        std::fs::write(dir.join("io"), "read_bytes: 4096\nwrite_bytes: 8192\n").unwrap();
        std::fs::write(dir.join("stat"), stat.replace(" 30 20 ", " 60 20 ")).unwrap();
        assert!(w.visit_kept(42, want, |v| rows.push(v.to_row())));
        assert_eq!((rows[0].uid, rows[0].gid, rows[0].read_bytes), (7, 8, 0));
        assert!(
            rows[1].cpu_ns > rows[0].cpu_ns,
            "stat is read again from its kept file"
        );
        assert_eq!(rows[1].read_bytes, 0, "io is not opened again");
    }

    #[test]
    fn walks_this_machine() {
        let mut w = ProcfsPs::open(&Roots::default()).unwrap();
        let rows = w.read(false, Want::ALL).unwrap();
        let me = rows
            .iter()
            .find(|r| r.pid == std::process::id())
            .expect("this process");
        assert!(me.leader && !me.cmdline.is_empty());
        let threads = w.read(true, Want::ALL).unwrap();
        assert!(threads.len() >= rows.len());
        assert!(
            threads
                .iter()
                .filter(|r| r.pid == std::process::id())
                .count()
                >= 1
        );
    }
}
