//! Per-process network over the interval of a one-shot command: the hooks attached at
//! its start, their counters read at the interval's two ends.

use kernstat_bpf::net::Net;
use kernstat_model::net::{proc_rates, NetSample};

/// Per-process network over a one-shot command's interval (`ps`, `cgroups`): the hooks
/// attached before the first read, their counters read at its start and end. Processes are joined by pid (the task
/// rows' start times are CLOCK_BOOTTIME, the counters' CLOCK_MONOTONIC), the newest
/// process of a pid when it was reused within the interval.
pub struct NetInterval {
    net: Net,
    first: NetSample,
    second: NetSample,
    dt: f64,
}

impl NetInterval {
    /// Attaches the hooks; says on stderr why not when the columns were asked for.
    pub fn start(no_bpf: bool, asked: bool) -> Option<Self> {
        let why = if no_bpf {
            "--no-bpf".to_string()
        } else {
            match Net::load(false) {
                Ok(net) => {
                    return Some(NetInterval {
                        net,
                        first: NetSample::default(),
                        second: NetSample::default(),
                        dt: 0.0,
                    })
                }
                Err(e) => e.summary(),
            }
        };
        if asked {
            eprintln!("kernstat: per-process network unavailable ({why}); its columns show -");
        }
        None
    }

    /// Reads the counters at the interval's start.
    pub fn read_first(&mut self) {
        if self.net.read(&mut self.first, |_, _| true).is_err() {
            self.first.procs.clear();
        }
    }

    /// Reads them at its end, `dt` seconds later.
    pub fn read_second(&mut self, dt: f64) {
        if self.net.read(&mut self.second, |_, _| true).is_err() {
            self.second.procs.clear();
        }
        self.dt = dt;
    }

    /// Makes the end of this interval the start of the next (a view that reads again).
    pub fn shift(&mut self) {
        std::mem::swap(&mut self.first, &mut self.second);
    }

    /// (received, sent) bytes per second of process `pid` (zero if it used no socket).
    pub fn rates(&self, pid: u32) -> (Option<f64>, Option<f64>) {
        let newest = self.second.procs.iter().rfind(|p| p.pid == pid);
        let (rx, tx) = match newest {
            Some(p) => {
                let before = self.first.get(p.pid, p.start_ns).map(|b| &b.counters);
                proc_rates(&p.counters, before, self.dt)
            }
            None => (0.0, 0.0),
        };
        (Some(rx), Some(tx))
    }
}
