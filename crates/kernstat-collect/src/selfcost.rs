//! `--self-cost`: what kernstat costs the machine, measured by kernstat.
//!
//! Two parts, both exact counters: this process's CPU time (CLOCK_PROCESS_CPUTIME_ID,
//! the scheduler's sum_exec_runtime over all threads, which includes the iterator program
//! that runs inside our read(2)), and the run time of our BPF programs that run in other
//! tasks' context (the exit and free hooks), from the kernel's BPF statistics. Statistics
//! are switched on only while this flag is used, because they add two clock reads to
//! every BPF program run on the machine.

use kernstat_bpf::stats::{prog_run_time, RunTimeStats};
use kernstat_bpf::Sampler;

use kernstat_os::process_cpu_ns;

/// Tracks kernstat's own cost between calls to `measure`.
pub struct SelfCost {
    _stats: Option<RunTimeStats>,
    last: Option<(u64, u64, u64)>,
    /// Why BPF program time is not included, if it is not.
    pub bpf_unavailable: Option<String>,
}

fn hooks_run_time(sampler: Option<&Sampler>) -> Option<u64> {
    let s = sampler?;
    let mut total = 0;
    for p in s.hook_programs() {
        total += prog_run_time(p).ok()?.run_time_ns;
    }
    Some(total)
}

impl SelfCost {
    /// Starts measuring; turns BPF statistics on when a sampler is loaded.
    pub fn start(sampler: Option<&Sampler>) -> Self {
        let (stats, why) = match sampler {
            None => (None, None),
            Some(_) => match RunTimeStats::enable() {
                Ok(s) => (Some(s), None),
                Err(e) => (None, Some(format!("BPF statistics unavailable: {e}"))),
            },
        };
        SelfCost {
            _stats: stats,
            last: None,
            bpf_unavailable: why,
        }
    }

    /// Cost since the previous call, in percent of one core; `None` on the first call.
    pub fn measure(&mut self, sampler: Option<&Sampler>, wall_ns: u64) -> Option<f64> {
        let own = process_cpu_ns();
        let bpf = if self.bpf_unavailable.is_none() {
            hooks_run_time(sampler).unwrap_or(0)
        } else {
            0
        };
        let prev = self.last.replace((wall_ns, own, bpf))?;
        let dt = wall_ns.saturating_sub(prev.0);
        if dt == 0 {
            return None;
        }
        let used = own.saturating_sub(prev.1) + bpf.saturating_sub(prev.2);
        Some(used as f64 / dt as f64 * 100.0)
    }
}
