//! The process table: chosen columns, aligned, fitted to the terminal width (the command
//! column takes what is left and is cut), optionally as a parent/child forest.

use std::collections::HashMap;
use std::fmt::Write;

use kernstat_model::ps::PsRow;

use crate::human;

/// A column of `kernstat ps`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Column {
    /// Process (or thread) id.
    Pid,
    /// Parent process id.
    Ppid,
    /// User name.
    User,
    /// Numeric uid.
    Uid,
    /// Numeric gid.
    Gid,
    /// State letter.
    State,
    /// Thread count.
    Threads,
    /// Nice value.
    Nice,
    /// Priority.
    Pri,
    /// CPU percent.
    Cpu,
    /// CPU time.
    Time,
    /// Resident memory.
    Rss,
    /// Virtual size.
    Vsz,
    /// Start time.
    Start,
    /// Storage bytes read.
    Read,
    /// Storage bytes written.
    Write,
    /// Command name.
    Comm,
    /// Command line.
    Cmd,
    /// cgroup path.
    Cgroup,
    /// Network bytes received per second (over --interval).
    NetRx,
    /// Network bytes sent per second.
    NetTx,
    /// TCP segments retransmitted per second (over --interval).
    Retrans,
}

/// Every column: name for --fields and --sort, header, meaning.
pub const COLUMNS: &[(&str, Column, &str, &str)] = &[
    (
        "pid",
        Column::Pid,
        "PID",
        "process id (thread id with --threads)",
    ),
    ("ppid", Column::Ppid, "PPID", "parent process id"),
    ("user", Column::User, "USER", "user name of the real uid"),
    ("uid", Column::Uid, "UID", "real uid"),
    ("gid", Column::Gid, "GID", "real gid"),
    ("state", Column::State, "S", "state: R S D T t X Z P I"),
    ("threads", Column::Threads, "THR", "threads"),
    ("nice", Column::Nice, "NI", "nice value"),
    (
        "pri",
        Column::Pri,
        "PRI",
        "priority (/proc/PID/stat field 18)",
    ),
    (
        "cpu",
        Column::Cpu,
        "%CPU",
        "CPU %: over the process's life, or over --interval",
    ),
    (
        "time",
        Column::Time,
        "TIME",
        "CPU time of all threads, live and exited",
    ),
    ("rss", Column::Rss, "RSS", "resident memory"),
    ("vsz", Column::Vsz, "VSZ", "virtual size"),
    ("start", Column::Start, "START", "start time"),
    ("read", Column::Read, "READ", "storage bytes read"),
    ("write", Column::Write, "WRITE", "storage bytes written"),
    ("comm", Column::Comm, "COMM", "command name"),
    (
        "cmd",
        Column::Cmd,
        "COMMAND",
        "command line ([comm] for kernel threads)",
    ),
    ("cgroup", Column::Cgroup, "CGROUP", "cgroup v2 path"),
    (
        "netrx",
        Column::NetRx,
        "NET_RX/s",
        "socket payload bytes received per second, over --interval (needs BPF)",
    ),
    (
        "nettx",
        Column::NetTx,
        "NET_TX/s",
        "socket payload bytes sent per second, over --interval (needs BPF)",
    ),
    (
        "retrans",
        Column::Retrans,
        "RETR/s",
        "TCP segments its sockets retransmitted per second, over --interval (needs BPF)",
    ),
];

/// The default columns.
pub const DEFAULT_COLUMNS: &str = "pid,ppid,user,state,threads,nice,cpu,time,rss,start,cmd";

/// Parses a comma-separated column list.
pub fn parse_columns(s: &str) -> Result<Vec<Column>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| column_by_name(p).ok_or_else(|| unknown(p)))
        .collect::<Result<Vec<_>, _>>()
        .and_then(|v| {
            if v.is_empty() {
                Err("no columns given".into())
            } else {
                Ok(v)
            }
        })
}

/// The column called `name`.
pub fn column_by_name(name: &str) -> Option<Column> {
    COLUMNS.iter().find(|c| c.0 == name).map(|c| c.1)
}

fn unknown(name: &str) -> String {
    let names: Vec<&str> = COLUMNS.iter().map(|c| c.0).collect();
    format!("unknown column {name:?}; columns: {}", names.join(","))
}

fn header(c: Column) -> &'static str {
    COLUMNS
        .iter()
        .find(|x| x.1 == c)
        .map(|x| x.2)
        .unwrap_or("?")
}

/// Display width in characters (one per char; ASCII fast path).
fn display_len(s: &str) -> usize {
    if s.is_ascii() {
        s.len()
    } else {
        s.chars().count()
    }
}

fn right_aligned(c: Column) -> bool {
    !matches!(
        c,
        Column::User | Column::State | Column::Comm | Column::Cmd | Column::Cgroup | Column::Start
    )
}

/// CPU time as ps prints it: [DD-]HH:MM:SS.
pub fn write_cputime(out: &mut String, ns: u64) -> std::fmt::Result {
    let s = ns / 1_000_000_000;
    let (d, h, m, s) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    if d > 0 {
        write!(out, "{d}-{h:02}:{m:02}:{s:02}")
    } else {
        write!(out, "{h:02}:{m:02}:{s:02}")
    }
}

/// How start times are shown: the wall-clock time at boot and today's date.
pub trait StartFormat {
    /// Formats a start time given in ns after boot.
    fn format(&self, start_ns: u64) -> String;
}

/// The integer a column shows, for columns that show one.
fn int_value(r: &PsRow, c: Column) -> Option<i64> {
    Some(match c {
        Column::Pid => r.pid as i64,
        Column::Ppid => r.ppid as i64,
        Column::Uid => r.uid as i64,
        Column::Gid => r.gid as i64,
        Column::Threads => r.threads as i64,
        Column::Nice => r.nice as i64,
        Column::Pri => r.priority as i64,
        _ => return None,
    })
}

/// Characters in the decimal form of `v`.
fn int_len(v: i64) -> usize {
    let mut n = v.unsigned_abs();
    let mut len = (v < 0) as usize + 1;
    while n >= 10 {
        n /= 10;
        len += 1;
    }
    len
}

/// Writes one cell into `out` (appending). Integers go through itoa: at 10,000 rows,
/// core::fmt's integer path was the largest userspace cost of `kernstat ps`.
fn write_cell(out: &mut String, r: &PsRow, c: Column, start: &dyn StartFormat) {
    if let Some(v) = int_value(r, c) {
        out.push_str(itoa::Buffer::new().format(v));
        return;
    }
    let _ = match c {
        Column::Pid
        | Column::Ppid
        | Column::Uid
        | Column::Gid
        | Column::Threads
        | Column::Nice
        | Column::Pri => Ok(()),
        Column::User => {
            out.push_str(&r.user);
            Ok(())
        }
        Column::State => {
            out.push(r.state);
            Ok(())
        }
        Column::Cpu => write!(out, "{:.1}", r.cpu_percent),
        Column::Time => write_cputime(out, r.cpu_ns),
        Column::Rss => human::bytes(out, r.rss_bytes as f64),
        Column::Vsz => human::bytes(out, r.vsz_bytes as f64),
        Column::Start => {
            out.push_str(&start.format(r.start_ns));
            Ok(())
        }
        Column::Read => human::bytes(out, r.read_bytes as f64),
        Column::Write => human::bytes(out, r.write_bytes as f64),
        Column::Comm => {
            out.push_str(r.comm.as_str());
            Ok(())
        }
        Column::Cmd => {
            out.push_str(&r.cmd);
            Ok(())
        }
        Column::Cgroup => {
            out.push_str(&r.cgroup);
            Ok(())
        }
        Column::NetRx | Column::NetTx => {
            let v = if c == Column::NetRx {
                r.net_rx_bps
            } else {
                r.net_tx_bps
            };
            match v {
                Some(v) => human::bytes(out, v),
                // Not counted (no BPF): a dash, never a zero that was not measured.
                None => {
                    out.push('-');
                    Ok(())
                }
            }
        }
        Column::Retrans => match r.tcp_retrans_per_s {
            Some(v) => write!(out, "{v:.1}"),
            None => {
                out.push('-');
                Ok(())
            }
        },
    };
}

/// Orders rows as a forest: children under their parent, prefixed with tree lines in
/// the first of the Comm/Cmd columns. Returns (row index, prefix) in display order;
/// siblings keep the order they have in `rows`.
pub fn forest(rows: &[PsRow]) -> Vec<(usize, String)> {
    let index: HashMap<u32, usize> = rows.iter().enumerate().map(|(i, r)| (r.pid, i)).collect();
    let mut children: HashMap<u32, Vec<usize>> = HashMap::new();
    let mut roots = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        if r.ppid != r.pid && index.contains_key(&r.ppid) {
            children.entry(r.ppid).or_default().push(i);
        } else {
            roots.push(i);
        }
    }
    let mut out = Vec::with_capacity(rows.len());
    fn walk(
        i: usize,
        prefix: &str,
        last: bool,
        root: bool,
        rows: &[PsRow],
        children: &HashMap<u32, Vec<usize>>,
        out: &mut Vec<(usize, String)>,
    ) {
        let me = if root {
            String::new()
        } else {
            format!("{prefix}{}", if last { "└─ " } else { "├─ " })
        };
        out.push((i, me));
        let below = if root {
            String::new()
        } else {
            format!("{prefix}{}", if last { "   " } else { "│  " })
        };
        if let Some(kids) = children.get(&rows[i].pid) {
            for (k, &c) in kids.iter().enumerate() {
                walk(c, &below, k + 1 == kids.len(), false, rows, children, out);
            }
        }
    }
    for &r in &roots {
        walk(r, "", true, true, rows, &children, &mut out);
    }
    out
}

/// Renders the table. `width` is the terminal width (None: do not cut lines).
///
/// Two passes over the rows, formatting each cell into one reused buffer: the first
/// measures column widths, the second writes. No per-cell allocation (at 10,000 rows a
/// String per cell was the largest cost of `kernstat ps`).
pub fn render(
    rows: &[PsRow],
    cols: &[Column],
    tree: bool,
    width: Option<usize>,
    start: &dyn StartFormat,
) -> String {
    let order: Vec<(usize, String)> = if tree {
        forest(rows)
    } else {
        (0..rows.len()).map(|i| (i, String::new())).collect()
    };
    let tree_col = cols
        .iter()
        .position(|c| matches!(c, Column::Cmd | Column::Comm));
    let mut cell = String::with_capacity(256);
    let fill = |cell: &mut String, i: usize, k: usize, prefix: &str| {
        cell.clear();
        if Some(k) == tree_col {
            cell.push_str(prefix);
        }
        write_cell(cell, &rows[i], cols[k], start);
    };
    let mut widths: Vec<usize> = cols.iter().map(|&c| header(c).chars().count()).collect();
    for (i, prefix) in &order {
        for (k, w) in widths.iter_mut().enumerate() {
            // The last column is never padded: no need to measure it.
            if k + 1 == cols.len() {
                break;
            }
            let len = match int_value(&rows[*i], cols[k]) {
                Some(v) if Some(k) != tree_col => int_len(v),
                _ => {
                    fill(&mut cell, *i, k, prefix);
                    display_len(&cell)
                }
            };
            *w = (*w).max(len);
        }
    }
    let mut out = String::with_capacity((order.len() + 1) * 64);
    let mut line = String::with_capacity(256);
    let mut emit =
        |out: &mut String, line: &mut String, texts: &mut dyn FnMut(usize, &mut String)| {
            line.clear();
            for (k, &c) in cols.iter().enumerate() {
                if k > 0 {
                    line.push(' ');
                }
                let mut text = std::mem::take(&mut cell);
                texts(k, &mut text);
                let pad = widths[k].saturating_sub(display_len(&text));
                if right_aligned(c) {
                    line.extend(std::iter::repeat_n(' ', pad));
                    line.push_str(&text);
                } else {
                    line.push_str(&text);
                    if k + 1 < cols.len() {
                        line.extend(std::iter::repeat_n(' ', pad));
                    }
                }
                cell = text;
            }
            let end = match width {
                Some(w) if line.is_ascii() => w.min(line.len()),
                Some(w) => line
                    .char_indices()
                    .nth(w)
                    .map(|(b, _)| b)
                    .unwrap_or(line.len()),
                None => line.len(),
            };
            out.push_str(line[..end].trim_end());
            out.push('\n');
        };
    emit(&mut out, &mut line, &mut |k, t| {
        t.clear();
        t.push_str(header(cols[k]));
    });
    for (i, prefix) in &order {
        emit(&mut out, &mut line, &mut |k, t| fill(t, *i, k, prefix));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed;
    impl StartFormat for Fixed {
        fn format(&self, _: u64) -> String {
            "10:00".into()
        }
    }

    fn row(pid: u32, ppid: u32, cmd: &str) -> PsRow {
        PsRow {
            pid,
            ppid,
            user: "root".into(),
            state: 'S',
            cmd: cmd.into(),
            ..Default::default()
        }
    }

    #[test]
    fn columns_parse_and_complain() {
        assert_eq!(
            parse_columns("pid, cmd").unwrap(),
            vec![Column::Pid, Column::Cmd]
        );
        assert!(parse_columns("pid,bogus").unwrap_err().contains("bogus"));
        assert!(parse_columns("").is_err());
        assert!(parse_columns(DEFAULT_COLUMNS).is_ok());
    }

    #[test]
    fn aligned_and_cut_to_width() {
        let rows = vec![
            row(1, 0, "/sbin/init splash"),
            row(1234, 1, "a-very-long-command-line-indeed"),
        ];
        let t = render(
            &rows,
            &[Column::Pid, Column::User, Column::Cmd],
            false,
            Some(20),
            &Fixed,
        );
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], " PID USER COMMAND");
        assert_eq!(lines[1], "   1 root /sbin/init");
        assert_eq!(lines[2].chars().count(), 20);
    }

    #[test]
    fn forest_nests_children() {
        let rows = vec![
            row(1, 0, "init"),
            row(2, 1, "a"),
            row(3, 2, "b"),
            row(4, 1, "c"),
            row(9, 77, "orphan"),
        ];
        let t = render(&rows, &[Column::Pid, Column::Cmd], true, None, &Fixed);
        let lines: Vec<&str> = t.lines().skip(1).collect();
        assert_eq!(
            lines,
            vec![
                "  1 init",
                "  2 ├─ a",
                "  3 │  └─ b",
                "  4 └─ c",
                "  9 orphan"
            ]
        );
    }

    #[test]
    fn cpu_time_format() {
        let f = |ns| {
            let mut s = String::new();
            write_cputime(&mut s, ns).unwrap();
            s
        };
        assert_eq!(f(0), "00:00:00");
        assert_eq!(f(3_723_000_000_000), "01:02:03");
        assert_eq!(f(90_123_000_000_000), "1-01:02:03");
    }
}
