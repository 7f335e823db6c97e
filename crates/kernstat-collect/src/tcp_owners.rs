//! Owners and group paths for the sockets a TCP hook could not name: an accepted
//! socket's owner is found by its inode in /proc (only for sockets that retransmitted);
//! a group id becomes its path.

use std::collections::HashSet;

use kernstat_model::tcp::SocketRetrans;
use kernstat_sources::cgroup::CgroupPaths;
use kernstat_sources::Roots;

/// Fills in the owners and group paths of `sockets` (the paths' table is made on first
/// need and kept).
pub fn attribute(sockets: &mut [SocketRetrans], groups: &mut Option<CgroupPaths>) {
    if sockets.is_empty() {
        return;
    }
    let unknown: HashSet<u64> = sockets
        .iter()
        .filter(|s| s.pid == 0 && s.ino != 0)
        .map(|s| s.ino)
        .collect();
    let owners = kernstat_sources::sockets::socket_owners(&unknown);
    for s in sockets.iter_mut() {
        if s.pid == 0 {
            if let Some((pid, comm)) = owners.get(&s.ino) {
                s.pid = *pid;
                s.comm = comm.clone();
            }
        }
        if s.cgroup_id != 0 {
            let paths = groups.get_or_insert_with(|| CgroupPaths::scan(&Roots::default()));
            s.cgroup = paths.path(s.cgroup_id);
        }
    }
}
