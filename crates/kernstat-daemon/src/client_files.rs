//! Reading the files a client names — a repository, a kubeconfig, a `.tool-versions` —
//! without letting the client turn the daemon against itself or against other users.
//!
//! A prompt asks about whatever directory its shell is in, so every path here may have
//! been laid out by someone hostile: an unpacked archive with `.git/HEAD` linked to
//! `/dev/zero`, a FIFO where a config belongs, a symbolic link swapped between a check
//! and an open, a repository another user may not read asked about through the system
//! daemon. The rules (shared/security findings H1, M5):
//!
//! - Paths are resolved here, one component at a time, from descriptors: each directory
//!   is opened `O_PATH | O_NOFOLLOW` relative to its parent, and symbolic links are
//!   read with `readlinkat` and followed by hand (at most 40, as the kernel). What is
//!   checked is the inode that is then used, never a name looked up again, so renaming
//!   or relinking between the check and the read gains nothing.
//! - With [`Rights::Of`] (a system daemon answering another user), every directory on
//!   the way must be searchable and the file readable by that user — owner, group
//!   (primary and supplementary, from `SO_PEERGROUPS`) and other bits, as the kernel's
//!   `generic_permission` decides; root may read anything. ACLs are not consulted.
//! - Only regular files are opened (a FIFO, device or socket is refused from its
//!   `lstat`, before any open that could block or have side effects), non-blocking, and
//!   read up to a cap: a larger file is an error, never a partial answer.
//!
//! Everything here blocks on the file system (a hung FUSE or NFS mount hangs it): call it
//! from blocking jobs (`jobs.rs`), never on the threads that answer other clients.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Stat};

/// Most symbolic links followed in one resolution (the kernel's limit).
const MAX_LINKS: usize = 40;
/// Longest symbolic link target read.
const MAX_LINK: usize = 4096;

/// A user's identity as the kernel checks file access: uid, primary gid and
/// supplementary groups.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Creds {
    /// The user.
    pub uid: u32,
    /// Primary group.
    pub gid: u32,
    /// Supplementary groups.
    pub groups: Vec<u32>,
}

/// Whose rights a read is checked against.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum Rights {
    /// The daemon's own: it reads for its own user (a user daemon), or for root.
    #[default]
    Own,
    /// Another user's: nothing that user could not read is read for them.
    Of(Creds),
}

impl Rights {
    /// The uid reads are made for (None: the daemon's own).
    pub fn uid(&self) -> Option<u32> {
        match self {
            Rights::Own => None,
            Rights::Of(c) => Some(c.uid),
        }
    }

    /// Whether these rights allow `want` (4 read, 1 search) on an inode of `st`.
    fn allow(&self, st: &Stat, want: u32) -> bool {
        let Rights::Of(c) = self else { return true };
        if c.uid == 0 {
            return true;
        }
        let mode = st.st_mode;
        let bits = if st.st_uid == c.uid {
            mode >> 6
        } else if st.st_gid == c.gid || c.groups.contains(&st.st_gid) {
            mode >> 3
        } else {
            mode
        };
        bits & want == want
    }
}

fn denied(path: &Path, rights: &Rights) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "{}: not readable by uid {}",
            path.display(),
            rights.uid().unwrap_or(0)
        ),
    )
}

fn kind_of(st: &Stat) -> FileType {
    FileType::from_raw_mode(st.st_mode)
}

/// A directory reached with some rights: its descriptor and those of every directory
/// above it (so that a search upward, as git's and the tools' own, needs no new walk),
/// and its path without links.
#[derive(Clone, Debug)]
pub struct Walk {
    /// ("/" first) each level's name and descriptor (`O_PATH`).
    levels: Vec<(OsString, Arc<OwnedFd>)>,
    rights: Rights,
}

/// What a resolution ended on.
enum End {
    /// A directory: pushed on the walk.
    Dir,
    /// A non-directory entry `name` of the walk's deepest directory, with its lstat.
    Entry(OsString, Stat),
    /// Nothing there: the name that is missing.
    Missing(OsString),
}

impl Walk {
    /// The root directory with `rights` (it must be searchable by them).
    pub fn root(rights: &Rights) -> io::Result<Walk> {
        let fd = rustix::fs::openat(
            rustix::fs::CWD,
            "/",
            OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let st = rustix::fs::fstat(&fd)?;
        if !rights.allow(&st, 1) {
            return Err(denied(Path::new("/"), rights));
        }
        Ok(Walk {
            levels: vec![(OsString::from("/"), Arc::new(fd))],
            rights: rights.clone(),
        })
    }

    /// The directory `path` (absolute), every component searchable with `rights`,
    /// links followed by hand.
    pub fn to(path: &Path, rights: &Rights) -> io::Result<Walk> {
        let mut w = Walk::root(rights)?;
        match w.descend(path)? {
            End::Dir => Ok(w),
            End::Entry(name, _) => Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a directory", w.path().join(name).display()),
            )),
            End::Missing(name) => Err(not_found(&w.path().join(name))),
        }
    }

    /// The rights this walk was made with.
    pub fn rights(&self) -> &Rights {
        &self.rights
    }

    /// The directory's path, without links.
    pub fn path(&self) -> PathBuf {
        let mut p = PathBuf::from("/");
        for (name, _) in &self.levels[1..] {
            p.push(name);
        }
        p
    }

    /// The directory's descriptor (`O_PATH`: for `*at` calls).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.levels.last().expect("a walk has a root").1.as_fd()
    }

    /// How many directories deep (the root is 0).
    pub fn depth(&self) -> usize {
        self.levels.len() - 1
    }

    /// The parent directory (the root's parent is the root).
    pub fn parent(&self) -> Walk {
        let mut w = self.clone();
        if w.levels.len() > 1 {
            w.levels.pop();
        }
        w
    }

    /// Moves along `rel` (relative components; an absolute path starts again at the
    /// root), following links by hand and checking each directory. Stops at the first
    /// component that is not a directory (it must then be the last one) or is missing.
    fn descend(&mut self, rel: &Path) -> io::Result<End> {
        let mut pending: std::collections::VecDeque<OsString> =
            components(rel, &mut self.levels).collect();
        let mut links = 0;
        while let Some(c) = pending.pop_front() {
            if c == ".." {
                if self.levels.len() > 1 {
                    self.levels.pop();
                }
                continue;
            }
            let st = match rustix::fs::statat(self.fd(), c.as_os_str(), AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                Err(rustix::io::Errno::NOENT) if pending.is_empty() => {
                    return Ok(End::Missing(c));
                }
                Err(rustix::io::Errno::NOENT) => return Err(not_found(&self.path().join(&c))),
                Err(e) => {
                    let e = io::Error::from(e);
                    return Err(io::Error::new(
                        e.kind(),
                        format!("{}: {e}", self.path().join(&c).display()),
                    ));
                }
            };
            match kind_of(&st) {
                FileType::Symlink => {
                    links += 1;
                    if links > MAX_LINKS {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidInput,
                            format!("{}: too many symbolic links", rel.display()),
                        ));
                    }
                    let target = rustix::fs::readlinkat(self.fd(), c.as_os_str(), Vec::new())?;
                    let target = PathBuf::from(OsStr::from_bytes(target.as_bytes()));
                    if target.as_os_str().len() > MAX_LINK {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidInput,
                            "symbolic link target too long",
                        ));
                    }
                    let mut front: Vec<OsString> = components(&target, &mut self.levels).collect();
                    front.extend(pending.drain(..));
                    pending = front.into();
                }
                FileType::Directory => {
                    let fd = rustix::fs::openat(
                        self.fd(),
                        c.as_os_str(),
                        OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                        Mode::empty(),
                    )
                    .map_err(|e| {
                        let e = io::Error::from(e);
                        io::Error::new(e.kind(), format!("{}: {e}", self.path().join(&c).display()))
                    })?;
                    // The inode opened, not the one looked at: a swap in between is
                    // checked as what it is.
                    let st = rustix::fs::fstat(&fd)?;
                    let here = self.path().join(&c);
                    if !self.rights.allow(&st, 1) {
                        return Err(denied(&here, &self.rights));
                    }
                    self.levels.push((c, Arc::new(fd)));
                }
                _ if pending.is_empty() => return Ok(End::Entry(c, st)),
                _ => {
                    return Err(io::Error::new(
                        io::ErrorKind::NotADirectory,
                        format!("{} is not a directory", self.path().join(&c).display()),
                    ))
                }
            }
        }
        Ok(End::Dir)
    }

    /// The directory `rel` below (or, with `..` or links, beside) this one.
    pub fn dir(&self, rel: &Path) -> io::Result<Walk> {
        let mut w = self.clone();
        match w.descend(rel)? {
            End::Dir => Ok(w),
            End::Entry(name, _) => Err(io::Error::new(
                io::ErrorKind::NotADirectory,
                format!("{} is not a directory", w.path().join(name).display()),
            )),
            End::Missing(name) => Err(not_found(&w.path().join(name))),
        }
    }

    /// What `rel` is, links followed (None: nothing there). The directories on the way
    /// must be searchable; the entry itself need not be readable.
    pub fn kind(&self, rel: &Path) -> io::Result<Option<FileType>> {
        let mut w = self.clone();
        match w.descend(rel) {
            Ok(End::Dir) => Ok(Some(FileType::Directory)),
            Ok(End::Entry(_, st)) => Ok(Some(kind_of(&st))),
            Ok(End::Missing(_)) => Ok(None),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Whether `rel` exists (links followed; a directory on the way that cannot be
    /// searched is an error, not "absent").
    pub fn exists(&self, rel: &Path) -> io::Result<bool> {
        Ok(self.kind(rel)?.is_some())
    }

    /// Opens the regular file `rel` for reading: links followed by hand, the file
    /// readable with these rights, non-blocking; anything but a regular file is refused
    /// before it is opened.
    pub fn open(&self, rel: &Path) -> io::Result<File> {
        let mut w = self.clone();
        let (name, st) = match w.descend(rel)? {
            End::Entry(name, st) => (name, st),
            End::Dir => {
                return Err(io::Error::new(
                    io::ErrorKind::IsADirectory,
                    format!("{} is a directory", w.path().display()),
                ))
            }
            End::Missing(name) => return Err(not_found(&w.path().join(name))),
        };
        let full = w.path().join(&name);
        if kind_of(&st) != FileType::RegularFile {
            return Err(not_regular(&full, kind_of(&st)));
        }
        let fd = rustix::fs::openat(
            w.fd(),
            name.as_os_str(),
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| match e {
            rustix::io::Errno::LOOP => io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} became a symbolic link", full.display()),
            ),
            e => e.into(),
        })?;
        let st = rustix::fs::fstat(&fd)?;
        if kind_of(&st) != FileType::RegularFile {
            return Err(not_regular(&full, kind_of(&st)));
        }
        if !w.rights.allow(&st, 4) {
            return Err(denied(&full, &w.rights));
        }
        Ok(File::from(fd))
    }

    /// The bytes of regular file `rel`, at most `cap` (a larger file is an error).
    pub fn read(&self, rel: &Path, cap: u64) -> io::Result<Vec<u8>> {
        let f = self.open(rel)?;
        read_capped(f, cap).map_err(|e| with_path(e, &self.path().join(rel)))
    }

    /// The target of symbolic link `name` in this directory (None: not a link).
    pub fn link_target(&self, name: &str) -> io::Result<Option<PathBuf>> {
        let st = match rustix::fs::statat(self.fd(), name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            Err(rustix::io::Errno::NOENT) => return Ok(None),
            Err(e) => return Err(e.into()),
        };
        if kind_of(&st) != FileType::Symlink {
            return Ok(None);
        }
        let t = rustix::fs::readlinkat(self.fd(), name, Vec::new())?;
        Ok(Some(PathBuf::from(OsStr::from_bytes(t.as_bytes()))))
    }

    /// The names in directory `rel` (at most `max`; ".", ".." left out). The directory
    /// must be readable with these rights.
    pub fn list(&self, rel: &Path, max: usize) -> io::Result<Vec<(OsString, FileType)>> {
        let w = self.dir(rel)?;
        let fd = rustix::fs::openat(
            w.fd(),
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NONBLOCK | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let st = rustix::fs::fstat(&fd)?;
        if !w.rights.allow(&st, 4) {
            return Err(denied(&w.path(), &w.rights));
        }
        let mut out = Vec::new();
        let mut dir = rustix::fs::Dir::read_from(&fd)?;
        while let Some(e) = dir.read() {
            let e = e?;
            let name = OsStr::from_bytes(e.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            if out.len() >= max {
                break;
            }
            out.push((name.to_os_string(), e.file_type()));
        }
        Ok(out)
    }
}

/// The components of `p` to walk: an absolute path starts again at the root (the
/// levels above it are dropped), "." is skipped.
fn components<'a>(
    p: &'a Path,
    levels: &mut Vec<(OsString, Arc<OwnedFd>)>,
) -> impl Iterator<Item = OsString> + 'a {
    if p.is_absolute() {
        levels.truncate(1);
    }
    p.components().filter_map(|c| match c {
        Component::Normal(n) => Some(n.to_os_string()),
        Component::ParentDir => Some(OsString::from("..")),
        Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
    })
}

fn not_found(p: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::NotFound,
        format!("{}: not found", p.display()),
    )
}

fn not_regular(p: &Path, kind: FileType) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{} is not a regular file ({kind:?})", p.display()),
    )
}

fn with_path(e: io::Error, p: &Path) -> io::Error {
    if e.kind() == io::ErrorKind::FileTooLarge {
        io::Error::new(e.kind(), format!("{}: {e}", p.display()))
    } else {
        e
    }
}

/// Everything `f` holds, if it is at most `cap` bytes (FileTooLarge otherwise, read no
/// further than cap + 1 bytes). A file that cannot be read now (EAGAIN) reads empty.
pub fn read_capped(f: File, cap: u64) -> io::Result<Vec<u8>> {
    let hint = f.metadata().map(|m| m.len()).unwrap_or(0).min(cap) as usize;
    let mut buf = Vec::with_capacity(hint.min(1 << 20) + 1);
    match f.take(cap.saturating_add(1)).read_to_end(&mut buf) {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => buf.clear(),
        Err(e) => return Err(e),
    }
    if buf.len() as u64 > cap {
        return Err(io::Error::new(
            io::ErrorKind::FileTooLarge,
            format!("larger than {cap} bytes"),
        ));
    }
    Ok(buf)
}

/// The bytes of the regular file at `path` (absolute), at most `cap`, read with
/// `rights`: the whole resolution, for a one-off read.
pub fn read_path(path: &Path, rights: &Rights, cap: u64) -> io::Result<Vec<u8>> {
    Walk::root(rights)?.read(path, cap)
}

/// The supplementary groups of the process at the other end of a Unix socket
/// (`SO_PEERGROUPS`, Linux 4.13): the groups it had when it connected.
pub fn peer_groups(fd: BorrowedFd<'_>) -> io::Result<Vec<u32>> {
    use std::os::fd::AsRawFd;
    const SO_PEERGROUPS: libc::c_int = 59;
    let mut groups = vec![0u32; 64];
    loop {
        let mut len = (groups.len() * 4) as libc::socklen_t;
        // SAFETY: getsockopt writes at most `len` bytes into `groups`, which has them.
        let rc = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::SOL_SOCKET,
                SO_PEERGROUPS,
                groups.as_mut_ptr().cast(),
                &mut len,
            )
        };
        if rc == 0 {
            groups.truncate(len as usize / 4);
            return Ok(groups);
        }
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ERANGE) && groups.len() < 65536 {
            let want = (len as usize / 4).max(groups.len() * 2);
            groups.resize(want, 0);
            continue;
        }
        return Err(e);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn euid() -> u32 {
        rustix::process::geteuid().as_raw()
    }

    fn other() -> Rights {
        Rights::Of(Creds {
            uid: 65534,
            gid: 65534,
            groups: vec![],
        })
    }

    fn mode(p: &Path, m: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap();
    }

    #[test]
    fn resolves_links_by_hand_to_the_real_path() {
        let t = tempfile::tempdir().unwrap();
        let real = t.path().canonicalize().unwrap();
        std::fs::create_dir_all(real.join("a/b")).unwrap();
        std::fs::write(real.join("a/b/f"), "x").unwrap();
        std::os::unix::fs::symlink("a/b", real.join("rel")).unwrap();
        std::os::unix::fs::symlink(real.join("a"), real.join("abs")).unwrap();
        std::os::unix::fs::symlink("../b/f", real.join("a/b/up")).unwrap();
        let w = Walk::to(&real.join("rel"), &Rights::Own).unwrap();
        assert_eq!(w.path(), real.join("a/b"));
        let w = Walk::to(&real.join("abs/b/.."), &Rights::Own).unwrap();
        assert_eq!(w.path(), real.join("a"), "'..' after a link is physical");
        assert_eq!(w.read(Path::new("b/up"), 10).unwrap(), b"x");
        assert_eq!(w.parent().path(), real);
        std::os::unix::fs::symlink("loop", real.join("loop")).unwrap();
        assert!(Walk::to(&real.join("loop"), &Rights::Own).is_err());
    }

    #[test]
    fn only_regular_files_within_the_cap() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path();
        std::os::unix::fs::symlink("/dev/zero", d.join("zero")).unwrap();
        let fifo = d.join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        std::fs::write(d.join("big"), vec![b'a'; 100]).unwrap();
        let w = Walk::to(d, &Rights::Own).unwrap();
        let e = w.read(Path::new("zero"), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let e = w.read(Path::new("fifo"), 1 << 20).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let e = w.read(Path::new("big"), 99).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::FileTooLarge, "{e}");
        assert_eq!(w.read(Path::new("big"), 100).unwrap().len(), 100);
        assert_eq!(w.kind(Path::new("none")).unwrap(), None);
        assert_eq!(
            w.read(Path::new("none"), 1).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
    }

    #[test]
    fn another_users_rights_are_checked_on_each_inode() {
        if euid() != 0 {
            return; // files of another owner need root to make
        }
        let t = tempfile::tempdir().unwrap();
        let d = t.path().canonicalize().unwrap();
        mode(&d, 0o755);
        std::fs::create_dir(d.join("open")).unwrap();
        std::fs::create_dir(d.join("shut")).unwrap();
        mode(&d.join("open"), 0o755);
        mode(&d.join("shut"), 0o700);
        for dir in ["open", "shut"] {
            std::fs::write(d.join(dir).join("pub"), "p").unwrap();
            mode(&d.join(dir).join("pub"), 0o644);
            std::fs::write(d.join(dir).join("priv"), "s").unwrap();
            mode(&d.join(dir).join("priv"), 0o600);
        }
        let w = Walk::root(&other()).unwrap();
        assert_eq!(w.read(&d.join("open/pub"), 10).unwrap(), b"p");
        for p in ["open/priv", "shut/pub", "shut/priv"] {
            let e = w.read(&d.join(p), 10).unwrap_err();
            assert_eq!(e.kind(), io::ErrorKind::PermissionDenied, "{p}: {e}");
        }
        // A link the user may follow to a file it may not read gains nothing.
        std::os::unix::fs::symlink(d.join("shut/pub"), d.join("open/link")).unwrap();
        assert!(w.read(&d.join("open/link"), 10).is_err());
        // A group the user is in through its supplementary groups opens a group file.
        std::fs::write(d.join("open/grp"), "g").unwrap();
        mode(&d.join("open/grp"), 0o640);
        std::os::unix::fs::chown(d.join("open/grp"), Some(0), Some(4242)).unwrap();
        assert!(w.read(&d.join("open/grp"), 10).is_err());
        let member = Rights::Of(Creds {
            uid: 65534,
            gid: 65534,
            groups: vec![4242],
        });
        assert_eq!(read_path(&d.join("open/grp"), &member, 10).unwrap(), b"g");
        // The owner's bits decide for the owner, even where others' would allow.
        std::fs::write(d.join("open/mine"), "m").unwrap();
        mode(&d.join("open/mine"), 0o044);
        std::os::unix::fs::chown(d.join("open/mine"), Some(65534), None).unwrap();
        assert!(w.read(&d.join("open/mine"), 10).is_err());
    }
}
