//! CSV: a header of [`COLUMNS`], then one line per process per frame. Times in local
//! RFC 3339 (what a spreadsheet and DuckDB both parse); every text cell through
//! [`csv_field`], so that no control byte and no formula reaches a spreadsheet.

use std::borrow::Cow;
use std::io::Write;

use crate::columns::{Cell, Row, COLUMNS};
use crate::{Error, FrameRows, Sink};

pub(crate) struct Csv<W: Write> {
    out: W,
    line: String,
}

impl<W: Write> Csv<W> {
    pub(crate) fn new(mut out: W) -> Result<Self, Error> {
        let names: Vec<&str> = COLUMNS.iter().map(|c| c.name).collect();
        writeln!(out, "{}", names.join(","))?;
        Ok(Csv {
            out,
            line: String::new(),
        })
    }
}

/// A float as text: at most three decimals, no trailing zeros.
pub(crate) fn decimal(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".into()
    } else {
        s.into()
    }
}

/// A text cell: control characters as spaces (the one rule of every output), quoted
/// where it holds a comma, a quote or a line break, and a cell a spreadsheet would
/// take for a formula (starting with =, +, -, @) made text with a leading apostrophe
/// (OWASP's advice against CSV injection).
pub fn csv_field(s: &str) -> Cow<'_, str> {
    let s = kernstat_model::text::printable(s);
    let formula = s.starts_with(['=', '+', '-', '@']);
    if !formula && !s.contains([',', '"']) {
        return s;
    }
    let body = if formula {
        format!("'{s}")
    } else {
        s.into_owned()
    };
    if body.contains([',', '"']) {
        format!("\"{}\"", body.replace('"', "\"\"")).into()
    } else {
        body.into()
    }
}

fn push_cell(line: &mut String, cell: Cell<'_>) {
    use std::fmt::Write as _;
    let _ = match cell {
        Cell::U32(v) => write!(line, "{v}"),
        Cell::U64(Some(v)) => write!(line, "{v}"),
        Cell::I32(Some(v)) => write!(line, "{v}"),
        Cell::F64(Some(v)) => write!(line, "{}", decimal(v)),
        Cell::Text(t) => write!(line, "{}", csv_field(t)),
        Cell::Char(c) => write!(line, "{}", csv_field(c.encode_utf8(&mut [0; 4]))),
        Cell::Bool(b) => write!(line, "{b}"),
        Cell::Time(Some(t)) => write!(line, "{}", kernstat_record::time::local_stamp(t)),
        Cell::U64(None) | Cell::I32(None) | Cell::F64(None) | Cell::Time(None) => Ok(()),
    };
}

impl<W: Write> Sink for Csv<W> {
    fn frame(&mut self, f: &FrameRows<'_>) -> Result<(), Error> {
        for (ps, rates) in f.rows {
            let row = Row {
                time_unix_ns: f.frame.time_unix_ns,
                boot_ns: f.frame.boot_ns,
                interval_s: f.interval_s,
                ps,
                rates,
            };
            self.line.clear();
            for (i, c) in COLUMNS.iter().enumerate() {
                if i > 0 {
                    self.line.push(',');
                }
                push_cell(&mut self.line, (c.cell)(&row));
            }
            self.line.push('\n');
            self.out.write_all(self.line.as_bytes())?;
        }
        Ok(())
    }

    fn finish(&mut self) -> Result<(), Error> {
        self.out.flush()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_what_needs_it() {
        assert_eq!(csv_field("plain"), "plain");
        assert_eq!(csv_field("=cmd|' /C calc'!A0"), "'=cmd|' /C calc'!A0");
        assert_eq!(csv_field("-x,y"), "\"'-x,y\"");
        assert_eq!(csv_field("a\u{1b}]0;T\u{7}b"), "a ]0;T b");
        assert_eq!(csv_field("a,b \"c\""), "\"a,b \"\"c\"\"\"");
        assert_eq!(csv_field("two\nlines"), "two lines");
    }

    #[test]
    fn decimals() {
        assert_eq!(decimal(12.5), "12.5");
        assert_eq!(decimal(3.0), "3");
        assert_eq!(decimal(0.0004), "0");
        assert_eq!(decimal(1.23456), "1.235");
    }
}
