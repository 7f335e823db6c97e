//! Which process holds a socket, by the socket's inode: every `/proc/PID/fd/N` that
//! reads `socket:[INODE]` (what `ss -p` does). A walk over every descriptor on the
//! machine: asked only for sockets a BPF hook could not attribute, and bounded.

use std::collections::{HashMap, HashSet};

/// Descriptors looked at in one call, at most.
const MAX_FDS: usize = 200_000;

/// The first process found holding each of `inodes` (pid, command name).
pub fn socket_owners(inodes: &HashSet<u64>) -> HashMap<u64, (u32, String)> {
    let mut out = HashMap::new();
    if inodes.is_empty() {
        return out;
    }
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return out;
    };
    let mut seen = 0;
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(fds) = std::fs::read_dir(p.path().join("fd")) else {
            continue;
        };
        for fd in fds.flatten() {
            seen += 1;
            if seen > MAX_FDS {
                return out;
            }
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let Some(ino) = target
                .to_str()
                .and_then(|t| t.strip_prefix("socket:["))
                .and_then(|t| t.strip_suffix(']'))
                .and_then(|t| t.parse::<u64>().ok())
            else {
                continue;
            };
            if inodes.contains(&ino) && !out.contains_key(&ino) {
                let comm = std::fs::read_to_string(p.path().join("comm"))
                    .map(|c| kernstat_model::text::printable(c.trim_end()).into_owned())
                    .unwrap_or_default();
                out.insert(ino, (pid, comm));
                if out.len() == inodes.len() {
                    return out;
                }
            }
        }
    }
    out
}
