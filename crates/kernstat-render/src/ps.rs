//! `ps`'s order and clock, shared by every front end that shows the process table (`ps`
//! live and replayed): rows sorted by a column with one rule for the sign (`-KEY`,
//! largest first, as kernstat-render's `sort` says), and start times as procps shows
//! them (HH:MM today, "Mon DD" before) from a boot clock, live or recorded.

use kernstat_model::ps::PsRow;

use crate::table::{Column, StartFormat};

/// Sorts rows by `col`, largest first when `descending` (`--sort -KEY`); ties by pid.
pub fn sort_rows(rows: &mut [PsRow], col: Column, desc: bool) {
    use std::cmp::Ordering;
    if col == Column::Pid && !desc && rows.is_sorted_by_key(|r| r.pid) {
        // The usual case: sources already return pid order.
        return;
    }
    let key = |a: &PsRow, b: &PsRow| -> Ordering {
        match col {
            Column::Pid => a.pid.cmp(&b.pid),
            Column::Ppid => a.ppid.cmp(&b.ppid),
            Column::User => a.user.cmp(&b.user),
            Column::Uid => a.uid.cmp(&b.uid),
            Column::Gid => a.gid.cmp(&b.gid),
            Column::State => a.state.cmp(&b.state),
            Column::Threads => a.threads.cmp(&b.threads),
            Column::Nice => a.nice.cmp(&b.nice),
            Column::Pri => a.priority.cmp(&b.priority),
            Column::Cpu => a.cpu_percent.total_cmp(&b.cpu_percent),
            Column::Time => a.cpu_ns.cmp(&b.cpu_ns),
            Column::Rss => a.rss_bytes.cmp(&b.rss_bytes),
            Column::Vsz => a.vsz_bytes.cmp(&b.vsz_bytes),
            Column::Start => a.start_ns.cmp(&b.start_ns),
            Column::Read => a.read_bytes.cmp(&b.read_bytes),
            Column::Write => a.write_bytes.cmp(&b.write_bytes),
            Column::Comm => a.comm.as_str().cmp(b.comm.as_str()),
            Column::Cmd => a.cmd.cmp(&b.cmd),
            Column::Cgroup => a.cgroup.cmp(&b.cgroup),
            Column::NetRx => cmp_opt(a.net_rx_bps, b.net_rx_bps),
            Column::NetTx => cmp_opt(a.net_tx_bps, b.net_tx_bps),
            Column::Retrans => cmp_opt(a.tcp_retrans_per_s, b.tcp_retrans_per_s),
        }
        .then(a.pid.cmp(&b.pid))
    };
    rows.sort_by(|a, b| if desc { key(b, a) } else { key(a, b) });
}

/// Unmeasured (None) sorts below every measured value.
fn cmp_opt(a: Option<f64>, b: Option<f64>) -> std::cmp::Ordering {
    match (a, b) {
        (Some(a), Some(b)) => a.total_cmp(&b),
        (a, b) => a.is_some().cmp(&b.is_some()),
    }
}

/// Start times as ps shows them: HH:MM today, "Mon DD" before.
pub struct BootClock {
    boot_epoch_s: i64,
    today: (i32, i32),
}

/// The local calendar time of a Unix second.
fn local(epoch_s: i64) -> libc::tm {
    // SAFETY: localtime_r writes into the tm we pass.
    unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        let t: libc::time_t = epoch_s as libc::time_t;
        libc::localtime_r(&t, &mut tm);
        tm
    }
}

impl BootClock {
    /// The clock of a recorded sample: taken at `unix_ns`, `boot_ns` after boot.
    pub fn at(unix_ns: u64, boot_ns: u64) -> Self {
        let wall = (unix_ns / 1_000_000_000) as i64;
        let tm = local(wall);
        BootClock {
            boot_epoch_s: wall - (boot_ns / 1_000_000_000) as i64,
            today: (tm.tm_year, tm.tm_yday),
        }
    }

    /// The clock now, `now_boot_ns` after boot.
    pub fn now(now_boot_ns: u64) -> Self {
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        let boot_epoch_s = wall - (now_boot_ns / 1_000_000_000) as i64;
        let tm = local(wall);
        BootClock {
            boot_epoch_s,
            today: (tm.tm_year, tm.tm_yday),
        }
    }
}

impl StartFormat for BootClock {
    fn format(&self, start_ns: u64) -> String {
        const MONTHS: [&str; 12] = [
            "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
        ];
        let tm = local(self.boot_epoch_s + (start_ns / 1_000_000_000) as i64);
        if (tm.tm_year, tm.tm_yday) == self.today {
            format!("{:02}:{:02}", tm.tm_hour, tm.tm_min)
        } else {
            format!(
                "{}{:02}",
                MONTHS[tm.tm_mon.clamp(0, 11) as usize],
                tm.tm_mday
            )
        }
    }
}

/// Which rows `ps` shows (`--user`, `--pid`, `--comm`, `--cgroup`), the same for a live
/// read and a recorded sample. A row passes every filter given; none given, every row.
#[derive(Default)]
pub struct RowFilter<'a> {
    /// Only this user's processes.
    pub uid: Option<u32>,
    /// Only these processes (a pid or a thread's process id).
    pub pids: &'a [u32],
    /// Only names this accepts (the command's `--comm` regular expression).
    pub comm: Option<&'a dyn Fn(&str) -> bool>,
    /// Only groups whose path contains this.
    pub cgroup: Option<&'a str>,
}

impl RowFilter<'_> {
    /// Whether `r` is shown.
    pub fn keeps(&self, r: &PsRow) -> bool {
        self.uid.is_none_or(|u| r.uid == u)
            && (self.pids.is_empty() || self.pids.contains(&r.tgid) || self.pids.contains(&r.pid))
            && self.comm.is_none_or(|accept| accept(r.comm.as_str()))
            && self.cgroup.is_none_or(|c| r.cgroup.contains(c))
    }

    /// Keeps the rows shown; returns the pids asked for that no row kept has, in the
    /// order asked (the question's mistake, which `ps` says in one line).
    pub fn apply(&self, rows: &mut Vec<PsRow>) -> Vec<u32> {
        rows.retain(|r| self.keeps(r));
        self.pids
            .iter()
            .copied()
            .filter(|p| !rows.iter().any(|r| r.pid == *p || r.tgid == *p))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pid: u32, tgid: u32, uid: u32, comm: &str, cgroup: &str) -> PsRow {
        PsRow {
            pid,
            tgid,
            uid,
            comm: kernstat_model::text::ShortStr::from_str_lossy(comm),
            cgroup: cgroup.into(),
            ..PsRow::default()
        }
    }

    #[test]
    fn a_row_passes_every_filter_given_and_missing_pids_are_named() {
        let rows = vec![
            row(1, 1, 0, "init", "/"),
            row(200, 200, 1000, "bash", "/user.slice"),
            row(201, 200, 1000, "bash-worker", "/user.slice"),
            row(300, 300, 1000, "vim", "/user.slice/app"),
        ];
        let mut all = rows.clone();
        assert!(RowFilter::default().apply(&mut all).is_empty());
        assert_eq!(all.len(), 4, "no filter keeps every row");

        let bash = |name: &str| name.starts_with("bash");
        let pids = [200, 999, 7];
        let filter = RowFilter {
            uid: Some(1000),
            pids: &pids,
            comm: Some(&bash),
            cgroup: Some("user"),
        };
        let mut kept = rows.clone();
        let missing = filter.apply(&mut kept);
        let kept_pids: Vec<u32> = kept.iter().map(|r| r.pid).collect();
        assert_eq!(
            kept_pids,
            [200, 201],
            "a thread of an asked-for process is kept"
        );
        assert_eq!(missing, [999, 7]);

        let mut by_cgroup = rows.clone();
        RowFilter {
            cgroup: Some("/app"),
            ..RowFilter::default()
        }
        .apply(&mut by_cgroup);
        assert_eq!(by_cgroup.len(), 1);
        assert_eq!(by_cgroup[0].pid, 300);
    }
}
