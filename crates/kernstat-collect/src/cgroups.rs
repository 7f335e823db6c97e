//! Control groups over an interval, as `kernstat cgroups` and top's cgroup view show
//! them: the hierarchy read (within the reader's bounds) at each call, each group's rates
//! since the call before, and, where the network hooks load, each group's processes'
//! socket bytes summed into it and its ancestors (kernstat-model's cgroup_tree).

use std::io;
use std::time::Instant;

use kernstat_model::cgroup::{rates, CgroupRate, CgroupTree};
use kernstat_model::cgroup_tree::{add_network, ProcessNet};
use kernstat_sources::cgroup::{CgroupBounds, CgroupReader, CgroupWant};
use kernstat_sources::{Roots, Want};

use crate::net_interval::NetInterval;
use crate::tasks::TaskSource;

/// What to read.
#[derive(Clone, Copy, Debug, Default)]
pub struct CgroupOptions {
    /// Groups at most this deep (None: all).
    pub depth: Option<u32>,
    /// memory.stat's breakdown too (the dearest file).
    pub memory_stat: bool,
    /// Groups read at most (shallow first).
    pub max_groups: Option<usize>,
    /// Count per-group network (loads the network hooks).
    pub network: bool,
    /// No BPF at all.
    pub no_bpf: bool,
}

/// The hierarchy and, optionally, the network counters, read again at each call.
pub struct CgroupSampler {
    reader: CgroupReader,
    opts: CgroupOptions,
    prev: Option<CgroupTree>,
    net: Option<NetInterval>,
    at: Option<Instant>,
    tasks: Option<TaskSource>,
}

impl CgroupSampler {
    /// Opens the cgroup v2 hierarchy mounted here (an error says there is none).
    pub fn open(opts: CgroupOptions) -> io::Result<Self> {
        let reader = CgroupReader::open(&Roots::default()).ok_or_else(|| {
            io::Error::other("no cgroup v2 hierarchy is mounted here (see /proc/self/mounts)")
        })?;
        let reader = match opts.max_groups {
            Some(n) => reader.with_bounds(CgroupBounds {
                max_groups: n.max(1),
                max_children: (n / 4).max(16),
            }),
            None => reader,
        };
        let net = if opts.network {
            NetInterval::start(opts.no_bpf, false)
        } else {
            None
        };
        Ok(CgroupSampler {
            reader,
            opts,
            prev: None,
            net,
            at: None,
            tasks: None,
        })
    }

    /// The reader (for `--bench`).
    pub fn reader(&mut self) -> &mut CgroupReader {
        &mut self.reader
    }

    /// Every group's rates since the previous call (the first call: an empty interval),
    /// and the hierarchy's layout ("v2" or "hybrid").
    pub fn read(&mut self) -> io::Result<(Vec<CgroupRate>, String)> {
        let want = CgroupWant {
            memory_stat: self.opts.memory_stat,
        };
        let now = self.reader.read(want, self.opts.depth)?;
        let dt = self.at.map_or(0.0, |t| t.elapsed().as_secs_f64());
        self.at = Some(Instant::now());
        if let Some(n) = self.net.as_mut() {
            if self.prev.is_none() {
                n.read_first();
            } else {
                n.read_second(dt);
            }
        }
        let before = self.prev.take().unwrap_or_else(|| CgroupTree {
            taken_ns: now.taken_ns,
            ..now.clone()
        });
        let mut groups = rates(&before, &now);
        let layout = now.layout.clone();
        self.prev = Some(now);
        if dt > 0.0 && self.net.is_some() {
            self.add_network(&mut groups)?;
        }
        if let Some(n) = self.net.as_mut() {
            // The next interval starts at this reading.
            n.shift();
        }
        Ok((groups, layout))
    }

    fn add_network(&mut self, groups: &mut [CgroupRate]) -> io::Result<()> {
        let Some(net) = &self.net else {
            return Ok(());
        };
        if self.tasks.is_none() {
            self.tasks = Some(
                TaskSource::open_repeated(self.opts.no_bpf, &crate::tasks::pin_dir(), false)
                    .map_err(|e| io::Error::other(e.to_string()))?,
            );
        }
        let want = Want {
            cmdline: false,
            cgroup: true,
        };
        let mut extra = None;
        let tasks = self
            .tasks
            .as_mut()
            .expect("opened above")
            .read(false, want, &mut extra)?;
        add_network(
            groups,
            tasks.iter().filter_map(|t| {
                let (Some(rx), Some(tx)) = net.rates(t.pid) else {
                    return None;
                };
                Some(ProcessNet {
                    cgroup_id: t.cgroup_id,
                    cgroup_path: t.cgroup_path.as_deref(),
                    rx_bps: rx,
                    tx_bps: tx,
                })
            }),
        );
        Ok(())
    }
}
