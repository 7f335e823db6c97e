//! The live view's state, apart from any terminal: the processes of the last refresh,
//! the order and filter they are shown in, the tree, and which process is selected.
//!
//! Kept free of ratatui and of the sources so that it can be tested alone, and so that
//! a replayed sample could later feed the same view.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::rc::Rc;

/// One row: a process, or a thread when threads are shown.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Proc {
    /// Process id (thread id when threads are shown).
    pub pid: u32,
    /// The process the thread belongs to (= pid for processes).
    pub tgid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// Real uid.
    pub uid: u32,
    /// User name.
    pub user: Rc<str>,
    /// State letter.
    pub state: char,
    /// Threads.
    pub threads: u32,
    /// Nice value.
    pub nice: i32,
    /// Priority (/proc/PID/stat field 18).
    pub prio: i32,
    /// Percent of one CPU over the last refresh interval.
    pub cpu_percent: f64,
    /// CPU time of all threads, live and exited, ns.
    pub cpu_ns: u64,
    /// Resident set, bytes.
    pub rss_bytes: u64,
    /// Storage reads per second over the interval.
    pub read_bps: f64,
    /// Storage writes per second over the interval.
    pub write_bps: f64,
    /// Command name.
    pub comm: Rc<str>,
    /// Command line (`[comm]` for kernel threads).
    pub cmd: Rc<str>,
    /// cgroup v2 path.
    pub cgroup: String,
    /// Kernel thread.
    pub kthread: bool,
    /// 99th percentile run-queue latency over the interval, µs (runqlat panel on).
    pub runq_p99_us: Option<f64>,
    /// Write calls per second over the interval (writes panel on).
    pub write_calls_per_s: Option<f64>,
    /// Share of those calls asking for fewer bytes than the small threshold, 0..1.
    pub small_write_share: Option<f64>,
    /// Socket payload bytes received per second (None: not counted on this machine).
    pub net_rx_bps: Option<f64>,
    /// Socket payload bytes sent per second.
    pub net_tx_bps: Option<f64>,
    /// TCP segments its sockets retransmitted per second (retransmit probe on).
    pub tcp_retrans_per_s: Option<f64>,
}

/// What rows can be sorted by; one per column.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SortKey {
    /// PID.
    Pid,
    /// USER.
    User,
    /// PRI.
    Pri,
    /// NI.
    Nice,
    /// THR.
    Threads,
    /// S.
    State,
    /// CPU%.
    Cpu,
    /// RES.
    Mem,
    /// READ/s.
    Read,
    /// WRITE/s.
    Write,
    /// NET_RX/s.
    NetRx,
    /// NET_TX/s.
    NetTx,
    /// TIME+.
    Time,
    /// RQ p99.
    RunqP99,
    /// WCALL/s.
    WriteCalls,
    /// SMALL%.
    SmallShare,
    /// RETR/s.
    Retrans,
    /// COMMAND.
    Cmd,
}

impl SortKey {
    /// Every key, in column order.
    pub const ALL: [SortKey; 18] = [
        SortKey::Pid,
        SortKey::User,
        SortKey::Pri,
        SortKey::Nice,
        SortKey::Threads,
        SortKey::State,
        SortKey::Cpu,
        SortKey::Mem,
        SortKey::Read,
        SortKey::Write,
        SortKey::NetRx,
        SortKey::NetTx,
        SortKey::Time,
        SortKey::RunqP99,
        SortKey::WriteCalls,
        SortKey::SmallShare,
        SortKey::Retrans,
        SortKey::Cmd,
    ];

    /// The name on the command line (`--sort`).
    pub fn name(self) -> &'static str {
        match self {
            SortKey::Pid => "pid",
            SortKey::User => "user",
            SortKey::Pri => "pri",
            SortKey::Nice => "nice",
            SortKey::Threads => "threads",
            SortKey::State => "state",
            SortKey::Cpu => "cpu",
            SortKey::Mem => "mem",
            SortKey::Read => "read",
            SortKey::Write => "write",
            SortKey::NetRx => "netrx",
            SortKey::NetTx => "nettx",
            SortKey::Time => "time",
            SortKey::RunqP99 => "runq",
            SortKey::WriteCalls => "wcalls",
            SortKey::SmallShare => "small",
            SortKey::Retrans => "retrans",
            SortKey::Cmd => "cmd",
        }
    }

    /// Parses a `--sort` name (`rss` is accepted for mem).
    pub fn parse(s: &str) -> Option<SortKey> {
        let s = s.to_ascii_lowercase();
        if s == "rss" || s == "res" {
            return Some(SortKey::Mem);
        }
        SortKey::ALL.into_iter().find(|k| k.name() == s)
    }

    /// Numbers read best largest first, names alphabetically (htop's defaults).
    pub fn descending_by_default(self) -> bool {
        !matches!(self, SortKey::Pid | SortKey::User | SortKey::Cmd)
    }

    fn compare(self, a: &Proc, b: &Proc) -> Ordering {
        match self {
            SortKey::Pid => a.pid.cmp(&b.pid),
            SortKey::User => a.user.cmp(&b.user),
            SortKey::Pri => a.prio.cmp(&b.prio),
            SortKey::Nice => a.nice.cmp(&b.nice),
            SortKey::Threads => a.threads.cmp(&b.threads),
            SortKey::State => a.state.cmp(&b.state),
            SortKey::Cpu => a.cpu_percent.total_cmp(&b.cpu_percent),
            SortKey::Mem => a.rss_bytes.cmp(&b.rss_bytes),
            SortKey::Read => a.read_bps.total_cmp(&b.read_bps),
            SortKey::Write => a.write_bps.total_cmp(&b.write_bps),
            SortKey::NetRx => a
                .net_rx_bps
                .unwrap_or(-1.0)
                .total_cmp(&b.net_rx_bps.unwrap_or(-1.0)),
            SortKey::NetTx => a
                .net_tx_bps
                .unwrap_or(-1.0)
                .total_cmp(&b.net_tx_bps.unwrap_or(-1.0)),
            SortKey::Time => a.cpu_ns.cmp(&b.cpu_ns),
            SortKey::RunqP99 => a
                .runq_p99_us
                .unwrap_or(-1.0)
                .total_cmp(&b.runq_p99_us.unwrap_or(-1.0)),
            SortKey::WriteCalls => a
                .write_calls_per_s
                .unwrap_or(-1.0)
                .total_cmp(&b.write_calls_per_s.unwrap_or(-1.0)),
            SortKey::SmallShare => a
                .small_write_share
                .unwrap_or(-1.0)
                .total_cmp(&b.small_write_share.unwrap_or(-1.0)),
            SortKey::Retrans => a
                .tcp_retrans_per_s
                .unwrap_or(-1.0)
                .total_cmp(&b.tcp_retrans_per_s.unwrap_or(-1.0)),
            SortKey::Cmd => a.cmd.cmp(&b.cmd),
        }
    }
}

/// One visible row: which process, and its place in the tree.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Line {
    /// Index into [`View::procs`].
    pub index: usize,
    /// Depth in the tree (0 without tree).
    pub depth: u16,
    /// Bit d set: the ancestor at depth d+1 (or the row itself at its depth) is the last
    /// of its siblings, so no vertical line continues below it.
    pub last: u64,
}

/// The table's state.
#[derive(Debug)]
pub struct View {
    /// The rows of the last refresh, in source order.
    pub procs: Vec<Proc>,
    /// Sort column.
    pub sort: SortKey,
    /// Largest (or last alphabetically) first.
    pub descending: bool,
    /// Incremental search: rows whose command, user or cgroup contain it (any case).
    pub filter: String,
    /// Only processes in this control group or below it (the cgroup view's Enter).
    pub cgroup: Option<String>,
    /// Parent/child tree.
    pub tree: bool,
    /// Kernel threads shown.
    pub kthreads: bool,
    /// The selected process, followed across refreshes and re-sorts.
    pub selected: Option<u32>,
    /// Index of the first visible line (scrolling).
    pub offset: usize,
    lines: Vec<Line>,
    /// Selected line index before the last rebuild (to stay in place when it vanishes).
    cursor: usize,
}

impl View {
    /// An empty view sorted by `sort`.
    pub fn new(sort: SortKey, descending: bool) -> Self {
        View {
            procs: Vec::new(),
            sort,
            descending,
            filter: String::new(),
            cgroup: None,
            tree: false,
            kthreads: true,
            selected: None,
            offset: 0,
            lines: Vec::new(),
            cursor: 0,
        }
    }

    /// The visible lines, in display order.
    pub fn lines(&self) -> &[Line] {
        &self.lines
    }

    #[cfg(test)]
    /// Replaces the rows (a refresh) and re-applies order, filter and selection.
    pub fn set_procs(&mut self, procs: Vec<Proc>) {
        self.procs = procs;
        self.rebuild();
    }

    /// Sorts by `key`; the same key again flips the direction.
    pub fn sort_by(&mut self, key: SortKey) {
        if self.sort == key {
            self.descending = !self.descending;
        } else {
            self.sort = key;
            self.descending = key.descending_by_default();
        }
        self.rebuild();
    }

    /// The next (or previous) column as sort key, as htop's `<` and `>`.
    /// `shown` says which columns are on screen (the probes' columns come and go).
    pub fn cycle_sort(&mut self, forward: bool, shown: impl Fn(SortKey) -> bool) {
        let keys: Vec<SortKey> = SortKey::ALL.into_iter().filter(|&k| shown(k)).collect();
        let at = keys.iter().position(|&k| k == self.sort).unwrap_or(0);
        let n = keys.len();
        let next = if forward {
            (at + 1) % n
        } else {
            (at + n - 1) % n
        };
        self.sort = keys[next];
        self.descending = self.sort.descending_by_default();
        self.rebuild();
    }

    /// Whether the table shows process `tgid` (always, without a filter): the panels
    /// narrow to what the filter keeps.
    pub fn shows_process(&self, tgid: u32) -> bool {
        (self.filter.is_empty() && self.cgroup.is_none())
            || self
                .lines
                .iter()
                .any(|l| self.procs.get(l.index).is_some_and(|p| p.tgid == tgid))
    }

    fn matches(&self, p: &Proc) -> bool {
        if !self.kthreads && p.kthread {
            return false;
        }
        if let Some(g) = &self.cgroup {
            if !kernstat_model::cgroup::within(&p.cgroup, g) {
                return false;
            }
        }
        if self.filter.is_empty() {
            return true;
        }
        let needle = self.filter.to_lowercase();
        [&*p.cmd, &*p.comm, &*p.user, p.cgroup.as_str()]
            .iter()
            .any(|h| h.to_lowercase().contains(&needle))
            || p.pid.to_string() == needle
    }

    fn ordering(&self, a: &Proc, b: &Proc) -> Ordering {
        let o = self.sort.compare(a, b);
        let o = if self.descending { o.reverse() } else { o };
        o.then(a.pid.cmp(&b.pid))
    }

    /// Recomputes the visible lines from the rows, keeping the selection.
    pub fn rebuild(&mut self) {
        let mut shown: Vec<usize> = (0..self.procs.len())
            .filter(|&i| self.matches(&self.procs[i]))
            .collect();
        self.lines.clear();
        if self.tree {
            self.build_tree(&mut shown);
        } else {
            shown.sort_by(|&a, &b| self.ordering(&self.procs[a], &self.procs[b]));
            self.lines.extend(shown.into_iter().map(|index| Line {
                index,
                depth: 0,
                last: 0,
            }));
        }
        self.reselect();
    }

    /// Tree order: matching rows with their ancestors (so that the tree stays whole),
    /// siblings in sort order.
    fn build_tree(&mut self, shown: &mut Vec<usize>) {
        let by_pid: HashMap<u32, usize> = self
            .procs
            .iter()
            .enumerate()
            .map(|(i, p)| (p.pid, i))
            .collect();
        let parent_of = |p: &Proc| -> Option<usize> {
            // A thread hangs under its process, a process under its parent.
            let parent = if p.tgid != p.pid { p.tgid } else { p.ppid };
            by_pid
                .get(&parent)
                .copied()
                .filter(|&i| self.procs[i].pid != p.pid)
        };
        let mut keep = vec![false; self.procs.len()];
        for &i in shown.iter() {
            let mut at = Some(i);
            let mut guard = 0;
            while let Some(j) = at {
                if keep[j] && j != i || guard > 4096 {
                    break;
                }
                keep[j] = true;
                at = parent_of(&self.procs[j]);
                guard += 1;
            }
        }
        let mut children: HashMap<Option<usize>, Vec<usize>> = HashMap::new();
        for (i, p) in self.procs.iter().enumerate() {
            if keep[i] {
                children.entry(parent_of(p)).or_default().push(i);
            }
        }
        for list in children.values_mut() {
            list.sort_by(|&a, &b| self.ordering(&self.procs[a], &self.procs[b]));
        }
        // Depth-first, iteratively; (index, depth, last-bits).
        let mut stack: Vec<(usize, u16, u64)> = Vec::new();
        if let Some(roots) = children.get(&None) {
            let n = roots.len();
            for (k, &r) in roots.iter().enumerate().rev() {
                stack.push((r, 0, u64::from(k + 1 == n)));
            }
        }
        let mut visited = vec![false; self.procs.len()];
        while let Some((i, depth, last)) = stack.pop() {
            if std::mem::replace(&mut visited[i], true) {
                continue;
            }
            self.lines.push(Line {
                index: i,
                depth,
                last,
            });
            if let Some(kids) = children.get(&Some(i)) {
                let n = kids.len();
                for (k, &c) in kids.iter().enumerate().rev() {
                    let d = depth.saturating_add(1);
                    let bit = if (d as u32) < 64 && k + 1 == n {
                        1u64 << d
                    } else {
                        0
                    };
                    stack.push((c, d, last | bit));
                }
            }
        }
        shown.clear();
    }

    /// The selected line's index, if any.
    pub fn cursor(&self) -> Option<usize> {
        if self.lines.is_empty() {
            None
        } else {
            Some(self.cursor.min(self.lines.len() - 1))
        }
    }

    /// The selected process.
    pub fn selected_proc(&self) -> Option<&Proc> {
        self.cursor().map(|c| &self.procs[self.lines[c].index])
    }

    fn reselect(&mut self) {
        if self.lines.is_empty() {
            self.cursor = 0;
            return;
        }
        let found = self.selected.and_then(|pid| {
            self.lines
                .iter()
                .position(|l| self.procs[l.index].pid == pid)
        });
        match found {
            Some(at) => self.cursor = at,
            None => {
                // Gone (exited or filtered out): stay at the same place in the table.
                self.cursor = self.cursor.min(self.lines.len() - 1);
                if self.selected.is_some() {
                    self.selected = Some(self.procs[self.lines[self.cursor].index].pid);
                }
            }
        }
    }

    /// Moves the selection by `delta` lines (clamped) and follows the process there.
    pub fn move_by(&mut self, delta: isize) {
        if self.lines.is_empty() {
            return;
        }
        let last = self.lines.len() as isize - 1;
        let at = (self.cursor().unwrap_or(0) as isize + delta).clamp(0, last) as usize;
        self.select_line(at);
    }

    /// Selects line `at` (clamped).
    pub fn select_line(&mut self, at: usize) {
        if self.lines.is_empty() {
            return;
        }
        self.cursor = at.min(self.lines.len() - 1);
        self.selected = Some(self.procs[self.lines[self.cursor].index].pid);
    }

    /// Keeps the cursor inside a window of `height` lines starting at `offset`.
    pub fn scroll_into_view(&mut self, height: usize) {
        let Some(c) = self.cursor() else {
            self.offset = 0;
            return;
        };
        if height == 0 {
            return;
        }
        if c < self.offset {
            self.offset = c;
        } else if c >= self.offset + height {
            self.offset = c + 1 - height;
        }
        let max_offset = self.lines.len().saturating_sub(height);
        self.offset = self.offset.min(max_offset);
    }
}

/// The tree's drawing in front of a command: `│  ├─ ` and so on.
pub fn tree_prefix(line: &Line, out: &mut String) {
    out.clear();
    for d in 1..=line.depth {
        let is_last = (d as u32) < 64 && line.last & (1u64 << d) != 0;
        if d == line.depth {
            out.push_str(if is_last { "└─ " } else { "├─ " });
        } else {
            out.push_str(if is_last { "   " } else { "│  " });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pid: u32, ppid: u32, cpu: f64, rss: u64, cmd: &str) -> Proc {
        Proc {
            pid,
            tgid: pid,
            ppid,
            cpu_percent: cpu,
            rss_bytes: rss,
            cmd: cmd.into(),
            comm: cmd.split(' ').next().unwrap_or("").into(),
            user: "root".into(),
            ..Default::default()
        }
    }

    fn pids(v: &View) -> Vec<u32> {
        v.lines().iter().map(|l| v.procs[l.index].pid).collect()
    }

    fn sample() -> Vec<Proc> {
        vec![
            p(1, 0, 0.5, 10, "init"),
            p(10, 1, 90.0, 20, "burner --cpu"),
            p(11, 1, 1.0, 300, "bigmem 256M"),
            p(12, 11, 3.0, 5, "child of bigmem"),
        ]
    }

    #[test]
    fn sorts_by_column_and_flips_on_the_same_key() {
        let mut v = View::new(SortKey::Cpu, true);
        v.set_procs(sample());
        assert_eq!(pids(&v), [10, 12, 11, 1]);
        v.sort_by(SortKey::Mem);
        assert_eq!(pids(&v), [11, 10, 1, 12]);
        v.sort_by(SortKey::Mem);
        assert_eq!(pids(&v), [12, 1, 10, 11]);
        v.sort_by(SortKey::Pid);
        assert_eq!(pids(&v), [1, 10, 11, 12]);
    }

    #[test]
    fn filter_matches_command_user_and_cgroup_in_any_case() {
        let mut v = View::new(SortKey::Pid, false);
        let mut procs = sample();
        procs[0].cgroup = "/system.slice/Foo.service".into();
        v.set_procs(procs);
        v.filter = "BIGMEM".into();
        v.rebuild();
        assert_eq!(pids(&v), [11, 12]);
        assert!(v.shows_process(12) && !v.shows_process(10));
        v.filter = "foo.serv".into();
        v.rebuild();
        assert_eq!(pids(&v), [1]);
        v.filter = "nothing like it".into();
        v.rebuild();
        assert!(v.lines().is_empty());
        assert_eq!(v.selected_proc(), None);
    }

    #[test]
    fn tree_puts_children_under_parents_with_their_ancestors_kept() {
        let mut v = View::new(SortKey::Cpu, true);
        v.tree = true;
        v.set_procs(sample());
        assert_eq!(pids(&v), [1, 10, 11, 12]);
        let depths: Vec<u16> = v.lines().iter().map(|l| l.depth).collect();
        assert_eq!(depths, [0, 1, 1, 2]);
        let mut s = String::new();
        tree_prefix(&v.lines()[1], &mut s);
        assert_eq!(s, "├─ ");
        tree_prefix(&v.lines()[3], &mut s);
        assert_eq!(s, "   └─ ");
        // Filtering for the grandchild keeps the path to it.
        v.filter = "child of".into();
        v.rebuild();
        assert_eq!(pids(&v), [1, 11, 12]);
    }

    #[test]
    fn a_parent_loop_does_not_hang_the_tree() {
        let mut v = View::new(SortKey::Pid, false);
        v.tree = true;
        v.set_procs(vec![p(5, 6, 0.0, 0, "a"), p(6, 5, 0.0, 0, "b")]);
        // Neither has a parent outside the loop: no root, nothing shown, no hang.
        assert!(v.lines().len() <= 2);
    }

    #[test]
    fn selection_follows_the_process_across_resorts_and_refreshes() {
        let mut v = View::new(SortKey::Cpu, true);
        v.set_procs(sample());
        v.move_by(2); // pid 11
        assert_eq!(v.selected_proc().map(|p| p.pid), Some(11));
        v.sort_by(SortKey::Mem);
        assert_eq!(v.selected_proc().map(|p| p.pid), Some(11));
        let mut next = sample();
        next[2].cpu_percent = 99.0;
        v.sort_by(SortKey::Cpu);
        v.set_procs(next);
        assert_eq!(v.cursor(), Some(0));
        assert_eq!(v.selected_proc().map(|p| p.pid), Some(11));
        // It exits: the selection stays at the same line.
        let mut gone = sample();
        gone.remove(2);
        v.set_procs(gone);
        assert_eq!(v.cursor(), Some(0));
        assert_eq!(v.selected_proc().map(|p| p.pid), Some(10));
    }

    #[test]
    fn kernel_threads_can_be_hidden() {
        let mut v = View::new(SortKey::Pid, false);
        let mut procs = sample();
        procs[1].kthread = true;
        v.set_procs(procs);
        v.kthreads = false;
        v.rebuild();
        assert_eq!(pids(&v), [1, 11, 12]);
    }

    #[test]
    fn scrolling_keeps_the_cursor_visible() {
        let mut v = View::new(SortKey::Pid, false);
        v.set_procs((1..=100).map(|i| p(i, 0, 0.0, 0, "x")).collect());
        v.move_by(50);
        v.scroll_into_view(10);
        assert_eq!(v.offset, 41);
        v.move_by(-100);
        v.scroll_into_view(10);
        assert_eq!(v.offset, 0);
        v.move_by(1000);
        v.scroll_into_view(10);
        assert_eq!(v.offset, 90);
    }

    #[test]
    fn sort_names_parse() {
        for k in SortKey::ALL {
            assert_eq!(SortKey::parse(k.name()), Some(k));
        }
        assert_eq!(SortKey::parse("RSS"), Some(SortKey::Mem));
        assert_eq!(SortKey::parse("bogus"), None);
    }
}
