//! The control-group tree as the text table `kernstat cgroups` prints: one row per group
//! in the tree's order, CPU and pressure as percentages, memory, I/O and network in
//! human units, "-" where the group's files do not say (a cgroup v1 controller on a
//! hybrid machine), and names made printable.

use kernstat_model::cgroup::CgroupRate;
use kernstat_model::cgroup_tree::{Column, TreeLine};

/// The table's columns: which, header, width.
const COLS: &[(Column, &str, usize)] = &[
    (Column::Cpu, "CPU%", 6),
    (Column::Throttled, "THR%", 5),
    (Column::Mem, "MEM", 6),
    (Column::Limit, "LIMIT", 6),
    (Column::IoRead, "IO_R/s", 7),
    (Column::IoWrite, "IO_W/s", 7),
    (Column::PsiCpu, "P_CPU", 5),
    (Column::PsiMem, "P_MEM", 5),
    (Column::PsiIo, "P_IO", 5),
    (Column::Pids, "TASKS", 5),
    (Column::NetRx, "NET_RX/s", 8),
    (Column::NetTx, "NET_TX/s", 8),
];

fn cell(g: &CgroupRate, col: Column) -> String {
    let mut s = String::new();
    let Some(v) = col.value(g) else {
        return "-".into();
    };
    match col {
        Column::Cpu | Column::Throttled | Column::PsiCpu | Column::PsiMem | Column::PsiIo => {
            s = format!("{v:.1}");
        }
        Column::Pids => s = format!("{v:.0}"),
        _ => {
            let _ = crate::human::bytes(&mut s, v);
        }
    }
    s
}

/// The table: a header, a row per line of the tree, and a note on hybrid layouts.
pub fn table(groups: &[CgroupRate], lines: &[TreeLine], layout: &str) -> String {
    let mut out = String::new();
    for (_, header, width) in COLS {
        out.push_str(&format!("{header:>width$} "));
    }
    out.push_str("CGROUP\n");
    for l in lines {
        let g = &groups[l.index];
        for (col, _, width) in COLS {
            out.push_str(&format!("{:>width$} ", cell(g, *col)));
        }
        let name = if g.path == "/" {
            "/"
        } else {
            g.path.rsplit('/').next().unwrap_or(&g.path)
        };
        let indent = (g.depth as usize).min(16) * 2;
        out.push_str(&format!(
            "{:indent$}{}",
            "",
            kernstat_model::text::printable(name)
        ));
        if g.truncated > 0 {
            out.push_str(&format!(
                "  (+{} groups below not read: in this one's figures)",
                g.truncated
            ));
        }
        out.push('\n');
    }
    if layout == "hybrid" {
        out.push_str(
            "(hybrid layout: memory, io and tasks are on cgroup v1 here; kernstat reads cgroup v2, so they show -)\n",
        );
    }
    out
}
