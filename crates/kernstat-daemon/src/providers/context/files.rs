//! How the context providers read the files other tools leave behind: bounded in size
//! (a provider never reads more than `MAX_FILE` of anything a client may name), searched
//! upward from a directory the way each tool searches, and small INI files parsed the
//! way aws, gcloud and git write them.

use std::fs;
use std::io::{self, Read};
use std::path::Path;

/// Largest file a provider reads (kubeconfigs with many clusters are a few hundred KiB).
pub const MAX_FILE: u64 = 1 << 20;

/// Opens `path` for reading without blocking: a FIFO or device someone put where a
/// config file belongs must not hang the reading thread.
fn open(path: &Path) -> io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(path)
}

/// The file's text, or None when it does not exist, is not a regular file, or is not
/// readable; longer files are cut at `MAX_FILE` and invalid UTF-8 replaced.
pub fn read_text(path: &Path) -> Option<String> {
    try_read(path).ok().map(text)
}

/// The file's bytes (at most `MAX_FILE`) or why not. No stat first: a directory fails
/// the read (EISDIR), a FIFO opened non-blocking reads nothing, a device at most
/// `MAX_FILE` — one open and one or two reads for the common case, the cost that
/// matters when a prompt asks.
pub fn try_read(path: &Path) -> io::Result<Vec<u8>> {
    let f = open(path)?;
    let mut buf = Vec::with_capacity(4096);
    match f.take(MAX_FILE).read_to_end(&mut buf) {
        Ok(_) => Ok(buf),
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(Vec::new()),
        Err(e) => Err(e),
    }
}

/// Bytes as text, invalid UTF-8 replaced.
pub fn text(buf: Vec<u8>) -> String {
    match String::from_utf8(buf) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// Whether user `uid` could read `path`: every directory on the way searchable by it,
/// the file readable (owner, primary group or other bits; root always). For a system
/// daemon reading files a client names on the client's behalf.
pub fn readable_by(path: &Path, uid: u32) -> bool {
    use std::os::unix::fs::MetadataExt;
    if uid == 0 {
        return true;
    }
    let gid = kernstat_sources::users::by_uid(uid).map(|u| u.gid);
    let allows = |m: &fs::Metadata, bits: u32| {
        let mode = m.mode();
        if m.uid() == uid {
            mode & (bits << 6) != 0
        } else if Some(m.gid()) == gid {
            mode & (bits << 3) != 0
        } else {
            mode & bits != 0
        }
    };
    let Ok(meta) = fs::metadata(path) else {
        return false;
    };
    if !allows(&meta, 4) {
        return false;
    }
    path.ancestors()
        .skip(1)
        .all(|dir| fs::metadata(dir).is_ok_and(|m| allows(&m, 1)))
}

/// One INI section's `key = value` pairs, for the section whose header (inside the
/// brackets, trimmed) equals `section`. Comments start with `#` or `;`.
pub fn ini_section<'a>(text: &'a str, section: &str) -> Vec<(&'a str, &'a str)> {
    let mut inside = false;
    let mut out = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with(';') {
            continue;
        }
        if let Some(rest) = l.strip_prefix('[') {
            inside = rest
                .strip_suffix(']')
                .is_some_and(|name| name.trim() == section);
            continue;
        }
        if inside {
            if let Some((k, v)) = l.split_once('=') {
                out.push((k.trim(), v.trim()));
            }
        }
    }
    out
}

/// The value of `key` in `section`, the last one when repeated (as aws and gcloud read).
pub fn ini_value<'a>(text: &'a str, section: &str, key: &str) -> Option<&'a str> {
    ini_section(text, section)
        .into_iter()
        .rev()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ini() {
        let t = "# c\n[default]\nregion = eu-west-1\n[profile dev]\n region=us-east-1 \n; x\nregion = us-east-2\n[ profile empty ]\nregion =\n";
        assert_eq!(ini_value(t, "default", "region"), Some("eu-west-1"));
        assert_eq!(ini_value(t, "profile dev", "region"), Some("us-east-2"));
        assert_eq!(ini_value(t, "profile empty", "region"), None);
        assert_eq!(ini_value(t, "profile none", "region"), None);
    }

    #[test]
    fn rights_of_another_user() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        std::fs::set_permissions(d.path(), fs::Permissions::from_mode(0o755)).unwrap();
        let f = d.path().join("f");
        fs::write(&f, "x").unwrap();
        fs::set_permissions(&f, fs::Permissions::from_mode(0o644)).unwrap();
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        assert!(readable_by(&f, me));
        assert!(readable_by(&f, 65534), "world-readable");
        fs::set_permissions(&f, fs::Permissions::from_mode(0o600)).unwrap();
        assert!(!readable_by(&f, 65534), "owner only");
        fs::set_permissions(&f, fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::set_permissions(d.path(), fs::Permissions::from_mode(0o700)).unwrap();
        assert!(
            !readable_by(&f, 65534),
            "a directory on the way it cannot search"
        );
        assert!(!readable_by(&d.path().join("none"), 65534));
    }

    #[test]
    fn upward() {
        let d = tempfile::tempdir().unwrap();
        let deep = d.path().join("a/b/c");
        fs::create_dir_all(&deep).unwrap();
        fs::write(d.path().join("a/.tool-versions"), "nodejs 20\n").unwrap();
        // The upward search providers use: nearest first, every candidate watched.
        let mut r = super::super::Reading::default();
        let (found, text) = r.read_upward(&deep, &[".tool-versions"]).unwrap();
        assert_eq!(found, d.path().join("a/.tool-versions"));
        assert_eq!(text, "nodejs 20\n");
        let looked = r.watched;
        assert_eq!(looked.len(), 3);
        assert!(
            read_text(&d.path().join("a")).is_none(),
            "a directory is not a file"
        );
        // A FIFO where a file belongs: no value, and no hang.
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: c is a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(read_text(&fifo).as_deref(), Some(""));
    }
}
