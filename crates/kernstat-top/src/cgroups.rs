//! `top`'s cgroup view (key `C`): every control group as a tree with CPU, throttling,
//! memory, I/O, pressure and tasks over the refresh interval, in place of the process
//! table. Groups fold and unfold, sort by any column, filter by path; Enter narrows the
//! process table to the selected group and its children.
//!
//! Kept apart from the terminal like `view.rs`: the panel holds the rows and the
//! visible lines; `draw.rs` renders them.

use std::collections::HashSet;

use kernstat_collect::cgroups::{CgroupOptions, CgroupSampler};
use kernstat_model::cgroup::CgroupRate;
use kernstat_model::cgroup_tree::{tree, Column, TreeLine, TreeOrder};

/// The columns, in order: which, title, width.
pub const COLUMNS: [(Column, &str, u16); 9] = [
    (Column::Cpu, "CPU%", 6),
    (Column::Throttled, "THR%", 5),
    (Column::Mem, "MEM", 7),
    (Column::IoRead, "IO_R/s", 7),
    (Column::IoWrite, "IO_W/s", 7),
    (Column::PsiCpu, "P_CPU", 5),
    (Column::PsiMem, "P_MEM", 5),
    (Column::PsiIo, "P_IO", 5),
    (Column::Pids, "TASKS", 5),
];

/// One visible line: which group, and whether it has children (folded or not).
pub type GroupLine = TreeLine;

/// The cgroup view's state.
pub struct CgroupPanel {
    /// The live hierarchy (None: a recorded moment's groups, set by the replay).
    sampler: Option<CgroupSampler>,
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
        let sampler = CgroupSampler::open(CgroupOptions::default())?;
        let mut p = CgroupPanel {
            sampler: Some(sampler),
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

    /// A recorded moment's groups (`top --at`): rows set by the replay at each step.
    pub fn recorded(rows: Vec<CgroupRate>) -> Self {
        let mut p = CgroupPanel {
            sampler: None,
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
        p.set_rows(rows);
        p
    }

    /// Shows these groups (a replay's step).
    pub fn set_rows(&mut self, rows: Vec<CgroupRate>) {
        self.rows = rows;
        self.rebuild();
    }

    /// Reads the hierarchy again: rates since the last reading (a recorded view: none).
    pub fn refresh(&mut self) -> anyhow::Result<()> {
        let Some(sampler) = self.sampler.as_mut() else {
            return Ok(());
        };
        let (rows, layout) = sampler.read()?;
        self.rows = rows;
        self.layout = layout;
        self.rebuild();
        Ok(())
    }

    /// The value of column `col` (an index into [`COLUMNS`]; None: the group lacks it).
    pub fn value(g: &CgroupRate, col: usize) -> Option<f64> {
        COLUMNS.get(col).and_then(|(c, _, _)| c.value(g))
    }

    /// The visible lines, in display order.
    pub fn lines(&self) -> &[GroupLine] {
        &self.lines
    }

    /// Recomputes the visible lines: tree order, siblings sorted, folded groups'
    /// children hidden, the filter applied (keeping the ancestors of what matches).
    pub fn rebuild(&mut self) {
        let rows = &self.rows;
        self.lines = tree(
            rows,
            &TreeOrder {
                sort: self.sort.and_then(|i| COLUMNS.get(i)).map(|c| c.0),
                descending: self.descending,
                folded: Some(&self.folded),
                filter: &self.filter,
            },
        );
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
