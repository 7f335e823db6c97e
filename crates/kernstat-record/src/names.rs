//! The archive's file names: one file per UTC hour, `YYYYMMDDTHH.ksr`, and when the
//! writer starts another within the hour (the current one passed its share of the size
//! budget, or it could not be appended to), `YYYYMMDDTHH.N.ksr`; and the lock.

/// The writer's lock file in the archive directory.
pub const LOCK: &str = "lock";

const HOUR_NS: u64 = 3_600_000_000_000;

/// One archive file's place: its hour (Unix ns of its start) and its part in the hour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Place {
    /// Start of the hour, ns since the Unix epoch.
    pub hour: u64,
    /// 0 for the hour's first file.
    pub part: u32,
}

impl Place {
    /// The file's name.
    pub fn name(self) -> String {
        let ts = jiff::Timestamp::from_nanosecond(self.hour as i128)
            .unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        let stem = ts.strftime("%Y%m%dT%H").to_string();
        if self.part == 0 {
            format!("{stem}.ksr")
        } else {
            format!("{stem}.{}.ksr", self.part)
        }
    }

    /// When its hour ends.
    pub fn hour_end(self) -> u64 {
        self.hour + HOUR_NS
    }
}

/// The hour a sample taken at `unix_ns` goes to (part 0).
pub fn place_of(unix_ns: u64) -> Place {
    Place {
        hour: unix_ns - unix_ns % HOUR_NS,
        part: 0,
    }
}

/// The file a sample taken at `unix_ns` goes to, in its hour's first part.
pub fn file_name(unix_ns: u64) -> String {
    place_of(unix_ns).name()
}

/// The place a file name stands for (None: not an archive file).
pub fn parse(name: &str) -> Option<Place> {
    let stem = name.strip_suffix(".ksr")?;
    let (hour, part) = match stem.split_once('.') {
        Some((h, p)) if !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()) => {
            (h, p.parse().ok()?)
        }
        Some(_) => return None,
        None => (stem, 0),
    };
    if hour.len() != 11 {
        return None;
    }
    let dt = jiff::civil::DateTime::strptime("%Y%m%dT%H", hour).ok()?;
    let ts = dt.to_zoned(jiff::tz::TimeZone::UTC).ok()?.timestamp();
    Some(Place {
        hour: u64::try_from(ts.as_nanosecond()).ok()?,
        part,
    })
}

/// The hour a file holds, as Unix ns of its start (None: not an archive file name).
pub fn file_hour(name: &str) -> Option<u64> {
    parse(name).map(|p| p.hour)
}

/// Whether a directory entry's name is one an archive holds (its files and its lock):
/// what a recorder may take over with the directory.
pub fn is_archive_entry(name: &str) -> bool {
    parse(name).is_some() || name == LOCK
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hours_and_parts_round_trip() {
        let t = 1_795_700_380_573_195_096u64;
        let p = place_of(t);
        assert_eq!(p.name(), "20261126T13.ksr");
        assert_eq!(parse("20261126T13.ksr"), Some(p));
        let second = Place { part: 2, ..p };
        assert_eq!(second.name(), "20261126T13.2.ksr");
        assert_eq!(parse(&second.name()), Some(second));
        assert!(p < second);
        for bad in [
            "20261126T13.x.ksr",
            "2026112613.ksr",
            "20261126T13..ksr",
            "lock",
        ] {
            assert_eq!(parse(bad), None, "{bad}");
        }
        assert!(is_archive_entry("lock"));
    }
}
