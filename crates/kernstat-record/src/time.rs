//! Times as people give them to `--at`, `--from` and `--to` ("03:12", "-10m", RFC 3339,
//! a local date and time, @epoch) and as the replays show them (RFC 3339 in local time),
//! and the ages retention takes ("7d").

use std::time::Duration;

/// `7d`, `36h`, `90m`: an age for retention.
pub fn parse_age(s: &str) -> Result<Duration, String> {
    let unit = s.chars().last().unwrap_or(' ');
    let scale = match unit {
        's' => 1,
        'm' => 60,
        'h' => 3600,
        'd' => 86_400,
        _ => {
            return Err(format!(
                "{s:?}: an age is a number and s, m, h or d (e.g. 7d)"
            ))
        }
    };
    let n: u64 = s[..s.len() - 1]
        .parse()
        .map_err(|_| format!("{s:?}: an age is a number and s, m, h or d (e.g. 7d)"))?;
    if n == 0 {
        return Err(format!("{s:?}: keep something (more than 0)"));
    }
    Ok(Duration::from_secs(n * scale))
}

/// A time as `--at`, `--from` and `--to` take it, in ns since the Unix epoch.
pub fn parse_time(s: &str, now: jiff::Zoned) -> Result<u64, String> {
    let bad = || {
        format!(
            "{s:?} is not a time: use 03:12 (today), -10m (ago: s, m, h, d), 2026-11-25T03:12:00Z, \"2026-11-25 03:12\" or @EPOCH_SECONDS"
        )
    };
    let s = s.trim();
    let to_ns = |ts: jiff::Timestamp| u64::try_from(ts.as_nanosecond()).map_err(|_| bad());
    if s == "now" {
        return to_ns(now.timestamp());
    }
    if let Some(epoch) = s.strip_prefix('@') {
        // Seconds since the Unix epoch, as `date +%s` prints them.
        let secs: f64 = epoch.parse().map_err(|_| bad())?;
        return Ok((secs.max(0.0) * 1e9) as u64);
    }
    if let Some(ago) = s.strip_prefix('-') {
        let age = parse_age(ago).map_err(|_| bad())?;
        let ns = to_ns(now.timestamp())?;
        return Ok(ns.saturating_sub(age.as_nanos() as u64));
    }
    if let Ok(ts) = s.parse::<jiff::Timestamp>() {
        return to_ns(ts);
    }
    // A local date and time: "2026-11-25 03:12", "2026-11-25T03:12:30".
    if let Ok(dt) = s.parse::<jiff::civil::DateTime>() {
        let z = dt.to_zoned(now.time_zone().clone()).map_err(|_| bad())?;
        return to_ns(z.timestamp());
    }
    // A time of day: today's, or yesterday's when today's is still to come.
    if let Ok(t) = s.parse::<jiff::civil::Time>() {
        let today = now.date().to_datetime(t);
        let mut z = today.to_zoned(now.time_zone().clone()).map_err(|_| bad())?;
        if z.timestamp() > now.timestamp() {
            z = z.yesterday().map_err(|_| bad())?;
        }
        return to_ns(z.timestamp());
    }
    Err(bad())
}

/// RFC 3339 in local time, for people: "2026-11-25T03:12:05+01:00".
pub fn local_stamp(unix_ns: u64) -> String {
    match jiff::Timestamp::from_nanosecond(unix_ns as i128) {
        Ok(ts) => ts
            .to_zoned(jiff::tz::TimeZone::system())
            .strftime("%Y-%m-%dT%H:%M:%S%.3f%:z")
            .to_string(),
        Err(_) => unix_ns.to_string(),
    }
}

/// A length of time as people say it: "40 ms", "15 s", "5 min", "2 h".
pub fn span_text(ns: u64) -> String {
    let s = ns as f64 / 1e9;
    if s < 1.0 {
        format!("{:.0} ms", s * 1e3)
    } else if s < 120.0 {
        format!("{s:.0} s")
    } else if s < 7200.0 {
        format!("{:.0} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> jiff::Zoned {
        "2026-11-25T09:30:00+01:00[Europe/Paris]".parse().unwrap()
    }

    fn stamp(s: &str) -> u64 {
        s.parse::<jiff::Timestamp>().unwrap().as_nanosecond() as u64
    }

    #[test]
    fn times_people_type() {
        assert_eq!(
            parse_time("03:12", now()).unwrap(),
            stamp("2026-11-25T02:12:00Z")
        );
        assert_eq!(
            parse_time("23:00", now()).unwrap(),
            stamp("2026-11-24T22:00:00Z"),
            "a time still to come today is yesterday's"
        );
        assert_eq!(
            parse_time("-10m", now()).unwrap(),
            stamp("2026-11-25T08:20:00Z")
        );
        assert_eq!(
            parse_time("-2h", now()).unwrap(),
            stamp("2026-11-25T06:30:00Z")
        );
        assert_eq!(
            parse_time("2026-11-25T03:12:00Z", now()).unwrap(),
            stamp("2026-11-25T03:12:00Z")
        );
        assert_eq!(
            parse_time("2026-11-25 03:12", now()).unwrap(),
            stamp("2026-11-25T02:12:00Z")
        );
        assert!(parse_time("yesterday-ish", now())
            .unwrap_err()
            .contains("is not a time"));
        assert!(parse_time("-10x", now()).is_err());
        assert_eq!(
            parse_time("@1764000000", now()).unwrap(),
            1_764_000_000_000_000_000
        );
    }
}
