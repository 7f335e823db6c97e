//! The `ps` iterator (bpf/ps.bpf.c): load it, or pin it in bpffs for unprivileged
//! readers, or open a pin; read the whole stream; parse it into task rows.
//!
//! A pinned iterator is a file: opening it starts a walk, read(2) returns records, and
//! no bpf(2) call or privilege is needed, so `kernstat ps` with a pin pays neither load
//! time nor root. A process that loaded the programs itself reads the same stream from
//! `ps_run` instead where the kernel can run it (walk.rs), without command lines. The stream format is versioned (see bpf/ps.h): the pin's name carries
//! the version and the stream starts with a magic and version that are checked.

use std::fs::{self, File};
use std::io::{self, Read};
use std::mem::size_of;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::ptr;

use libbpf_rs::Iter;

use kernstat_model::ps::TaskRow;
use kernstat_model::TaskName;

use crate::loader::{failed, load_skel, LoadError};
use crate::skel::ps::types::{ks_ps_flags, ks_ps_rec, ks_ps_stream};
use crate::skel::ps::{PsSkel, PsSkelBuilder};

/// "KSPS", the stream's first four bytes (bpf/ps.h KS_PS_MAGIC).
pub const MAGIC: u32 = 0x5350_534b;
/// The record format this binary reads (bpf/ps.h KS_PS_VERSION).
pub const VERSION: u32 = 4;
/// Where `kernstat ps --pin` pins by default, and where `kernstat ps` looks.
pub const DEFAULT_PIN_DIR: &str = "/sys/fs/bpf/kernstat";

const FLAG_KTHREAD: u8 = ks_ps_flags::KS_PS_KTHREAD.0 as u8;
const FLAG_LEADER: u8 = ks_ps_flags::KS_PS_LEADER.0 as u8;
const FLAG_CUT: u8 = ks_ps_flags::KS_PS_CMDLINE_CUT.0 as u8;
const FLAG_FULL_NAME: u8 = ks_ps_flags::KS_PS_FULL_NAME.0 as u8;

/// The pin file for this binary's format version in `dir`: the iterator with command
/// lines (`cmdline`), or the lighter one without.
pub fn pin_path(dir: &Path, cmdline: bool) -> PathBuf {
    if cmdline {
        dir.join(format!("ps_cmdline_v{VERSION}"))
    } else {
        dir.join(format!("ps_v{VERSION}"))
    }
}

/// A stream that is not one this binary can read.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum FormatError {
    /// Too short to hold the header.
    #[error("the stream is {0} bytes: too short for its header")]
    Short(usize),
    /// Another program's stream, or garbage.
    #[error("not a kernstat ps stream (magic {0:#010x})")]
    Magic(u32),
    /// Another kernstat's format.
    #[error("the pinned iterator writes format v{found} (record size {size}); this kernstat reads v{VERSION}: re-pin it with `kernstat ps --pin`")]
    Version {
        /// The version found.
        found: u32,
        /// The record size found.
        size: u32,
    },
    /// A record that runs past the end or claims an impossible length.
    #[error("record at offset {0} is damaged")]
    Damaged(usize),
}

enum Source {
    /// Loaded here, with command lines or without. `walk_cap`: ps_run is loaded, with a
    /// buffer that many bytes long; `run`: walks use it (cleared for good the first time
    /// it cannot run).
    Loaded {
        skel: Box<PsSkel<'static>>,
        cmdline: bool,
        run: bool,
        walk_cap: Option<u32>,
    },
    Pinned(PathBuf),
}

/// Reads the `ps` iterator.
pub struct PsReader {
    source: Source,
    buf: Vec<u8>,
}

impl std::fmt::Debug for PsReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match &self.source {
            Source::Loaded { .. } => "loaded".to_string(),
            Source::Pinned(p) => format!("pinned at {}", p.display()),
        };
        f.debug_struct("PsReader").field("source", &what).finish()
    }
}

/// Loads the program(s) asked for: `light` (no command lines) and/or `cmdline`, and
/// ps_run with a buffer of `walk_cap` bytes when that is given.
fn load_iterator(
    light: bool,
    cmdline: bool,
    walk_cap: Option<u32>,
) -> Result<PsSkel<'static>, LoadError> {
    load_skel(PsSkelBuilder::default(), "the ps iterator", |open| {
        open.progs.ps_tasks.set_autoload(light);
        open.progs.ps_tasks_cmdline.set_autoload(cmdline);
        open.progs.ps_run.set_autoload(walk_cap.is_some());
        let rodata = open
            .maps
            .rodata_data
            .as_deref_mut()
            .expect("the ps iterator has rodata");
        if let Some(cap) = walk_cap {
            crate::walk::size_buffer(&mut open.maps.data_walk, &mut rodata.walk_cap, cap)?;
        }
        if let Some(inum) = crate::loader::reader_pid_namespace() {
            rodata.reader_pidns_inum = inum;
        }
        Ok(())
    })
}

/// The most one task adds to ps_run's stream: its record and a kernel thread's name.
const RUN_RECORD_BOUND: usize = size_of::<ks_ps_rec>() + 64 + 8;

impl PsReader {
    /// Loads and attaches the iterator (root or CAP_BPF + CAP_PERFMON), with command
    /// lines or without.
    pub fn load(cmdline: bool) -> Result<Self, LoadError> {
        let run = !cmdline && crate::walk::wanted();
        let walk_cap = run.then(|| crate::walk::buffer_size(RUN_RECORD_BOUND));
        let skel = load_iterator(!cmdline, cmdline, walk_cap)?;
        Ok(PsReader {
            source: Source::Loaded {
                skel: Box::new(skel),
                cmdline,
                run,
                walk_cap,
            },
            buf: Vec::with_capacity(256 * 1024),
        })
    }

    /// Uses the iterator pinned at `path` (no privileges needed beyond reading the file).
    pub fn pinned(path: &Path) -> io::Result<Self> {
        // Open once now so that a missing or unreadable pin is reported here.
        File::open(path)?;
        Ok(PsReader {
            source: Source::Pinned(path.to_path_buf()),
            buf: Vec::with_capacity(256 * 1024),
        })
    }

    /// Where the data comes from: "bpf" or "bpf-pin".
    pub fn source_name(&self) -> &'static str {
        match self.source {
            Source::Loaded { .. } => "bpf",
            Source::Pinned(_) => "bpf-pin",
        }
    }

    /// How walks run: "run" (ps_run by BPF_PROG_RUN) or "iterator" (a read of the
    /// iterator, pinned or loaded).
    pub fn walk_mode(&self) -> &'static str {
        match self.source {
            Source::Loaded { run: true, .. } => "run",
            _ => "iterator",
        }
    }

    /// Whether walks use ps_run (where it was loaded: a reader loaded here without
    /// command lines), or read the iterator: for comparing the two.
    pub fn set_run(&mut self, on: bool) {
        if let Source::Loaded { run, walk_cap, .. } = &mut self.source {
            *run = on && walk_cap.is_some();
        }
    }

    /// Runs one walk and returns the raw stream (kept buffer, or ps_run's mapped one).
    pub fn read_raw(&mut self) -> io::Result<&[u8]> {
        self.buf.clear();
        match self.run_walk() {
            // Two looks at the stream, as a borrow returned from one branch only would
            // keep `self` borrowed for the fallback below.
            Some(true) if self.run_stream().is_some() => {
                return Ok(self.run_stream().unwrap_or_default());
            }
            // Could not run, or outgrew its buffer (sized at load): the iterator from now.
            Some(_) => {
                if let Source::Loaded { run, .. } = &mut self.source {
                    *run = false;
                }
            }
            None => {}
        }
        match &self.source {
            Source::Loaded { skel, cmdline, .. } => {
                let link = if *cmdline {
                    skel.links.ps_tasks_cmdline.as_ref()
                } else {
                    skel.links.ps_tasks.as_ref()
                }
                .expect("attached");
                let mut it = Iter::new(link).map_err(io::Error::other)?;
                read_all(&mut it, &mut self.buf)?;
            }
            Source::Pinned(p) => {
                let mut f = File::open(p)?;
                read_all(&mut f, &mut self.buf)?;
            }
        }
        Ok(&self.buf)
    }

    /// Runs ps_run when it is loaded: Some(false) when it cannot run here.
    fn run_walk(&self) -> Option<bool> {
        match &self.source {
            Source::Loaded {
                skel, run: true, ..
            } => Some(crate::walk::run(&skel.progs.ps_run)),
            _ => None,
        }
    }

    /// The stream the last ps_run left, unless it did not fit.
    fn run_stream(&self) -> Option<&[u8]> {
        let Source::Loaded {
            skel,
            walk_cap: Some(walk_cap),
            ..
        } = &self.source
        else {
            return None;
        };
        let bss = skel.maps.bss_data.as_deref()?;
        let start = skel.maps.data_walk_data.as_deref()?;
        // SAFETY: this object's .data.walk, sized to walk_cap at load, and its .bss.
        unsafe { crate::walk::stream(start, *walk_cap, &bss.walk_len, &bss.walk_full) }
    }

    /// Runs one walk and parses it.
    pub fn read(&mut self) -> io::Result<Vec<TaskRow>> {
        let raw = self.read_raw()?;
        parse(raw).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
    }
}

/// Reads to EOF straight into `buf`'s spare capacity (no bounce buffer).
fn read_all(r: &mut impl Read, buf: &mut Vec<u8>) -> io::Result<()> {
    r.read_to_end(buf).map(|_| ())
}

/// Parses a stream: header, then records.
pub fn parse(raw: &[u8]) -> Result<Vec<TaskRow>, FormatError> {
    let hsz = size_of::<ks_ps_stream>();
    if raw.is_empty() {
        // No task at all (cannot happen on a live system, but is not an error).
        return Ok(Vec::new());
    }
    if raw.len() < hsz {
        return Err(FormatError::Short(raw.len()));
    }
    // SAFETY: in bounds; plain old data.
    let hdr: ks_ps_stream = unsafe { ptr::read_unaligned(raw.as_ptr().cast()) };
    if hdr.magic != MAGIC {
        return Err(FormatError::Magic(hdr.magic));
    }
    let rsz = size_of::<ks_ps_rec>();
    if hdr.version != VERSION || hdr.rec_size as usize != rsz {
        return Err(FormatError::Version {
            found: hdr.version,
            size: hdr.rec_size,
        });
    }
    let mut rows = Vec::with_capacity((raw.len() - hsz) / rsz);
    let mut off = hsz;
    while off < raw.len() {
        if off + rsz > raw.len() {
            return Err(FormatError::Damaged(off));
        }
        // SAFETY: in bounds; plain old data.
        let r: ks_ps_rec = unsafe { ptr::read_unaligned(raw[off..].as_ptr().cast()) };
        let len = r.rec_len as usize;
        let cmd = r.cmdline_len as usize;
        if len < rsz + cmd || off + len > raw.len() || !len.is_multiple_of(8) {
            return Err(FormatError::Damaged(off));
        }
        let cmdline = raw[off + rsz..off + rsz + cmd].to_vec();
        rows.push(row(&r, cmdline));
        off += len;
    }
    Ok(rows)
}

/// Counts the records of a stream without copying them out (for benchmarks); 0 for a
/// stream this binary cannot read.
pub fn count_records(raw: &[u8]) -> usize {
    let hsz = size_of::<ks_ps_stream>();
    if raw.len() < hsz {
        return 0;
    }
    let mut n = 0;
    let mut off = hsz;
    while off + 2 <= raw.len() {
        let len = u16::from_le_bytes([raw[off], raw[off + 1]]) as usize;
        if len == 0 {
            break;
        }
        off += len;
        n += 1;
    }
    n
}

fn row(r: &ks_ps_rec, cmdline: Vec<u8>) -> TaskRow {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(1) as u64;
    // SAFETY: [i8; 16] and [u8; 16] have the same layout.
    let comm: [u8; 16] = unsafe { std::mem::transmute(r.comm) };
    TaskRow {
        tid: r.pid,
        pid: r.tgid,
        ppid: r.ppid,
        uid: r.uid,
        euid: r.euid,
        gid: r.gid,
        state: r.state,
        kthread: r.flags & FLAG_KTHREAD != 0,
        leader: r.flags & FLAG_LEADER != 0,
        policy: r.policy,
        nice: r.nice,
        prio: r.prio,
        threads: r.nr_threads,
        start_ns: r.start_ns,
        cpu_ns: r.cpu_ns,
        read_bytes: r.read_bytes,
        write_bytes: r.write_bytes,
        dead_cpu_ns: r.dead_cpu_ns,
        reaped_children_cpu_ns: r.reaped_children_cpu_ns,
        run_delay_ns: r.run_delay_ns,
        dead_read_bytes: r.dead_read_bytes,
        dead_write_bytes: r.dead_write_bytes,
        // Saturating: a forged stream (a --pin-dir file is anyone's) must not overflow.
        rss_bytes: r.rss_pages.saturating_mul(page),
        vsz_bytes: r.vsz_pages.saturating_mul(page),
        cgroup_id: r.cgroup_id,
        cgroup_path: None,
        // A kernel thread whose name comm cut carries its full name where a command
        // line would be (bpf/ps.h, KS_PS_FULL_NAME).
        comm: if r.flags & FLAG_FULL_NAME != 0 {
            TaskName::from_bytes(&cmdline)
        } else {
            TaskName::from_bytes(&comm)
        },
        cmdline: if r.flags & FLAG_FULL_NAME != 0 {
            Vec::new()
        } else {
            cmdline
        },
        cmdline_cut: r.flags & FLAG_CUT != 0,
    }
}

/// Mounts bpffs at `mount_point` unless something is mounted there already.
fn ensure_bpffs(mount_point: &Path) -> io::Result<()> {
    let mounts = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let mp = mount_point.to_string_lossy();
    if mounts.lines().any(|l| {
        l.split_whitespace().nth(1) == Some(&*mp) && l.split_whitespace().nth(2) == Some("bpf")
    }) {
        return Ok(());
    }
    fs::create_dir_all(mount_point)?;
    let target = std::ffi::CString::new(mp.as_bytes()).map_err(io::Error::other)?;
    // SAFETY: valid NUL-terminated strings; no data argument.
    let rc = unsafe {
        libc::mount(
            c"bpf".as_ptr(),
            target.as_ptr(),
            c"bpf".as_ptr(),
            0,
            ptr::null(),
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The bpffs mount point that holds `dir` (its first component under /sys/fs/bpf, or
/// `dir`'s parent).
fn bpffs_root(dir: &Path) -> PathBuf {
    if dir.starts_with("/sys/fs/bpf") {
        PathBuf::from("/sys/fs/bpf")
    } else {
        dir.parent().unwrap_or(dir).to_path_buf()
    }
}

/// Loads both iterators and pins them at `pin_path(dir, _)`, readable by everyone (mode
/// 0444; `dir` 0755), mounting bpffs if needed. Existing pins of the same version are
/// replaced. Returns the pins' paths.
pub fn pin(dir: &Path) -> Result<Vec<PathBuf>, PinError> {
    let mut skel = load_iterator(true, true, None)?;
    ensure_bpffs(&bpffs_root(dir)).map_err(|e| PinError::Io("mounting bpffs", e))?;
    fs::create_dir_all(dir).map_err(|e| PinError::Io("creating the pin directory", e))?;
    fs::set_permissions(dir, fs::Permissions::from_mode(0o755))
        .map_err(|e| PinError::Io("opening the pin directory to all users", e))?;
    let mut paths = Vec::new();
    for cmdline in [false, true] {
        let path = pin_path(dir, cmdline);
        if path.exists() {
            fs::remove_file(&path).map_err(|e| PinError::Io("replacing the old pin", e))?;
        }
        let link = if cmdline {
            skel.links.ps_tasks_cmdline.as_mut()
        } else {
            skel.links.ps_tasks.as_mut()
        }
        .expect("attached");
        link.pin(&path)
            .map_err(|e| failed("pinning the ps iterator", e))?;
        fs::set_permissions(&path, fs::Permissions::from_mode(0o444))
            .map_err(|e| PinError::Io("making the pin readable", e))?;
        paths.push(path);
    }
    Ok(paths)
}

/// Removes this version's pins from `dir` (and `dir`, if that leaves it empty).
pub fn unpin(dir: &Path) -> io::Result<bool> {
    let mut any = false;
    for cmdline in [false, true] {
        let path = pin_path(dir, cmdline);
        if path.exists() {
            fs::remove_file(&path)?;
            any = true;
        }
    }
    let _ = fs::remove_dir(dir);
    Ok(any)
}

/// Why pinning failed.
#[derive(Debug, thiserror::Error)]
pub enum PinError {
    /// Loading the program failed.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A file-system step failed.
    #[error("{0}: {1}")]
    Io(&'static str, io::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream(version: u32, recs: &[(u32, &[u8])]) -> Vec<u8> {
        let mut v = Vec::new();
        let hdr = ks_ps_stream {
            magic: MAGIC,
            version,
            rec_size: size_of::<ks_ps_rec>() as u32,
            _pad: 0,
        };
        // SAFETY: plain old data viewed as bytes.
        v.extend_from_slice(unsafe {
            std::slice::from_raw_parts(
                (&hdr as *const ks_ps_stream).cast::<u8>(),
                size_of::<ks_ps_stream>(),
            )
        });
        for (pid, cmd) in recs {
            let len = (size_of::<ks_ps_rec>() + cmd.len()).div_ceil(8) * 8;
            let r = ks_ps_rec {
                pid: *pid,
                tgid: *pid,
                flags: FLAG_LEADER,
                cmdline_len: cmd.len() as u16,
                rec_len: len as u16,
                ..Default::default()
            };
            // SAFETY: plain old data viewed as bytes.
            v.extend_from_slice(unsafe {
                std::slice::from_raw_parts(
                    (&r as *const ks_ps_rec).cast::<u8>(),
                    size_of::<ks_ps_rec>(),
                )
            });
            v.extend_from_slice(cmd);
            v.resize(v.len() + len - size_of::<ks_ps_rec>() - cmd.len(), 0);
        }
        v
    }

    #[test]
    fn parses_records_with_command_lines() {
        let s = stream(VERSION, &[(1, b"/sbin/init\0"), (2, b""), (3, b"a\0bc\0")]);
        let rows = parse(&s).unwrap();
        assert_eq!(rows.len(), 3);
        assert_eq!(rows[0].cmdline, b"/sbin/init\0");
        assert_eq!(rows[2].cmdline, b"a\0bc\0");
        assert!(rows.iter().all(|r| r.leader));
    }

    use proptest::prelude::*;

    /// Command lines as the iterator copies them: NUL-separated, bounded.
    fn recs() -> impl Strategy<Value = Vec<(u32, Vec<u8>)>> {
        proptest::collection::vec(
            (any::<u32>(), proptest::collection::vec(any::<u8>(), 0..300)),
            0..40,
        )
    }

    proptest! {
        /// A well-formed stream reads back record for record.
        #[test]
        fn well_formed_streams_read_back(recs in recs()) {
            let borrowed: Vec<(u32, &[u8])> =
                recs.iter().map(|(p, c)| (*p, c.as_slice())).collect();
            let rows = parse(&stream(VERSION, &borrowed)).unwrap();
            prop_assert_eq!(rows.len(), recs.len());
            for (row, (pid, cmd)) in rows.iter().zip(&recs) {
                prop_assert_eq!(row.pid, *pid);
                prop_assert_eq!(&row.cmdline, cmd);
            }
            prop_assert_eq!(count_records(&stream(VERSION, &borrowed)), recs.len());
        }

        /// A forged or damaged stream (a good header, then bytes changed, cut or
        /// appended anywhere) is refused or read, never a panic or an out-of-bounds
        /// read, and never yields more records than its bytes can hold.
        #[test]
        fn forged_streams_never_panic(
            recs in recs(),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..16),
            cut in any::<prop::sample::Index>(),
            tail in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let borrowed: Vec<(u32, &[u8])> =
                recs.iter().map(|(p, c)| (*p, c.as_slice())).collect();
            let mut s = stream(VERSION, &borrowed);
            for (at, b) in &flips {
                let i = at.index(s.len());
                s[i] = *b;
            }
            s.truncate(cut.index(s.len() + 1));
            s.extend_from_slice(&tail);
            if let Ok(rows) = parse(&s) {
                prop_assert!(rows.len() * size_of::<ks_ps_rec>() <= s.len());
            }
            let _ = count_records(&s);
        }

        /// Arbitrary bytes: the same.
        #[test]
        fn arbitrary_bytes_never_panic(raw in proptest::collection::vec(any::<u8>(), 0..2048)) {
            let _ = parse(&raw);
            let _ = count_records(&raw);
        }
    }

    #[test]
    fn refuses_other_versions_and_garbage() {
        let s = stream(VERSION + 1, &[(1, b"")]);
        let e = parse(&s).unwrap_err();
        assert!(matches!(e, FormatError::Version { found, .. } if found == VERSION + 1));
        assert!(e.to_string().contains("re-pin"));
        assert_eq!(
            parse(b"nonsense-nonsense"),
            Err(FormatError::Magic(u32::from_le_bytes(*b"nons")))
        );
        let mut s = stream(VERSION, &[(1, b"abc")]);
        s.truncate(s.len() - 4);
        assert!(matches!(parse(&s), Err(FormatError::Damaged(_))));
    }
}
