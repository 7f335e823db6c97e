//! Which archive a replay reads when none is named: `$KERNSTAT_ARCHIVE`, else the system
//! daemon's when this user can list it and it holds samples, else the user's own.

use std::path::{Path, PathBuf};

/// The system daemon's archive (its unit records there).
pub const SYSTEM_ARCHIVE: &str = "/var/lib/kernstat/record";
/// Where the system unit recorded before the archive moved into a directory of its own.
const OLD_SYSTEM_ARCHIVE: &str = "/var/lib/kernstat";

/// The archive to read: --archive, else $KERNSTAT_ARCHIVE, else the system daemon's if
/// this user can list it and it holds samples, else the user's own.
pub fn archive_dir(explicit: Option<&Path>) -> PathBuf {
    if let Some(p) = explicit {
        return p.to_path_buf();
    }
    if let Some(p) = std::env::var_os("KERNSTAT_ARCHIVE").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    let has_samples = |dir: &Path| {
        std::fs::read_dir(dir).is_ok_and(|mut rd| {
            rd.any(|e| {
                e.ok()
                    .and_then(|e| e.file_name().to_str().and_then(crate::file_hour))
                    .is_some()
            })
        })
    };
    for system in [SYSTEM_ARCHIVE, OLD_SYSTEM_ARCHIVE] {
        if has_samples(Path::new(system)) {
            return PathBuf::from(system);
        }
    }
    user_archive()
}

/// `$XDG_STATE_HOME/kernstat/record`, else `~/.local/state/kernstat/record`.
pub fn user_archive() -> PathBuf {
    let state = std::env::var_os("XDG_STATE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/".into()))
                .join(".local/state")
        });
    state.join("kernstat/record")
}
