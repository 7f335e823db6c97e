//! The reporting loop of the tracing commands (`runqlat`, `writes`): wait for the next
//! interval (or, without one, for Ctrl-C), report, and stop after a count or a signal.
//! A stop signal during a wait ends the wait at once, and the interval cut short is
//! still reported, so nothing traced is left unsaid.

use std::time::{Duration, Instant};

use crate::signals::{Signals, Wake};

/// Parses seconds like "2", "0.5", "1.5s", "500ms".
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let (num, scale) = if let Some(v) = s.strip_suffix("ms") {
        (v, 1e-3)
    } else if let Some(v) = s.strip_suffix('s') {
        (v, 1.0)
    } else {
        (s, 1.0)
    };
    let secs: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?} is not a duration (seconds, e.g. 2, 0.5 or 500ms)"))?;
    let secs = secs * scale;
    if !(0.01..=86_400.0).contains(&secs) {
        return Err(format!("{s:?}: the interval must be between 10ms and 24h"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A list of intervals, e.g. "1,2,5".
#[derive(Clone, Debug, PartialEq)]
pub struct Intervals(pub Vec<Duration>);

impl Intervals {
    /// Parses a comma-separated list of [`parse_duration`]s.
    pub fn parse(s: &str) -> Result<Intervals, String> {
        s.split(',')
            .map(|p| parse_duration(p.trim()))
            .collect::<Result<Vec<_>, _>>()
            .map(Intervals)
    }
}

/// Seconds since the Unix epoch, now (the `timestamp` of the tracing commands' JSON).
pub fn epoch_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// The local time as HH:MM:SS (the `-T` header libbpf-tools prints above a report).
pub fn clock() -> String {
    let now = epoch_s() as i64;
    // SAFETY: localtime_r writes into the tm we pass.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        let t: libc::time_t = now as libc::time_t;
        libc::localtime_r(&t, &mut tm);
        tm
    };
    format!("{:02}:{:02}:{:02}", tm.tm_hour, tm.tm_min, tm.tm_sec)
}

/// Paces reports.
pub struct Ticker<'a> {
    signals: &'a Signals,
    every: Option<Duration>,
    count: Option<u64>,
    reported: u64,
    last: Instant,
}

/// One report's turn.
#[derive(Clone, Copy, Debug)]
pub struct Tick {
    /// Seconds since the previous report (or the start).
    pub seconds: f64,
    /// This is the last report: a stop signal came, or the count is reached.
    pub last: bool,
}

impl<'a> Ticker<'a> {
    /// Reports every `every` (None: once, at a stop signal), at most `count` times.
    pub fn new(signals: &'a Signals, every: Option<Duration>, count: Option<u64>) -> Self {
        Ticker {
            signals,
            every,
            count,
            reported: 0,
            last: Instant::now(),
        }
    }

    /// Waits for the next report's turn.
    pub fn wait(&mut self) -> Tick {
        let stopped = match self.every {
            Some(d) => {
                let deadline = self.last + d;
                loop {
                    let now = Instant::now();
                    if now >= deadline {
                        break false;
                    }
                    if self.signals.wait(deadline - now) == Wake::Stop {
                        break true;
                    }
                }
            }
            None => loop {
                if self.signals.wait(Duration::from_secs(3600)) == Wake::Stop {
                    break true;
                }
            },
        };
        let now = Instant::now();
        let seconds = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        self.reported += 1;
        Tick {
            seconds,
            last: stopped || self.count.is_some_and(|c| self.reported >= c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("2"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("0").is_err());
        assert!(parse_duration("fast").is_err());
    }
}
