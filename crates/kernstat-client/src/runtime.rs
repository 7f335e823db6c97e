//! kernstat's runtime directory, and the rule for trusting it.
//!
//! Bars keep their instance locks and published lines there, and the user daemon its
//! socket. Without `XDG_RUNTIME_DIR` (ssh without a login manager, cron, some tmux
//! setups) the directory is `/tmp/kernstat-UID`, a name any local user can take first;
//! whoever owns it can replace the files in it, so what every follower bar prints, or
//! plant a socket that feeds a user's prompt. Every command therefore goes through
//! [`prepare`] (create it 0700, or accept an existing one only when it is a real
//! directory owned by us that nobody else can write) and opens files in it with
//! [`open_private_file`] (no symlinks, regular files of ours only). Clients check who
//! serves a socket with [`check_peer`].

use std::fmt;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags, CWD};

/// Where the system daemon listens.
pub const SYSTEM_SOCKET: &str = "/run/kernstat/sock";

/// Root's own runtime directory when it has no `XDG_RUNTIME_DIR`: not the system
/// daemon's `/run/kernstat`, which that daemon gives to its unprivileged user once it
/// runs (so root's bars refused it and each sampled alone). Only root can create it.
pub const ROOT_RUNTIME_DIR: &str = "/run/kernstat-root";

/// The euid of this process.
fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// kernstat's per-user runtime directory: `$XDG_RUNTIME_DIR/kernstat`, else
/// [`ROOT_RUNTIME_DIR`] for root and `/tmp/kernstat-UID` for others. Only a name: use
/// [`prepare`] before trusting what is there.
pub fn runtime_dir() -> PathBuf {
    if let Some(x) = std::env::var_os("XDG_RUNTIME_DIR") {
        let p = PathBuf::from(x);
        if p.is_dir() {
            return p.join("kernstat");
        }
    }
    match euid() {
        0 => PathBuf::from(ROOT_RUNTIME_DIR),
        uid => PathBuf::from(format!("/tmp/kernstat-{uid}")),
    }
}

/// A directory kernstat refuses to keep its state in, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsafeDir {
    /// The directory.
    pub path: PathBuf,
    /// What is wrong with it ("belongs to uid 0 and is writable by others").
    pub why: String,
}

impl fmt::Display for UnsafeDir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}; refusing to use it",
            self.path.display(),
            self.why
        )
    }
}

impl std::error::Error for UnsafeDir {}

impl From<UnsafeDir> for io::Error {
    fn from(e: UnsafeDir) -> io::Error {
        io::Error::new(io::ErrorKind::PermissionDenied, e.to_string())
    }
}

/// Why an existing `meta` (from lstat) may not hold our state, or None when it may: a
/// link, not a directory, another owner, or writable by group or others. (Reading by
/// others is narrowed by [`prepare`] instead, on a private directory of ours.)
fn distrust(meta: &std::fs::Metadata) -> Option<String> {
    let ft = meta.file_type();
    if ft.is_symlink() {
        return Some("is a symbolic link".into());
    }
    if !ft.is_dir() {
        return Some("is not a directory".into());
    }
    let mut why = Vec::new();
    let me = euid();
    if meta.uid() != me {
        why.push(format!("belongs to uid {}", meta.uid()));
    }
    let mode = meta.mode() & 0o777;
    if mode & 0o022 != 0 {
        why.push("is writable by others".to_string());
    }
    (!why.is_empty()).then(|| why.join(" and "))
}

/// Makes `dir` ready to hold kernstat's state: creates it (mode 0700, or 0755 when
/// `shared`, whatever the umask) if missing; if it exists, accepts it only when it is a
/// real directory owned by this user that others cannot write, and changes nothing
/// about it (it may be a directory the user named with `--socket`, such as /etc or
/// /run: shared/security M1). Never follows a symbolic link in the last component.
pub fn prepare(dir: &Path, shared: bool) -> Result<(), UnsafeDir> {
    let unsafe_dir = |why: String| UnsafeDir {
        path: dir.to_path_buf(),
        why,
    };
    let mode = if shared { 0o755 } else { 0o700 };
    let mut created = false;
    match std::fs::DirBuilder::new().mode(mode).create(dir) {
        Ok(()) => created = true,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            // A missing parent ($XDG_RUNTIME_DIR/kernstat's parent always exists; a
            // --socket path's may not): create the parents, then this one.
            if let Some(parent) = dir.parent() {
                std::fs::create_dir_all(parent)
                    .map_err(|e| unsafe_dir(format!("cannot be created ({e})")))?;
            }
            match std::fs::DirBuilder::new().mode(mode).create(dir) {
                Ok(()) => created = true,
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(unsafe_dir(format!("cannot be created ({e})"))),
            }
        }
        Err(e) => return Err(unsafe_dir(format!("cannot be created ({e})"))),
    }
    let meta =
        std::fs::symlink_metadata(dir).map_err(|e| unsafe_dir(format!("cannot be read ({e})")))?;
    if let Some(why) = distrust(&meta) {
        return Err(unsafe_dir(why));
    }
    // One we made gets exactly its mode (the umask may have narrowed it: a system
    // daemon's users must reach its socket). Every file kernstat keeps in a directory is
    // private by its own mode, so one of ours that others can read is used as it is.
    if created && meta.mode() & 0o777 != mode {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode))
            .map_err(|e| unsafe_dir(format!("cannot be given mode {mode:o} ({e})")))?;
    }
    Ok(())
}

/// Checks an existing directory without creating or changing anything (for clients
/// that only read from it). Ok(false) when it does not exist.
pub fn check_existing(dir: &Path) -> Result<bool, UnsafeDir> {
    match std::fs::symlink_metadata(dir) {
        Ok(meta) => match distrust(&meta) {
            None => Ok(true),
            Some(why) => Err(UnsafeDir {
                path: dir.to_path_buf(),
                why,
            }),
        },
        Err(_) => Ok(false),
    }
}

/// "PATH WHY; refusing to use it", as PermissionDenied (the one wording for a place
/// kernstat does not trust, directory or file).
fn refusal(path: &Path, why: String) -> io::Error {
    UnsafeDir {
        path: path.to_path_buf(),
        why,
    }
    .into()
}

/// Opens a file in a prepared runtime directory without following a symbolic link, and
/// refuses anything that is not a regular file owned by this user (a FIFO would block
/// a reader; a device or a link to one would feed it anything). `flags` add to
/// `O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK` (non-blocking so that opening a FIFO cannot
/// hang; on a regular file it changes nothing).
pub fn open_private_file(path: &Path, flags: OFlags, mode: u32) -> io::Result<OwnedFd> {
    let fd = rustix::fs::openat(
        CWD,
        path,
        flags | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK,
        Mode::from_raw_mode(mode),
    )
    .map_err(|e| {
        let e = io::Error::from(e);
        if e.raw_os_error() == Some(libc::ELOOP) {
            refusal(path, "is a symbolic link".into())
        } else {
            e
        }
    })?;
    let st = rustix::fs::fstat(fd.as_fd())?;
    let kind = rustix::fs::FileType::from_raw_mode(st.st_mode);
    if kind != rustix::fs::FileType::RegularFile {
        return Err(refusal(path, format!("is not a regular file ({kind:?})")));
    }
    if st.st_uid != euid() {
        return Err(refusal(path, format!("belongs to uid {}", st.st_uid)));
    }
    Ok(fd)
}

/// The uid of the process that listens on the other end of `stream` (SO_PEERCRED: the
/// listener's credentials when it called listen(2)).
pub fn peer_uid(stream: &UnixStream) -> io::Result<u32> {
    let cred = rustix::net::sockopt::socket_peercred(stream.as_fd())?;
    Ok(cred.uid.as_raw())
}

/// Refuses a daemon served by anyone but this user or root: a socket planted in a
/// directory another user controls must not feed a prompt or a bar.
pub fn check_peer(stream: &UnixStream, path: &Path) -> io::Result<()> {
    let uid = peer_uid(stream)?;
    if uid == euid() || uid == 0 {
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!(
            "{} is served by uid {uid}, neither you (uid {}) nor root; refusing to talk to it",
            path.display(),
            euid()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_a_private_directory() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("kernstat");
        prepare(&d, false).unwrap();
        let m = std::fs::symlink_metadata(&d).unwrap();
        assert!(m.is_dir());
        assert_eq!(m.mode() & 0o777, 0o700);
        // Again: it exists and is ours.
        prepare(&d, false).unwrap();
    }

    #[test]
    fn refuses_a_world_writable_directory() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("kernstat");
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = prepare(&d, false).unwrap_err();
        assert_eq!(e.why, "is writable by others", "{e}");
        assert!(e.to_string().ends_with("; refusing to use it"));
    }

    #[test]
    fn refuses_a_symlink_in_place_of_the_directory() {
        let t = tempfile::tempdir().unwrap();
        let real = t.path().join("real");
        std::fs::create_dir(&real).unwrap();
        std::fs::set_permissions(&real, std::fs::Permissions::from_mode(0o700)).unwrap();
        let d = t.path().join("kernstat");
        std::os::unix::fs::symlink(&real, &d).unwrap();
        assert_eq!(prepare(&d, false).unwrap_err().why, "is a symbolic link");
        assert_eq!(check_existing(&d).unwrap_err().why, "is a symbolic link");
    }

    /// An existing directory is never changed (it may be /etc, named with --socket);
    /// one made here gets its mode whatever the umask.
    #[test]
    fn changes_no_existing_directory() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("kernstat");
        std::fs::create_dir(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        prepare(&d, false).unwrap();
        assert_eq!(std::fs::symlink_metadata(&d).unwrap().mode() & 0o777, 0o755);
        // SAFETY: umask only changes this process's mask; restored below.
        let old = unsafe { libc::umask(0o077) };
        let shared = t.path().join("shared");
        prepare(&shared, true).unwrap();
        // SAFETY: as above.
        unsafe { libc::umask(old) };
        assert_eq!(
            std::fs::symlink_metadata(&shared).unwrap().mode() & 0o777,
            0o755
        );
    }

    #[test]
    fn private_files_must_be_regular_and_not_links() {
        let t = tempfile::tempdir().unwrap();
        let f = t.path().join("f");
        std::fs::write(&f, b"x").unwrap();
        open_private_file(&f, OFlags::RDONLY, 0).unwrap();
        let link = t.path().join("link");
        std::os::unix::fs::symlink("/dev/zero", &link).unwrap();
        let e = open_private_file(&link, OFlags::RDONLY, 0).unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        let fifo = t.path().join("fifo");
        rustix::fs::mknodat(
            CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        let e = open_private_file(&fifo, OFlags::RDONLY, 0).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }

    #[test]
    fn our_own_listener_passes_the_peer_check() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("sock");
        let _l = std::os::unix::net::UnixListener::bind(&p).unwrap();
        let s = UnixStream::connect(&p).unwrap();
        assert_eq!(peer_uid(&s).unwrap(), euid());
        check_peer(&s, &p).unwrap();
    }
}
