//! One collector for every command that samples the machine: the BPF sampler when it can
//! be loaded, procfs otherwise (or with `--no-bpf`), plus the machine-wide procfs files,
//! the sysfs hardware readers, the network links and, where BPF allows, the per-process
//! network counters. It fills a `RawSample` in place, without allocating
//! once its buffers have grown.

use std::io;

use kernstat_bpf::net::Net;
use kernstat_bpf::{LoadError, Sampler};
use kernstat_model::{RawSample, Source};
use kernstat_sources::cgroup::{CgroupBounds, CgroupReader, CgroupWant};
use kernstat_sources::{
    monotonic_ns, HardwareReader, LinkReader, ProcfsTasks, Roots, SystemReader, TempSource,
};

/// How to collect.
#[derive(Clone, Debug, Default)]
pub struct CollectOptions {
    /// Never try BPF.
    pub no_bpf: bool,
    /// Which sensor is the CPU temperature.
    pub temp: TempSource,
    /// Where /proc and /sys are.
    pub roots: Roots,
    /// Read no process at all (a bar whose template shows none): the machine's files
    /// only, no BPF program loaded.
    pub machine_only: bool,
}

enum Tasks {
    Bpf(Box<Sampler>),
    Procfs(ProcfsTasks),
    /// No process is read: what a view that shows none needs (a text bar of `{cpu}%
    /// {mem_used}` sampled in 103 µs at 72 tasks with the task walk, almost all of it
    /// the walk: docs/measured.md).
    Machine,
}

/// Fills raw samples.
pub struct Collector {
    tasks: Tasks,
    system: SystemReader,
    hardware: HardwareReader,
    links: Option<LinkReader>,
    net: Option<Net>,
    cgroups: Option<(CgroupReader, Option<u32>)>,
    counters: Option<kernstat_sources::counters::CountersReader>,
    tcp: Option<(
        kernstat_bpf::tcp::Tcp,
        Option<kernstat_sources::cgroup::CgroupPaths>,
    )>,
    /// Why BPF is not used, if it is not.
    pub fallback_reason: Option<String>,
    /// Why per-process network is not counted, if it is not.
    pub net_unavailable: Option<String>,
    /// The last read of the network counters failed (said once until one succeeds).
    net_failed: bool,
}

impl Collector {
    /// Opens every source. BPF failures are not errors: the collector falls back to procfs
    /// and says why in `fallback_reason`. Missing /proc files are errors.
    pub fn open(opts: &CollectOptions) -> io::Result<Self> {
        let system = SystemReader::open(&opts.roots)?;
        let hardware = HardwareReader::discover(&opts.roots, &opts.temp);
        let (mut tasks, fallback_reason) = if opts.machine_only {
            (Tasks::Machine, None)
        } else if opts.no_bpf {
            (
                Tasks::Procfs(ProcfsTasks::open(&opts.roots)?),
                Some("--no-bpf".to_string()),
            )
        } else {
            match Sampler::load() {
                Ok(s) => (Tasks::Bpf(Box::new(s)), None),
                Err(e) => (
                    Tasks::Procfs(ProcfsTasks::open(&opts.roots)?),
                    Some(describe(&e)),
                ),
            }
        };
        let (net, net_unavailable) = if opts.no_bpf {
            (None, Some("--no-bpf".to_string()))
        } else if opts.machine_only {
            (None, None)
        } else {
            // With the BPF sampler, its walk reads the live processes' counters too.
            let share = match &tasks {
                Tasks::Bpf(s) => Some(s.net_storage()),
                Tasks::Procfs(_) | Tasks::Machine => None,
            };
            match Net::load_with(false, share) {
                Ok(n) => {
                    if let Tasks::Bpf(s) = &mut tasks {
                        s.read_net(true);
                    }
                    (Some(n), None)
                }
                Err(e) => (None, Some(describe(&e))),
            }
        };
        Ok(Collector {
            tasks,
            system,
            hardware,
            links: LinkReader::open(&opts.roots),
            net,
            cgroups: None,
            counters: None,
            tcp: None,
            fallback_reason,
            net_unavailable,
            net_failed: false,
        })
    }

    /// Reads the cgroup v2 hierarchy too, `depth` levels below its root (None: all) and
    /// at most `max_groups` groups, at every sample; nothing where cgroup v2 is not
    /// mounted.
    pub fn with_cgroups(&mut self, roots: &Roots, depth: Option<u32>, max_groups: usize) {
        let bounds = CgroupBounds {
            max_groups,
            max_children: (max_groups / 4).max(16),
        };
        self.cgroups = CgroupReader::open(roots).map(|r| (r.with_bounds(bounds), depth));
    }

    /// Reads the kernel's own counters too at every sample (/proc/softirqs, vmstat,
    /// net/snmp, diskstats: ~40 µs), for the daemon and the recorder.
    pub fn with_counters(&mut self, roots: &Roots) {
        self.counters = Some(kernstat_sources::counters::CountersReader::open(roots));
    }

    /// Loads the TCP hooks (retransmits, connect latency) and reads them at every
    /// sample; false when they cannot be loaded (no BPF, no tp_btf).
    pub fn with_tcp(&mut self) -> bool {
        if self.source() == Source::Procfs {
            return false;
        }
        match kernstat_bpf::tcp::Tcp::load() {
            Ok(t) => {
                self.tcp = Some((t, None));
                true
            }
            Err(_) => false,
        }
    }

    /// The TCP hooks, when loaded.
    pub fn tcp(&self) -> Option<&kernstat_bpf::tcp::Tcp> {
        self.tcp.as_ref().map(|t| &t.0)
    }

    /// What to say once on stderr about the sources in use: BPF unavailable (and why),
    /// or BPF working without the network hooks; None when all is well or the user asked
    /// for /proc (`no_bpf_asked`).
    pub fn notice(&self, no_bpf_asked: bool) -> Option<String> {
        match (self.source(), &self.fallback_reason, &self.net_unavailable) {
            (Source::Procfs, Some(why), _) if !no_bpf_asked => Some(format!(
                "BPF unavailable ({why}); reading /proc instead (\"source\": \"procfs\")"
            )),
            (Source::Procfs, _, _) => None,
            // BPF works but not the network hooks (a kernel with neither the socket
            // tracepoints nor BPF trampolines): links only.
            (_, _, Some(why)) => Some(format!(
                "per-process network unavailable ({why}); links only"
            )),
            _ => None,
        }
    }

    /// The per-process network counter, when loaded.
    pub fn net(&self) -> Option<&Net> {
        self.net.as_ref()
    }

    /// Which mechanism reads the tasks.
    pub fn source(&self) -> Source {
        match self.tasks {
            Tasks::Bpf(_) => Source::Bpf,
            // The machine's figures, read from /proc.
            Tasks::Procfs(_) | Tasks::Machine => Source::Procfs,
        }
    }

    /// The BPF sampler, when used.
    pub fn sampler(&self) -> Option<&Sampler> {
        match &self.tasks {
            Tasks::Bpf(s) => Some(s),
            Tasks::Procfs(_) | Tasks::Machine => None,
        }
    }

    /// Takes one sample into `out`.
    pub fn sample(&mut self, out: &mut RawSample) -> io::Result<()> {
        let totals = self.system.read(&mut out.sys)?;
        self.hardware.read(&mut out.sys.hw);
        match &mut self.tasks {
            Tasks::Bpf(s) => {
                let walk = s.sample(&mut out.tasks).map_err(io::Error::other)?;
                out.source = Source::Bpf;
                out.sys.busy_ns = walk.busy_ns;
                out.sys.taken_ns = walk.ktime_ns;
            }
            Tasks::Procfs(_) | Tasks::Machine => {
                match &mut self.tasks {
                    Tasks::Procfs(p) => p.read(&mut out.tasks)?,
                    _ => out.tasks.clear(),
                }
                out.source = Source::Procfs;
                out.tasks.running = totals.running;
                out.tasks.blocked = totals.blocked;
                // /proc/PID/* cannot see tasks that exited between samples, so machine
                // busy time comes from /proc/stat's busy fields here.
                out.sys.busy_ns = totals.busy_ns;
                out.sys.taken_ns = monotonic_ns();
            }
        }
        self.sample_net(out);
        if let Some(c) = &mut self.counters {
            c.read(&mut out.kernel);
        }
        out.tcp.present = false;
        if let Some((t, paths)) = &mut self.tcp {
            out.tcp.present = true;
            out.tcp.retransmits = t.take_retransmits().unwrap_or_default();
            crate::tcp_owners::attribute(&mut out.tcp.retransmits, paths);
            if let Ok(h) = t.connect_hist() {
                out.tcp.connect = h;
            }
        }
        out.cgroups.groups.clear();
        if let Some((reader, depth)) = &mut self.cgroups {
            // A hierarchy that cannot be read leaves no groups, not a failed sample.
            if let Ok(tree) = reader.read(CgroupWant::default(), *depth) {
                out.cgroups = tree;
            }
        }
        Ok(())
    }

    /// Stops reading what a view does not show: the interfaces' counters
    /// (/proc/net/dev) unless `links`, the per-process network map (and its hooks,
    /// detached) unless `processes`.
    pub fn keep_network(&mut self, links: bool, processes: bool) {
        if !links {
            self.links = None;
        }
        if !processes {
            self.net = None;
            if let Tasks::Bpf(s) = &mut self.tasks {
                s.read_net(false);
            }
        }
    }

    /// Links and per-process network. Neither can fail the sample: a links file that
    /// cannot be read leaves no links, a map that cannot be read no per-process figures.
    fn sample_net(&mut self, out: &mut RawSample) {
        out.net.clear();
        if let Some(l) = &mut self.links {
            if l.read(&mut out.net.links).is_err() {
                out.net.links.clear();
            }
        }
        let Some(net) = &mut self.net else {
            return;
        };
        // Start times join exactly when the tasks come from BPF (the same clock); from
        // /proc they are clock ticks, so a pid alone says whether the process lives.
        let tasks = &out.tasks;
        let exact = out.source == Source::Bpf;
        let alive =
            |pid: u32, start: u64| tasks.get(pid).is_some_and(|p| !exact || p.start == start);
        let read = match &self.tasks {
            Tasks::Bpf(s) => net.read_with(&mut out.net, alive, s.net_records()),
            Tasks::Procfs(_) | Tasks::Machine => net.read(&mut out.net, alive),
        };
        if let Err(e) = read {
            if !self.net_failed {
                eprintln!("kernstat: per-process network: reading the counters failed ({e}); shown as missing until a read succeeds");
                self.net_failed = true;
            }
            out.net.attribution = None;
            out.net.procs.clear();
        } else {
            self.net_failed = false;
        }
    }
}

fn describe(e: &LoadError) -> String {
    match e {
        LoadError::Failed { what, source, .. } => format!("{what}: {source}"),
        other => other.to_string(),
    }
}
