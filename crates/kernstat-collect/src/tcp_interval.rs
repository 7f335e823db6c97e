//! TCP retransmits per process over the interval of a view: the hooks attached at its
//! start, the retransmits taken out of their map at each end (so an interval holds
//! exactly those since the previous read), attributed to the process that owns each
//! socket. `ps --fields retrans` reads one interval; `top` one per refresh.

use std::collections::HashMap;
use std::time::Instant;

use kernstat_bpf::loader::LoadError;
use kernstat_bpf::tcp::Tcp;
use kernstat_sources::cgroup::CgroupPaths;

/// Retransmits per process over an interval.
pub struct TcpInterval {
    tcp: Tcp,
    groups: Option<CgroupPaths>,
    /// Segments retransmitted in the last interval, per owning process (0: unknown).
    per_pid: HashMap<u32, u64>,
    dt: f64,
    /// When the current interval started.
    at: Instant,
}

impl TcpInterval {
    /// Attaches the hooks.
    pub fn load() -> Result<Self, LoadError> {
        Ok(TcpInterval {
            tcp: Tcp::load()?,
            groups: None,
            per_pid: HashMap::new(),
            dt: 0.0,
            at: Instant::now(),
        })
    }

    /// Attaches the hooks; says on stderr why not when the column was asked for.
    pub fn start(no_bpf: bool, asked: bool) -> Option<Self> {
        let why = if no_bpf {
            "--no-bpf".to_string()
        } else {
            match Self::load() {
                Ok(t) => return Some(t),
                Err(e) => e.summary(),
            }
        };
        if asked {
            eprintln!("kernstat: TCP retransmits unavailable ({why}); their column shows -");
        }
        None
    }

    /// Starts an interval: what the hooks counted before it is dropped.
    pub fn read_first(&mut self) {
        let _ = self.tcp.take_retransmits();
        self.per_pid.clear();
        self.at = Instant::now();
    }

    /// Ends the interval now and starts the next (a view that refreshes).
    pub fn refresh(&mut self) {
        let now = Instant::now();
        self.read_second(now.duration_since(self.at).as_secs_f64());
        self.at = now;
    }

    /// Ends the interval, `dt` seconds after it started: its retransmits, by owner.
    /// A failed read leaves the interval empty.
    pub fn read_second(&mut self, dt: f64) {
        self.per_pid.clear();
        self.dt = dt;
        let Ok(mut sockets) = self.tcp.take_retransmits() else {
            return;
        };
        crate::tcp_owners::attribute(&mut sockets, &mut self.groups);
        for s in &sockets {
            *self.per_pid.entry(s.pid).or_default() += s.count;
        }
    }

    /// Segments retransmitted in the interval by process `pid`'s sockets.
    pub fn count(&self, pid: u32) -> u64 {
        self.per_pid.get(&pid).copied().unwrap_or(0)
    }

    /// The same per second (zero for a process that retransmitted nothing).
    pub fn rate(&self, pid: u32) -> f64 {
        if self.dt > 0.0 {
            self.count(pid) as f64 / self.dt
        } else {
            0.0
        }
    }
}
