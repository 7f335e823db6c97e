//! The columns of a process row in CSV and Parquet, defined once: every field
//! `ps --json` has, the frame's time and interval, the storage rates and wall-clock
//! start and end. Both formats walk this list, so they cannot drift apart.

use kernstat_model::ps::PsRow;
use kernstat_model::rates::Rates;

/// One process in one frame, with what the frame adds.
pub struct Row<'a> {
    /// When the frame was taken, ns since the Unix epoch.
    pub time_unix_ns: u64,
    /// CLOCK_BOOTTIME then, ns (start and end times are on it).
    pub boot_ns: u64,
    /// Seconds since the frame before (the interval its rates are over; 0: none).
    pub interval_s: f64,
    /// The table row.
    pub ps: &'a PsRow,
    /// Its rates over the interval.
    pub rates: &'a Rates,
}

impl Row<'_> {
    /// A CLOCK_BOOTTIME time of this frame's as ns since the Unix epoch.
    fn wall(&self, boot_time_ns: u64) -> u64 {
        (self.time_unix_ns as i128 - self.boot_ns as i128 + boot_time_ns as i128).max(0) as u64
    }
}

/// What a column holds (its Parquet type; its CSV text).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// Unsigned 32 bits.
    U32,
    /// Unsigned 64 bits (None: empty / null).
    U64,
    /// Signed 32 bits (None: empty / null).
    I32,
    /// A float (None: empty / null).
    F64,
    /// Text.
    Text,
    /// True or false.
    Bool,
    /// A time, ns since the Unix epoch (None: empty / null).
    Time,
}

/// One cell.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Cell<'a> {
    /// See [`Kind::U32`].
    U32(u32),
    /// See [`Kind::U64`].
    U64(Option<u64>),
    /// See [`Kind::I32`].
    I32(Option<i32>),
    /// See [`Kind::F64`].
    F64(Option<f64>),
    /// See [`Kind::Text`].
    Text(&'a str),
    /// A state letter (text).
    Char(char),
    /// See [`Kind::Bool`].
    Bool(bool),
    /// See [`Kind::Time`].
    Time(Option<u64>),
}

/// A column: its name, kind, whether it may be empty, and its cell of a row.
pub struct Column {
    /// The name (as `ps --json` has it where it has it).
    pub name: &'static str,
    /// What it holds.
    pub kind: Kind,
    /// May be null (empty in CSV).
    pub nullable: bool,
    /// The cell of a row.
    pub cell: for<'a> fn(&Row<'a>) -> Cell<'a>,
}

const fn col(name: &'static str, kind: Kind, cell: for<'a> fn(&Row<'a>) -> Cell<'a>) -> Column {
    Column {
        name,
        kind,
        nullable: false,
        cell,
    }
}

const fn opt(name: &'static str, kind: Kind, cell: for<'a> fn(&Row<'a>) -> Cell<'a>) -> Column {
    Column {
        name,
        kind,
        nullable: true,
        cell,
    }
}

/// Every column, in order.
pub const COLUMNS: &[Column] = &[
    col("time", Kind::Time, |r| Cell::Time(Some(r.time_unix_ns))),
    col("interval_s", Kind::F64, |r| Cell::F64(Some(r.interval_s))),
    col("pid", Kind::U32, |r| Cell::U32(r.ps.pid)),
    col("tgid", Kind::U32, |r| Cell::U32(r.ps.tgid)),
    col("ppid", Kind::U32, |r| Cell::U32(r.ps.ppid)),
    col("uid", Kind::U32, |r| Cell::U32(r.ps.uid)),
    col("user", Kind::Text, |r| Cell::Text(&r.ps.user)),
    col("gid", Kind::U32, |r| Cell::U32(r.ps.gid)),
    col("state", Kind::Text, |r| Cell::Char(r.ps.state)),
    col("threads", Kind::U32, |r| Cell::U32(r.ps.threads)),
    col("nice", Kind::I32, |r| Cell::I32(Some(r.ps.nice))),
    col("priority", Kind::I32, |r| Cell::I32(Some(r.ps.priority))),
    col("cpu_percent", Kind::F64, |r| {
        Cell::F64(Some(r.ps.cpu_percent))
    }),
    col("cpu_ns", Kind::U64, |r| Cell::U64(Some(r.ps.cpu_ns))),
    col("rss_bytes", Kind::U64, |r| Cell::U64(Some(r.ps.rss_bytes))),
    col("vsz_bytes", Kind::U64, |r| Cell::U64(Some(r.ps.vsz_bytes))),
    col("start_ns", Kind::U64, |r| Cell::U64(Some(r.ps.start_ns))),
    col("start_time", Kind::Time, |r| {
        Cell::Time(Some(r.wall(r.ps.start_ns)))
    }),
    col("read_bytes", Kind::U64, |r| {
        Cell::U64(Some(r.ps.read_bytes))
    }),
    col("write_bytes", Kind::U64, |r| {
        Cell::U64(Some(r.ps.write_bytes))
    }),
    col("read_bps", Kind::F64, |r| Cell::F64(Some(r.rates.read_bps))),
    col("write_bps", Kind::F64, |r| {
        Cell::F64(Some(r.rates.write_bps))
    }),
    opt("net_rx_bps", Kind::F64, |r| Cell::F64(r.ps.net_rx_bps)),
    opt("net_tx_bps", Kind::F64, |r| Cell::F64(r.ps.net_tx_bps)),
    opt("exit_code", Kind::I32, |r| Cell::I32(r.ps.exit_code)),
    opt("end_ns", Kind::U64, |r| Cell::U64(r.ps.end_ns)),
    opt("end_time", Kind::Time, |r| {
        Cell::Time(r.ps.end_ns.map(|e| r.wall(e)))
    }),
    col("comm", Kind::Text, |r| Cell::Text(r.ps.comm.as_str())),
    col("cmd", Kind::Text, |r| Cell::Text(&r.ps.cmd)),
    col("cgroup", Kind::Text, |r| Cell::Text(&r.ps.cgroup)),
    col("kthread", Kind::Bool, |r| Cell::Bool(r.ps.kthread)),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_ps_json_field_is_a_column() {
        let row = PsRow {
            exit_code: Some(0),
            end_ns: Some(1),
            net_rx_bps: Some(0.0),
            net_tx_bps: Some(0.0),
            ..PsRow::default()
        };
        let v = serde_json::to_value(&row).unwrap();
        let names: Vec<&str> = COLUMNS.iter().map(|c| c.name).collect();
        for field in v.as_object().unwrap().keys() {
            assert!(names.contains(&field.as_str()), "{field} is not exported");
        }
    }

    #[test]
    fn cells_match_their_kinds() {
        let ps = PsRow::default();
        let rates = Rates::default();
        let row = Row {
            time_unix_ns: 10,
            boot_ns: 5,
            interval_s: 1.0,
            ps: &ps,
            rates: &rates,
        };
        for c in COLUMNS {
            let ok = matches!(
                ((c.cell)(&row), c.kind),
                (Cell::U32(_), Kind::U32)
                    | (Cell::U64(_), Kind::U64)
                    | (Cell::I32(_), Kind::I32)
                    | (Cell::F64(_), Kind::F64)
                    | (Cell::Text(_) | Cell::Char(_), Kind::Text)
                    | (Cell::Bool(_), Kind::Bool)
                    | (Cell::Time(_), Kind::Time)
            );
            assert!(ok, "{}", c.name);
        }
    }
}
