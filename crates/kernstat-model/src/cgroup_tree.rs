//! Control groups as people read them: the columns a group has (by name, with the value
//! each sorts by), the tree order (parents before children, siblings sorted, folded
//! groups' children left out, a filter that keeps the ancestors of what matches), and
//! per-process network summed into each group and its ancestors. One definition for
//! `kernstat cgroups`, top's cgroup view and the replays, with no I/O.

use std::collections::{HashMap, HashSet};

use crate::cgroup::{CgroupNet, CgroupRate, Pressure};

/// A column of a group's row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Column {
    /// CPU % of one core, its children included.
    Cpu,
    /// Share of cpu.max periods throttled, %.
    Throttled,
    /// memory.current, bytes.
    Mem,
    /// memory.max (else memory.high), bytes.
    Limit,
    /// Storage reads, bytes/s.
    IoRead,
    /// Storage writes, bytes/s.
    IoWrite,
    /// cpu.pressure some avg10, %.
    PsiCpu,
    /// memory.pressure some avg10, %.
    PsiMem,
    /// io.pressure some avg10, %.
    PsiIo,
    /// Tasks (pids.current).
    Pids,
    /// Its processes' socket bytes received/s.
    NetRx,
    /// Sent/s.
    NetTx,
}

impl Column {
    /// Every column, in the order `kernstat cgroups` prints them.
    pub const ALL: [Column; 12] = [
        Column::Cpu,
        Column::Throttled,
        Column::Mem,
        Column::Limit,
        Column::IoRead,
        Column::IoWrite,
        Column::PsiCpu,
        Column::PsiMem,
        Column::PsiIo,
        Column::Pids,
        Column::NetRx,
        Column::NetTx,
    ];

    /// The name `--sort` takes.
    pub fn name(self) -> &'static str {
        match self {
            Column::Cpu => "cpu",
            Column::Throttled => "throttled",
            Column::Mem => "mem",
            Column::Limit => "limit",
            Column::IoRead => "ioread",
            Column::IoWrite => "iowrite",
            Column::PsiCpu => "psicpu",
            Column::PsiMem => "psimem",
            Column::PsiIo => "psiio",
            Column::Pids => "pids",
            Column::NetRx => "netrx",
            Column::NetTx => "nettx",
        }
    }

    /// The column `--sort` names (`path` is not a column: None).
    pub fn parse(name: &str) -> Option<Column> {
        Column::ALL.into_iter().find(|c| c.name() == name)
    }

    /// The group's value in this column (None: it lacks the figure).
    pub fn value(self, g: &CgroupRate) -> Option<f64> {
        let avg10 = |p: &Pressure| p.some.map(|l| f64::from(l.avg10));
        match self {
            Column::Cpu => Some(g.cpu_percent),
            Column::Throttled => g.throttled_percent,
            Column::Mem => g.memory.map(|m| m.current as f64),
            Column::Limit => g.memory.and_then(|m| m.max.or(m.high)).map(|v| v as f64),
            Column::IoRead => g.io_read_bps,
            Column::IoWrite => g.io_write_bps,
            Column::PsiCpu => avg10(&g.psi_cpu),
            Column::PsiMem => avg10(&g.psi_memory),
            Column::PsiIo => avg10(&g.psi_io),
            Column::Pids => g.pids.map(|v| v as f64),
            Column::NetRx => g.net.map(|n| n.rx_bps),
            Column::NetTx => g.net.map(|n| n.tx_bps),
        }
    }
}

/// The parent of a group's path ("/a/b" -> "/a", "/a" -> "/"); None for the root.
pub fn parent_of(path: &str) -> Option<&str> {
    if path == "/" {
        return None;
    }
    Some(match path.rfind('/') {
        Some(0) | None => "/",
        Some(i) => &path[..i],
    })
}

/// How to order and narrow the tree.
#[derive(Clone, Debug, Default)]
pub struct TreeOrder<'a> {
    /// Siblings by this column (None: by path).
    pub sort: Option<Column>,
    /// Largest first (with a column).
    pub descending: bool,
    /// Groups whose children are hidden.
    pub folded: Option<&'a HashSet<String>>,
    /// Only groups whose path contains this, case-insensitively (and their ancestors,
    /// so the tree holds); empty: all.
    pub filter: &'a str,
}

/// One line of the tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreeLine {
    /// Index into the groups.
    pub index: usize,
    /// It has children among the groups (folded or not).
    pub parent: bool,
    /// Its children are hidden.
    pub folded: bool,
}

/// The groups in tree order: parents before children, siblings by `order` (groups
/// lacking the figure last, then by path), folded groups' children left out, the
/// filter applied.
pub fn tree(groups: &[CgroupRate], order: &TreeOrder<'_>) -> Vec<TreeLine> {
    let needle = order.filter.to_lowercase();
    let keep: Option<HashSet<&str>> = (!needle.is_empty()).then(|| {
        let mut k = HashSet::new();
        for g in groups
            .iter()
            .filter(|g| g.path.to_lowercase().contains(&needle))
        {
            let mut p = Some(g.path.as_str());
            while let Some(q) = p {
                k.insert(q);
                p = parent_of(q);
            }
        }
        k
    });
    let all: HashSet<&str> = groups.iter().map(|g| g.path.as_str()).collect();
    let mut children: HashMap<&str, Vec<usize>> = HashMap::new();
    let mut roots = Vec::new();
    for (i, g) in groups.iter().enumerate() {
        match parent_of(&g.path).filter(|p| all.contains(p)) {
            Some(p) => children.entry(p).or_default().push(i),
            None => roots.push(i),
        }
    }
    let cmp = |a: &usize, b: &usize| {
        let (ga, gb) = (&groups[*a], &groups[*b]);
        let o = match order.sort {
            None => ga.path.cmp(&gb.path),
            Some(c) => match (c.value(ga), c.value(gb)) {
                (Some(x), Some(y)) => {
                    let o = x.total_cmp(&y);
                    if order.descending {
                        o.reverse()
                    } else {
                        o
                    }
                }
                // Groups without the figure last, either way.
                (x, y) => y.is_some().cmp(&x.is_some()),
            },
        };
        o.then_with(|| ga.path.cmp(&gb.path))
    };
    let mut out = Vec::with_capacity(groups.len());
    let mut stack: Vec<usize> = {
        roots.sort_by(cmp);
        roots.into_iter().rev().collect()
    };
    while let Some(i) = stack.pop() {
        let path = groups[i].path.as_str();
        if keep.as_ref().is_some_and(|k| !k.contains(path)) {
            continue;
        }
        let kids = children.remove(path).unwrap_or_default();
        let folded = order.folded.is_some_and(|f| f.contains(path));
        out.push(TreeLine {
            index: i,
            parent: !kids.is_empty(),
            folded,
        });
        if !folded {
            let mut kids = kids;
            kids.sort_by(cmp);
            stack.extend(kids.into_iter().rev());
        }
    }
    out
}

/// A process's place and its socket bytes per second over the interval.
#[derive(Clone, Copy, Debug)]
pub struct ProcessNet<'a> {
    /// Its group's id (the directory's inode, as BPF reports it), 0 when unknown.
    pub cgroup_id: u64,
    /// Its group's path, where the source gives one (procfs).
    pub cgroup_path: Option<&'a str>,
    /// Received, bytes/s.
    pub rx_bps: f64,
    /// Sent, bytes/s.
    pub tx_bps: f64,
}

/// Sums every process's socket bytes into its group and each of the group's ancestors
/// that is among `groups` (every group gets a figure, 0 when none of its processes
/// used a socket).
pub fn add_network<'a>(groups: &mut [CgroupRate], procs: impl IntoIterator<Item = ProcessNet<'a>>) {
    let by_id: HashMap<u64, usize> = groups.iter().enumerate().map(|(i, g)| (g.id, i)).collect();
    let by_path: HashMap<String, usize> = groups
        .iter()
        .enumerate()
        .map(|(i, g)| (g.path.clone(), i))
        .collect();
    for g in groups.iter_mut() {
        g.net = Some(CgroupNet::default());
    }
    for p in procs {
        if p.rx_bps + p.tx_bps == 0.0 {
            continue;
        }
        let start = match (by_id.get(&p.cgroup_id), p.cgroup_path) {
            (Some(&i), _) => groups[i].path.clone(),
            (None, Some(path)) => path.to_string(),
            (None, None) => continue,
        };
        let mut path = Some(start.as_str());
        while let Some(q) = path {
            if let Some(&i) = by_path.get(q) {
                if let Some(n) = groups[i].net.as_mut() {
                    n.rx_bps += p.rx_bps;
                    n.tx_bps += p.tx_bps;
                }
            }
            path = parent_of(q);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(path: &str, id: u64, cpu: f64) -> CgroupRate {
        CgroupRate {
            path: path.into(),
            id,
            cpu_percent: cpu,
            ..Default::default()
        }
    }

    fn paths(groups: &[CgroupRate], lines: &[TreeLine]) -> Vec<String> {
        lines.iter().map(|l| groups[l.index].path.clone()).collect()
    }

    #[test]
    fn parents_first_siblings_sorted_folds_and_filters() {
        let groups = vec![
            g("/b", 2, 5.0),
            g("/", 1, 50.0),
            g("/a", 3, 30.0),
            g("/a/y", 4, 1.0),
            g("/a/x", 5, 20.0),
        ];
        let by_cpu = TreeOrder {
            sort: Some(Column::Cpu),
            descending: true,
            ..Default::default()
        };
        assert_eq!(
            paths(&groups, &tree(&groups, &by_cpu)),
            ["/", "/a", "/a/x", "/a/y", "/b"]
        );
        let by_path = TreeOrder::default();
        assert_eq!(
            paths(&groups, &tree(&groups, &by_path)),
            ["/", "/a", "/a/x", "/a/y", "/b"]
        );
        let folded: HashSet<String> = ["/a".to_string()].into();
        let lines = tree(
            &groups,
            &TreeOrder {
                folded: Some(&folded),
                ..Default::default()
            },
        );
        assert_eq!(paths(&groups, &lines), ["/", "/a", "/b"]);
        assert!(lines[1].folded && lines[1].parent);
        let lines = tree(
            &groups,
            &TreeOrder {
                filter: "Y",
                ..Default::default()
            },
        );
        assert_eq!(paths(&groups, &lines), ["/", "/a", "/a/y"]);
    }

    #[test]
    fn network_adds_up_into_ancestors() {
        let mut groups = vec![
            g("/", 1, 0.0),
            g("/a", 2, 0.0),
            g("/a/x", 3, 0.0),
            g("/b", 4, 0.0),
        ];
        add_network(
            &mut groups,
            [
                ProcessNet {
                    cgroup_id: 3,
                    cgroup_path: None,
                    rx_bps: 10.0,
                    tx_bps: 1.0,
                },
                ProcessNet {
                    cgroup_id: 0,
                    cgroup_path: Some("/b"),
                    rx_bps: 5.0,
                    tx_bps: 0.0,
                },
            ],
        );
        let rx: Vec<f64> = groups.iter().map(|g| g.net.unwrap().rx_bps).collect();
        assert_eq!(rx, [15.0, 10.0, 10.0, 5.0]);
    }
}
