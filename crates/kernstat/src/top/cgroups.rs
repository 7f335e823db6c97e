//! `top`'s cgroup view (key `C`): every control group as a tree with CPU, throttling,
//! memory, I/O, pressure and tasks over the refresh interval, in place of the process
//! table. Groups fold and unfold, sort by any column, filter by path; Enter narrows the
//! process table to the selected group and its children.
//!
//! Kept apart from the terminal like `view.rs`: the panel holds the rows and the
//! visible lines; `draw.rs` renders them.

use std::collections::HashSet;

use kernstat_model::cgroup::{rates, CgroupRate, CgroupTree};
use kernstat_sources::cgroup::{CgroupReader, CgroupWant};
use kernstat_sources::Roots;

/// The columns, in order: title, width.
pub const COLUMNS: [(&str, u16); 9] = [
    ("CPU%", 6),
    ("THR%", 5),
    ("MEM", 7),
    ("IO_R/s", 7),
    ("IO_W/s", 7),
    ("P_CPU", 5),
    ("P_MEM", 5),
    ("P_IO", 5),
    ("TASKS", 5),
];

/// One visible line: which group, and whether it has children (folded or not).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupLine {
    /// Index into [`CgroupPanel::rows`].
    pub index: usize,
    /// It has children among the rows.
    pub parent: bool,
    /// Its children are hidden.
    pub folded: bool,
}

/// The cgroup view's state.
pub struct CgroupPanel {
    reader: CgroupReader,
    prev: Option<CgroupTree>,
    /// The groups over the last interval, parents first.
    pub rows: Vec<CgroupRate>,
    /// Groups whose children are hidden.
    pub folded: HashSet<String>,
    /// Sort column (index into [`COLUMNS`]; None: by path).
    pub sort: Option<usize>,
    /// Largest first.
    pub descending: bool,
    /// Only groups whose path contains this (and their ancestors, to keep the tree).
    pub filter: String,
    /// The selected group's path.
    pub selected: Option<String>,
    /// First visible line.
    pub offset: usize,
    lines: Vec<GroupLine>,
    /// "v2" or "hybrid".
    pub layout: String,
}

impl CgroupPanel {
    /// Opens the hierarchy; an error says why there is no view.
    pub fn open() -> anyhow::Result<Self> {
        let reader = CgroupReader::open(&Roots::default())
            .ok_or_else(|| anyhow::anyhow!("no cgroup v2 hierarchy is mounted here"))?;
        let mut p = CgroupPanel {
            reader,
            prev: None,
            rows: Vec::new(),
            folded: HashSet::new(),
            sort: Some(0),
            descending: true,
            filter: String::new(),
            selected: None,
            offset: 0,
            lines: Vec::new(),
            layout: String::new(),
        };
        p.refresh()?;
        Ok(p)
    }

    /// Reads the hierarchy again: rates since the last reading.
    pub fn refresh(&mut self) -> anyhow::Result<()> {
        let now = self.reader.read(CgroupWant::default(), None)?;
        let before = self.prev.take().unwrap_or_else(|| CgroupTree {
            taken_ns: now.taken_ns,
            ..now.clone()
        });
        self.rows = rates(&before, &now);
        self.layout = now.layout.clone();
        self.prev = Some(now);
        self.rebuild();
        Ok(())
    }

    /// The value a column sorts by (None: the group lacks it).
    pub fn value(g: &CgroupRate, col: usize) -> Option<f64> {
        let avg10 = |p: &kernstat_model::cgroup::Pressure| p.some.map(|l| f64::from(l.avg10));
        match col {
            0 => Some(g.cpu_percent),
            1 => g.throttled_percent,
            2 => g.memory.map(|m| m.current as f64),
            3 => g.io_read_bps,
            4 => g.io_write_bps,
            5 => avg10(&g.psi_cpu),
            6 => avg10(&g.psi_memory),
            7 => avg10(&g.psi_io),
            8 => g.pids.map(|v| v as f64),
            _ => None,
        }
    }

    /// The visible lines, in display order.
    pub fn lines(&self) -> &[GroupLine] {
        &self.lines
    }

    /// Recomputes the visible lines: tree order, siblings sorted, folded groups'
    /// children hidden, the filter applied (keeping the ancestors of what matches).
    pub fn rebuild(&mut self) {
        let needle = self.filter.to_lowercase();
        let keep: HashSet<&str> = if needle.is_empty() {
            self.rows.iter().map(|g| g.path.as_str()).collect()
        } else {
            let mut k = HashSet::new();
            for g in self
                .rows
                .iter()
                .filter(|g| g.path.to_lowercase().contains(&needle))
            {
                let mut p = g.path.as_str();
                k.insert(p);
                while let Some(i) = p.rfind('/') {
                    p = if i == 0 { "/" } else { &p[..i] };
                    k.insert(p);
                    if p == "/" {
                        break;
                    }
                }
            }
            k
        };
        let parent_of = |p: &str| -> Option<String> {
            if p == "/" {
                return None;
            }
            Some(match p.rfind('/') {
                Some(0) | None => "/".to_string(),
                Some(i) => p[..i].to_string(),
            })
        };
        let mut children: std::collections::HashMap<String, Vec<usize>> = Default::default();
        let mut roots = Vec::new();
        let all: HashSet<&str> = self.rows.iter().map(|g| g.path.as_str()).collect();
        for (i, g) in self.rows.iter().enumerate() {
            match parent_of(&g.path).filter(|p| all.contains(p.as_str())) {
                Some(p) => children.entry(p).or_default().push(i),
                None => roots.push(i),
            }
        }
        let (sort, descending, rows) = (self.sort, self.descending, &self.rows);
        let cmp = |a: &usize, b: &usize| {
            let (ga, gb) = (&rows[*a], &rows[*b]);
            let o = match sort {
                None => ga.path.cmp(&gb.path),
                Some(c) => match (Self::value(ga, c), Self::value(gb, c)) {
                    (Some(x), Some(y)) => x.total_cmp(&y),
                    (x, y) => x.is_some().cmp(&y.is_some()),
                },
            };
            let o = if descending && sort.is_some() {
                o.reverse()
            } else {
                o
            };
            o.then_with(|| ga.path.cmp(&gb.path))
        };
        let mut out = Vec::new();
        let mut stack: Vec<usize> = {
            let mut r = roots;
            r.sort_by(cmp);
            r.into_iter().rev().collect()
        };
        while let Some(i) = stack.pop() {
            let path = &rows[i].path;
            if !keep.contains(path.as_str()) {
                continue;
            }
            let kids = children.get(path.as_str()).cloned().unwrap_or_default();
            let folded = self.folded.contains(path);
            out.push(GroupLine {
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
        self.lines = out;
        if self
            .selected
            .as_ref()
            .is_none_or(|s| !self.lines.iter().any(|l| &rows[l.index].path == s))
        {
            self.selected = self.lines.first().map(|l| rows[l.index].path.clone());
        }
    }

    fn cursor(&self) -> usize {
        self.lines
            .iter()
            .position(|l| Some(&self.rows[l.index].path) == self.selected.as_ref())
            .unwrap_or(0)
    }

    /// The selected line's position.
    pub fn cursor_line(&self) -> usize {
        self.cursor()
    }

    /// Moves the selection by `n` lines.
    pub fn move_by(&mut self, n: isize) {
        if self.lines.is_empty() {
            return;
        }
        let at = (self.cursor() as isize + n).clamp(0, self.lines.len() as isize - 1) as usize;
        self.selected = Some(self.rows[self.lines[at].index].path.clone());
    }

    /// Folds (`Some(true)`), unfolds (`Some(false)`) or toggles the selected group.
    pub fn fold(&mut self, fold: Option<bool>) {
        let Some(path) = self.selected.clone() else {
            return;
        };
        let now = self.folded.contains(&path);
        let want = fold.unwrap_or(!now);
        if want {
            self.folded.insert(path);
        } else {
            self.folded.remove(&path);
        }
        self.rebuild();
    }

    /// The next (or previous) sort column; past the last, by path.
    pub fn cycle_sort(&mut self, forward: bool) {
        let n = COLUMNS.len();
        self.sort = match (self.sort, forward) {
            (None, true) => Some(0),
            (None, false) => Some(n - 1),
            (Some(c), true) if c + 1 < n => Some(c + 1),
            (Some(c), false) if c > 0 => Some(c - 1),
            _ => None,
        };
        self.rebuild();
    }
}
