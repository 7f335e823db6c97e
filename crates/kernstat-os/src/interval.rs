//! The reporting loop of the tracing commands (`runqlat`, `writes`): wait for the next
//! interval (or, without one, for Ctrl-C), report, and stop after a count or a signal.
//! A stop signal during a wait ends the wait at once, and the interval cut short is
//! still reported, so nothing traced is left unsaid.

use std::time::{Duration, Instant};

use crate::signals::{Signals, Wake};

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
