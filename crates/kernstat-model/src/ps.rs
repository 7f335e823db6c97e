//! The process table's data: one row per task as a source read it, and processes made
//! from them (a leader plus its threads, added up as /proc does), plus the derived
//! columns (CPU %, user names are the renderer's business).
//!
//! `ps` runs once and exits, so these types own their strings; the zero-allocation rule
//! is for sampling loops.

use serde::{Deserialize, Serialize};

use crate::rates::Rates;
use crate::raw::TaskName;

/// One task (thread) as a source saw it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TaskRow {
    /// Thread id.
    pub tid: u32,
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// Real uid.
    pub uid: u32,
    /// Effective uid.
    pub euid: u32,
    /// Real gid.
    pub gid: u32,
    /// /proc state letter.
    pub state: u8,
    /// Kernel thread.
    pub kthread: bool,
    /// The thread-group leader (tid == pid).
    pub leader: bool,
    /// Scheduling policy (SCHED_*).
    pub policy: u8,
    /// Nice value.
    pub nice: i32,
    /// Priority as /proc/PID/stat field 18.
    pub prio: i32,
    /// Threads in the process.
    pub threads: u32,
    /// Start time, ns after boot.
    pub start_ns: u64,
    /// This thread's CPU time, ns.
    pub cpu_ns: u64,
    /// This thread's storage reads, bytes.
    pub read_bytes: u64,
    /// This thread's storage writes, bytes.
    pub write_bytes: u64,
    /// Leader only: CPU time of released threads, ns.
    pub dead_cpu_ns: u64,
    /// Leader only: CPU time of the children it reaped (and of what they had reaped), ns
    /// (the kernel's cutime + cstime). Not part of `cpu_ns`, as in procps.
    pub reaped_children_cpu_ns: u64,
    /// Leader only: reads of released threads and reaped children.
    pub dead_read_bytes: u64,
    /// Time this task (a process: its live threads) waited runnable for a CPU, ns.
    pub run_delay_ns: u64,
    /// Leader only: writes of released threads and reaped children.
    pub dead_write_bytes: u64,
    /// Resident set, bytes.
    pub rss_bytes: u64,
    /// Virtual size, bytes.
    pub vsz_bytes: u64,
    /// cgroup v2 id (0 when unknown).
    pub cgroup_id: u64,
    /// cgroup v2 path, when the source knows it directly (procfs).
    pub cgroup_path: Option<String>,
    /// Command name.
    pub comm: TaskName,
    /// Command line, arguments separated by NUL (leaders only; empty for kernel threads).
    pub cmdline: Vec<u8>,
    /// The command line was cut.
    pub cmdline_cut: bool,
}

/// One row of the table: a process, or a thread with `--threads`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PsRow {
    /// Process id (thread id with --threads).
    pub pid: u32,
    /// Process id the thread belongs to.
    pub tgid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// Real uid.
    pub uid: u32,
    /// User name of `uid` (the number when unknown).
    pub user: String,
    /// Real gid.
    pub gid: u32,
    /// State letter.
    #[serde(serialize_with = "ser_char", deserialize_with = "de_char")]
    pub state: char,
    /// Threads.
    pub threads: u32,
    /// Nice value.
    pub nice: i32,
    /// Priority.
    pub priority: i32,
    /// CPU percent: over the process's life, or over --interval.
    pub cpu_percent: f64,
    /// CPU time of all threads, live and exited, ns.
    pub cpu_ns: u64,
    /// Resident set, bytes.
    pub rss_bytes: u64,
    /// Virtual size, bytes.
    pub vsz_bytes: u64,
    /// Start time, ns after boot.
    pub start_ns: u64,
    /// Storage reads, bytes.
    pub read_bytes: u64,
    /// Storage writes, bytes.
    pub write_bytes: u64,
    /// Command name.
    pub comm: TaskName,
    /// Command line, arguments joined by spaces (`[comm]` for kernel threads).
    pub cmd: String,
    /// cgroup v2 path (or id when the path is unknown).
    pub cgroup: String,
    /// Kernel thread.
    pub kthread: bool,
    /// Socket payload bytes received per second over --interval (None: not counted).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub net_rx_bps: Option<f64>,
    /// Socket payload bytes sent per second over --interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub net_tx_bps: Option<f64>,
    /// TCP segments its sockets retransmitted per second over --interval (None: not
    /// counted).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub tcp_retrans_per_s: Option<f64>,
    /// A process that ended (a recorded sample's): its exit status as wait(2) encodes it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// When it ended, ns after boot (as `start_ns`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_ns: Option<u64>,
}

fn de_char<'de, D: serde::Deserializer<'de>>(d: D) -> Result<char, D::Error> {
    let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
    Ok(s.chars().next().unwrap_or('?'))
}

fn ser_char<S: serde::Serializer>(c: &char, s: S) -> Result<S::Ok, S::Error> {
    let mut buf = [0u8; 4];
    s.serialize_str(c.encode_utf8(&mut buf))
}

/// Joins NUL-separated arguments with spaces; kernel threads (no command line) show as
/// `[comm]`, as ps does.
pub fn command_line(t: &TaskRow) -> String {
    if t.cmdline.iter().all(|&b| b == 0) {
        return format!("[{}]", t.comm);
    }
    let trimmed = match t.cmdline.iter().rposition(|&b| b != 0) {
        Some(end) => &t.cmdline[..=end],
        None => &t.cmdline[..],
    };
    let mut s: String = String::from_utf8_lossy(trimmed)
        .chars()
        .map(|c| if c == '\0' || c.is_control() { ' ' } else { c })
        .collect();
    if t.cmdline_cut {
        s.push('…');
    }
    s
}

/// Adds up tasks into processes: a leader's dead_* counters plus every thread's own.
/// The state is the leader's, as in /proc/PID/stat. Threads whose leader is missing
/// (it exited during the walk) are dropped. Returns processes sorted by pid.
pub fn processes(mut tasks: Vec<TaskRow>) -> Vec<TaskRow> {
    // Group by pid, leader first; then fold each group into its leader (no hashing, no
    // copies: measured at 10,000 processes, the HashMap version was a third of ps's
    // user time).
    tasks.sort_unstable_by_key(|t| (t.pid, !t.leader, t.tid));
    let mut out: Vec<TaskRow> = Vec::with_capacity(tasks.len());
    for t in tasks {
        if t.leader {
            let mut p = t;
            p.cpu_ns += p.dead_cpu_ns;
            p.read_bytes += p.dead_read_bytes;
            p.write_bytes += p.dead_write_bytes;
            out.push(p);
        } else if let Some(p) = out.last_mut().filter(|p| p.pid == t.pid) {
            p.cpu_ns += t.cpu_ns;
            p.run_delay_ns += t.run_delay_ns;
            p.read_bytes += t.read_bytes;
            p.write_bytes += t.write_bytes;
        }
    }
    out
}

/// What a row shows beyond the task's own figures: looked up or computed by the caller.
#[derive(Clone, Debug, Default)]
pub struct RowExtras {
    /// CPU % (over an interval or the task's life).
    pub cpu_percent: f64,
    /// User name.
    pub user: String,
    /// Command line.
    pub cmd: String,
    /// cgroup path.
    pub cgroup: String,
}

impl PsRow {
    /// The row of task `t`: its thread id as the pid when rows are threads.
    pub fn from_task(t: &TaskRow, per_thread: bool, x: RowExtras) -> Self {
        PsRow {
            pid: if per_thread { t.tid } else { t.pid },
            tgid: t.pid,
            ppid: t.ppid,
            uid: t.uid,
            user: x.user,
            gid: t.gid,
            state: t.state as char,
            threads: t.threads,
            nice: t.nice,
            priority: t.prio,
            cpu_percent: x.cpu_percent,
            cpu_ns: t.cpu_ns,
            rss_bytes: t.rss_bytes,
            vsz_bytes: t.vsz_bytes,
            start_ns: t.start_ns,
            read_bytes: t.read_bytes,
            write_bytes: t.write_bytes,
            comm: t.comm,
            cmd: x.cmd,
            cgroup: x.cgroup,
            kthread: t.kthread,
            net_rx_bps: None,
            net_tx_bps: None,
            tcp_retrans_per_s: None,
            exit_code: None,
            end_ns: None,
        }
    }
}

/// A process row of the task iterator (threads folded in: [`processes`]) as the rate
/// engine reads it.
impl crate::rates::ProcessCounters for TaskRow {
    fn pid(&self) -> u32 {
        self.pid
    }
    fn start_ns(&self) -> u64 {
        self.start_ns
    }
    fn ppid(&self) -> u32 {
        self.ppid
    }
    fn cpu_ns(&self) -> u64 {
        self.cpu_ns
    }
    fn children_cpu_ns(&self) -> u64 {
        self.reaped_children_cpu_ns
    }
    fn read_bytes(&self) -> u64 {
        self.read_bytes
    }
    fn write_bytes(&self) -> u64 {
        self.write_bytes
    }
}

/// A thread (a row of `--threads`) as the rate engine reads it: identified by its tid.
pub struct ThreadCounters<'a>(pub &'a TaskRow);

impl crate::rates::ProcessCounters for ThreadCounters<'_> {
    // The engine's identity of a row is its pid; a thread's is its tid.
    #[allow(clippy::misnamed_getters)]
    fn pid(&self) -> u32 {
        self.0.tid
    }
    fn start_ns(&self) -> u64 {
        self.0.start_ns
    }
    fn cpu_ns(&self) -> u64 {
        self.0.cpu_ns
    }
    fn read_bytes(&self) -> u64 {
        self.0.read_bytes
    }
    fn write_bytes(&self) -> u64 {
        self.0.write_bytes
    }
}

/// The rates of threads over an interval, in `cur`'s order: each thread against its
/// reading in `prev` (same tid and start), by the rate engine's rules.
pub fn thread_rates(prev: &[TaskRow], cur: &[TaskRow], dt_s: f64, out: &mut Vec<Rates>) {
    let mut by_tid: Vec<ThreadCounters<'_>> = prev.iter().map(ThreadCounters).collect();
    by_tid.sort_unstable_by_key(|t| (t.0.tid, t.0.start_ns));
    out.clear();
    for t in cur {
        let before = crate::rates::find(&by_tid, t.tid, t.start_ns);
        out.push(crate::rates::rates_of(&ThreadCounters(t), before, dt_s));
    }
}

/// The rates of the rows of one read against the read before (processes, or threads
/// with `threads`), by the rate engine's rules; processes must be sorted by pid (as
/// [`processes`] returns them).
pub fn row_rates(
    prev: &[TaskRow],
    cur: &[TaskRow],
    threads: bool,
    dt_s: f64,
    children: crate::rates::Children,
    out: &mut Vec<Rates>,
) {
    if threads {
        thread_rates(prev, cur, dt_s, out);
    } else {
        crate::rates::process_rates(prev, cur, dt_s, children, out);
    }
}

/// Percent of one CPU `t` used over its whole life (what ps shows): CPU time over the
/// time since it started. `now_boot_ns` is CLOCK_BOOTTIME now.
pub fn lifetime_percent(t: &TaskRow, now_boot_ns: u64) -> f64 {
    let life = now_boot_ns.saturating_sub(t.start_ns);
    if life == 0 {
        0.0
    } else {
        t.cpu_ns as f64 / life as f64 * 100.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rates::Children;

    fn task(tid: u32, pid: u32, cpu: u64) -> TaskRow {
        TaskRow {
            tid,
            pid,
            leader: tid == pid,
            state: b'S',
            cpu_ns: cpu,
            read_bytes: cpu / 10,
            comm: TaskName::from_str_lossy("x"),
            ..Default::default()
        }
    }

    #[test]
    fn threads_add_up_with_the_dead() {
        let mut leader = task(10, 10, 100);
        leader.dead_cpu_ns = 1000;
        leader.dead_read_bytes = 7;
        let t = vec![
            task(12, 10, 25),
            leader,
            task(11, 10, 50),
            task(20, 20, 5),
            task(31, 30, 9),
        ];
        let p = processes(t);
        assert_eq!(p.len(), 2, "thread 31's leader is gone: dropped");
        assert_eq!(p[0].cpu_ns, 1175);
        assert_eq!(p[0].read_bytes, 7 + 10 + 5 + 2);
        assert_eq!(p[1].pid, 20);
    }

    #[test]
    fn command_lines() {
        let mut t = task(1, 1, 0);
        t.comm = TaskName::from_str_lossy("kworker/0:1");
        assert_eq!(command_line(&t), "[kworker/0:1]");
        t.cmdline = b"/bin/sleep\x001000\x00".to_vec();
        assert_eq!(command_line(&t), "/bin/sleep 1000");
        t.cmdline_cut = true;
        assert_eq!(command_line(&t), "/bin/sleep 1000…");
    }

    #[test]
    fn cpu_over_an_interval_and_over_a_life() {
        let task = |pid, start_ns, cpu_ns| TaskRow {
            pid,
            tid: pid,
            start_ns,
            cpu_ns,
            ..Default::default()
        };
        let mut r = Vec::new();
        let before = [task(1, 100, 1_000), task(2, 100, 0)];
        let after = [task(1, 100, 501_000), task(2, 999, 250_000)];
        row_rates(&before, &after, true, 0.001, Children::OwnRows, &mut r);
        assert_eq!(r[0].cpu_percent, 50.0);
        // Same pid, another start time: a new task, counted from zero.
        assert_eq!(r[1].cpu_percent, 25.0);
        row_rates(&before, &after, false, 0.001, Children::OwnRows, &mut r);
        assert_eq!((r[0].cpu_percent, r[1].cpu_percent), (50.0, 25.0));
        assert_eq!(lifetime_percent(&task(3, 1_000, 500), 2_000), 50.0);
        assert_eq!(lifetime_percent(&task(3, 2_000, 500), 2_000), 0.0);
    }
}
