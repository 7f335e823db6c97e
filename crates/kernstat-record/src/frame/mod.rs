//! What one recorded moment holds: the machine's, every process's and every control
//! group's cumulative counters and readings as the kernel keeps them, and the processes
//! that ended since the moment before. No rate: every rate a replay shows is computed
//! by kernstat-model's rate engine over the interval between the two frames it reads, so
//! a recorded CPU % covers the time between frames, whatever the daemon's own interval.
//!
//! These types are the archive format (docs/recorder.md; serialised with postcard, which
//! is not self-describing): they are the archive's own, not the live model serialised,
//! so that changing what the views compute cannot change what old archives decode to.
//! Changing any field here changes the format: bump [`crate::VERSION`] and keep the old
//! types beside a reader for them (as `v1` does). The checked-in fixture
//! (tests/fixtures) fails the build when a change slips through.

use serde::{Deserialize, Serialize};

mod signals;
pub use signals::*;

pub mod bounded;
pub mod machine_only;
pub use machine_only::Omitted;

/// One recorded moment, as this version writes it.
pub type Frame = FrameOf<Proc>;

/// One recorded moment, with its processes of type `P` ([`Proc`]; an older format's
/// process record while an older file is read, see [`crate::v2`]).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(bound(deserialize = "P: Deserialize<'de>", serialize = "P: Serialize"))]
pub struct FrameOf<P> {
    /// When it was taken, ns since the Unix epoch.
    pub time_unix_ns: u64,
    /// CLOCK_BOOTTIME when the processes were read, ns (their start and exit times are on
    /// this clock, and process rates are over its differences).
    pub boot_ns: u64,
    /// The machine.
    pub machine: Machine,
    /// Every process, sorted by pid (those past the per-user bounds are in `summaries`).
    #[serde(deserialize_with = "bounded::procs")]
    pub procs: Vec<P>,
    /// Processes that ended since the frame before, in the order they ended.
    #[serde(deserialize_with = "bounded::others")]
    pub ended: Vec<Ended>,
    /// Exits the hook could not keep (its buffer was full) since the frame before.
    pub ended_lost: u64,
    /// The exit hook was loaded (else processes that lived between two frames are
    /// missing, and reaped children count on their parents).
    pub exits_hook: bool,
    /// Processes of one user past the bounds on what one user may add to a frame,
    /// summed (shared/security N2).
    #[serde(deserialize_with = "bounded::others")]
    pub summaries: Vec<UserSummary>,
    /// Control groups, parents first.
    #[serde(deserialize_with = "bounded::others")]
    pub groups: Vec<Group>,
    /// Where they were read: the mount, and "v2" or "hybrid".
    pub groups_mount: String,
    /// See `groups_mount`.
    pub groups_layout: String,
    /// Network interfaces.
    #[serde(deserialize_with = "bounded::others")]
    pub links: Vec<Link>,
    /// Block devices.
    #[serde(deserialize_with = "bounded::others")]
    pub disks: Vec<Disk>,
    /// Kernel histograms, cumulative since the recorder started.
    pub hists: Hists,
    /// Notable kernel events since the frame before (OOM kills).
    #[serde(deserialize_with = "bounded::others")]
    pub events: Vec<Event>,
    /// The TCP hooks were loaded (retransmits and connect latency recorded).
    pub tcp: bool,
    /// TCP segments retransmitted since the frame before, per process and peer (the 64
    /// largest).
    #[serde(deserialize_with = "bounded::others")]
    pub retransmits: Vec<Retransmit>,
    /// Read from a version-1 file: the machine's CPU % as the daemon had it (that format
    /// kept no busy counter). Never written.
    #[serde(skip)]
    pub v1_cpu_percent: Option<f64>,
    /// Read machine-only ([`crate::Cursor::machine_only`]): how many processes, ended
    /// processes and groups the frame listed (its lists are then empty). Never written.
    #[serde(skip)]
    pub omitted: Option<Omitted>,
}

/// The machine's counters and readings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// CLOCK_MONOTONIC when these were read, ns (machine rates are over its differences).
    pub mono_ns: u64,
    /// Online CPUs.
    pub ncpus: u32,
    /// The processes and busy time came from /proc (no BPF): busy time is /proc/stat's.
    pub procfs: bool,
    /// CPU time of every task, credited once each (BPF) or /proc/stat's busy fields, ns.
    pub busy_ns: u64,
    /// Per CPU, /proc/stat.
    pub cores: Vec<Core>,
    /// Memory, bytes.
    pub mem: Memory,
    /// Pages swapped in and out since boot, and the page size.
    pub swap_in_pages: u64,
    /// See `swap_in_pages`.
    pub swap_out_pages: u64,
    /// Bytes per page.
    pub page_size: u64,
    /// 1, 5, 15 minute load averages.
    pub load: [f64; 3],
    /// Pressure: cpu some, memory some and full, io some and full.
    pub psi: [Option<Psi>; 5],
    /// Tasks (threads), running, in uninterruptible sleep.
    pub tasks: u64,
    /// See `tasks`.
    pub running: u64,
    /// See `tasks`.
    pub blocked: u64,
    /// Socket payload bytes of all processes (ended ones included), [received, sent] by
    /// kind (tcp, udp, unix, other); None: not counted here.
    pub socket_bytes: Option<[[u64; 4]; 2]>,
    /// The kernel counters below (vm, tcp, softirqs, the frame's disks) were read.
    pub counters: bool,
    /// Softirqs run, by kind (kernstat-model's counters::SOFTIRQS), summed over CPUs.
    pub softirqs: [u64; 10],
    /// /proc/vmstat counters.
    pub vm: Vm,
    /// TCP counters (/proc/net/snmp and netstat).
    pub tcp: Tcp,
    /// Sensors and devices.
    pub hw: Hardware,
}

/// One CPU's times, ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Core {
    /// user + nice + system + irq + softirq + steal.
    pub busy_ns: u64,
    /// busy + idle + iowait.
    pub total_ns: u64,
    /// steal.
    pub steal_ns: u64,
    /// irq + softirq.
    pub irq_ns: u64,
}

/// Memory, bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    /// MemTotal (or the reader's cgroup limit, `from_cgroup`).
    pub total: u64,
    /// MemAvailable.
    pub available: u64,
    /// MemFree.
    pub free: u64,
    /// SwapTotal.
    pub swap_total: u64,
    /// SwapFree.
    pub swap_free: u64,
    /// `total` is the reader's cgroup's limit (inside a container).
    pub from_cgroup: bool,
}

/// One pressure line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Psi {
    /// The kernel's 10 s average, %.
    pub avg10: f32,
    /// Its 60 s average, %.
    pub avg60: f32,
    /// Stall time since boot, µs.
    pub total_us: u64,
}

/// /proc/vmstat counters, cumulative.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Vm {
    /// Page faults.
    pub pgfault: u64,
    /// Major page faults.
    pub pgmajfault: u64,
    /// Pages scanned by reclaim (kswapd and direct).
    pub pgscan: u64,
    /// Pages reclaimed.
    pub pgsteal: u64,
    /// Pages scanned in direct reclaim.
    pub pgscan_direct: u64,
    /// Processes the OOM killer killed.
    pub oom_kill: u64,
}

/// TCP counters, cumulative.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Tcp {
    /// Segments sent.
    pub out_segs: u64,
    /// Segments retransmitted.
    pub retrans_segs: u64,
    /// Connections opened actively (connect).
    pub active_opens: u64,
    /// Connect attempts that failed.
    pub attempt_fails: u64,
}

/// Sensors and devices, where present.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Hardware {
    /// CPU temperature, °C.
    pub temp_c: Option<f32>,
    /// CPU frequency, MHz.
    pub cpu_freq_mhz: Option<f32>,
    /// GPU busy, % (amdgpu).
    pub gpu_busy_percent: Option<f32>,
    /// GPU RC6 residency, ms (i915: busy comes from its rate).
    pub gpu_rc6_ms: Option<u64>,
    /// Battery charge, %.
    pub battery_percent: Option<f32>,
    /// Battery draw, W.
    pub battery_power_w: Option<f32>,
}

/// One process.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Proc {
    /// Process id.
    pub pid: u32,
    /// Parent's.
    pub ppid: u32,
    /// Real uid.
    pub uid: u32,
    /// Effective uid.
    pub euid: u32,
    /// Real gid.
    pub gid: u32,
    /// Start, CLOCK_BOOTTIME ns.
    pub start_ns: u64,
    /// The /proc state letter.
    pub state: u8,
    /// A kernel thread.
    pub kthread: bool,
    /// Threads.
    pub threads: u32,
    /// Nice value.
    pub nice: i32,
    /// Priority.
    pub prio: i32,
    /// CPU time of all its threads, live and exited, ns.
    pub cpu_ns: u64,
    /// CPU time of the children it reaped (cutime + cstime), ns.
    pub children_cpu_ns: u64,
    /// Time its live threads waited runnable for a CPU, ns.
    pub run_delay_ns: u64,
    /// Bytes read from storage.
    pub read_bytes: u64,
    /// Bytes written to storage.
    pub write_bytes: u64,
    /// Resident memory, bytes.
    pub rss_bytes: u64,
    /// Virtual size, bytes.
    pub vsz_bytes: u64,
    /// Minor and major page faults.
    pub minflt: u64,
    /// See `minflt`.
    pub majflt: u64,
    /// Socket payload bytes since counting started, [received, sent] by kind (tcp, udp,
    /// unix, other); None: not counted.
    pub net: Option<[[u64; 4]; 2]>,
    /// Command name.
    pub comm: String,
    /// Command line (`[comm]` for kernel threads; may be cut by the per-user bounds).
    pub cmd: String,
    /// Control group path (cgroup v2), "" when unknown.
    pub cgroup: String,
}

/// A process that ended, as the exit hook saw it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Ended {
    /// Process id.
    pub pid: u32,
    /// Parent's at the exit.
    pub ppid: u32,
    /// Real uid.
    pub uid: u32,
    /// Start and exit, CLOCK_BOOTTIME ns.
    pub start_ns: u64,
    /// See `start_ns`.
    pub exit_ns: u64,
    /// CPU time of every thread over its life, ns.
    pub cpu_ns: u64,
    /// Storage reads and writes over its life, bytes.
    pub read_bytes: u64,
    /// See `read_bytes`.
    pub write_bytes: u64,
    /// Peak resident set, bytes.
    pub maxrss_bytes: u64,
    /// Exit status as wait(2) encodes it.
    pub exit_code: i32,
    /// Socket bytes [received, sent] by kind at its last reading, where counted.
    pub net: Option<[[u64; 4]; 2]>,
    /// Command name.
    pub comm: String,
    /// Command line, when a frame saw it alive (else empty).
    pub cmd: String,
    /// Control group path, when known.
    pub cgroup: String,
}

/// One user's processes past the bounds, summed: counted, not listed.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct UserSummary {
    /// Their uid.
    pub uid: u32,
    /// Live processes not listed.
    pub processes: u32,
    /// Ended processes not listed.
    pub ended: u32,
    /// Their CPU time, ns (cumulative for live ones, whole lives for ended ones).
    pub cpu_ns: u64,
    /// Their resident memory, bytes.
    pub rss_bytes: u64,
    /// Command-line bytes cut from this user's listed processes.
    pub cmd_bytes_cut: u64,
}

/// One control group.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Group {
    /// Path below the hierarchy's root.
    pub path: String,
    /// Its id (the directory's inode).
    pub id: u64,
    /// Depth (0: the root).
    pub depth: u32,
    /// CLOCK_MONOTONIC when its cpu.stat was read, ns.
    pub read_ns: u64,
    /// cpu.stat: usage, user, system µs.
    pub cpu_usage_us: u64,
    /// See `cpu_usage_us`.
    pub cpu_user_us: u64,
    /// See `cpu_usage_us`.
    pub cpu_system_us: u64,
    /// Quota periods and throttled ones, throttled µs (with a quota).
    pub periods: Option<u64>,
    /// See `periods`.
    pub throttled_periods: Option<u64>,
    /// See `periods`.
    pub throttled_us: Option<u64>,
    /// cpu.max quota and period, µs.
    pub cpu_max_us: Option<u64>,
    /// See `cpu_max_us`.
    pub cpu_period_us: Option<u64>,
    /// cpu.weight.
    pub cpu_weight: Option<u64>,
    /// memory.current (None: no memory controller).
    pub mem_current: Option<u64>,
    /// memory.max and memory.high.
    pub mem_max: Option<u64>,
    /// See `mem_max`.
    pub mem_high: Option<u64>,
    /// memory.events oom, oom_kill, high.
    pub mem_oom: u64,
    /// See `mem_oom`.
    pub mem_oom_kill: u64,
    /// See `mem_oom`.
    pub mem_high_events: u64,
    /// io.stat per device.
    pub io: Option<Vec<GroupIo>>,
    /// pids.current and pids.max.
    pub pids: Option<u64>,
    /// See `pids`.
    pub pids_max: Option<u64>,
    /// Pressure: cpu some/full, memory some/full, io some/full.
    pub psi: [Option<Psi>; 6],
    /// Child groups not read (past the reader's bounds).
    pub truncated: u32,
}

/// One device's line of a group's io.stat.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupIo {
    /// Device numbers.
    pub major: u32,
    /// See `major`.
    pub minor: u32,
    /// Bytes read and written.
    pub rbytes: u64,
    /// See `rbytes`.
    pub wbytes: u64,
    /// Reads and writes.
    pub rios: u64,
    /// See `rios`.
    pub wios: u64,
}

/// One network interface, cumulative.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Link {
    /// Its name.
    pub name: String,
    /// It carries the default route.
    pub is_default: bool,
    /// Received and sent: bytes, packets, errors, drops.
    pub rx: [u64; 4],
    /// See `rx`.
    pub tx: [u64; 4],
}

/// One block device, /proc/diskstats, cumulative.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Disk {
    /// Its name (sda, nvme0n1, loop3).
    pub name: String,
    /// Major and minor numbers.
    pub major: u32,
    /// See `major`.
    pub minor: u32,
    /// Reads and writes completed.
    pub reads: u64,
    /// See `reads`.
    pub writes: u64,
    /// Sectors read and written (512 bytes each).
    pub read_sectors: u64,
    /// See `read_sectors`.
    pub write_sectors: u64,
    /// Time spent reading and writing, ms.
    pub read_ms: u64,
    /// See `read_ms`.
    pub write_ms: u64,
    /// Time the device had I/O in flight, ms (utilisation).
    pub io_ms: u64,
    /// Weighted time in queue, ms (queue depth).
    pub queue_ms: u64,
    /// Requests in flight now.
    pub in_flight: u64,
}

impl kernstat_model::rates::ProcessCounters for Proc {
    fn pid(&self) -> u32 {
        self.pid
    }
    fn start_ns(&self) -> u64 {
        self.start_ns
    }
    fn ppid(&self) -> u32 {
        self.ppid
    }
    fn cpu_ns(&self) -> u64 {
        self.cpu_ns
    }
    fn children_cpu_ns(&self) -> u64 {
        self.children_cpu_ns
    }
    fn read_bytes(&self) -> u64 {
        self.read_bytes
    }
    fn write_bytes(&self) -> u64 {
        self.write_bytes
    }
    fn net_bytes(&self) -> Option<(u64, u64)> {
        self.net.map(total)
    }
    fn faults(&self) -> (u64, u64) {
        (self.minflt, self.majflt)
    }
}

impl kernstat_model::rates::ProcessCounters for Ended {
    fn pid(&self) -> u32 {
        self.pid
    }
    fn start_ns(&self) -> u64 {
        self.start_ns
    }
    fn ppid(&self) -> u32 {
        self.ppid
    }
    fn cpu_ns(&self) -> u64 {
        self.cpu_ns
    }
    fn read_bytes(&self) -> u64 {
        self.read_bytes
    }
    fn write_bytes(&self) -> u64 {
        self.write_bytes
    }
    fn net_bytes(&self) -> Option<(u64, u64)> {
        self.net.map(total)
    }
}

/// (received, sent) over every kind.
pub fn total(n: [[u64; 4]; 2]) -> (u64, u64) {
    (n[0].iter().sum(), n[1].iter().sum())
}

impl<P> FrameOf<P> {
    /// The same frame with each process turned by `f` (an older format's records into
    /// this one's).
    pub fn map_procs<Q>(self, f: impl FnMut(P) -> Q) -> FrameOf<Q> {
        FrameOf {
            time_unix_ns: self.time_unix_ns,
            boot_ns: self.boot_ns,
            machine: self.machine,
            procs: self.procs.into_iter().map(f).collect(),
            ended: self.ended,
            ended_lost: self.ended_lost,
            exits_hook: self.exits_hook,
            summaries: self.summaries,
            groups: self.groups,
            groups_mount: self.groups_mount,
            groups_layout: self.groups_layout,
            links: self.links,
            disks: self.disks,
            hists: self.hists,
            events: self.events,
            tcp: self.tcp,
            retransmits: self.retransmits,
            v1_cpu_percent: self.v1_cpu_percent,
            omitted: self.omitted,
        }
    }
}

impl Frame {
    /// Makes every text the archive's writer (or whoever handed the archive over)
    /// controls safe to show: control characters as spaces (kernstat-model's one rule),
    /// so that a forged command line cannot drive the terminal `ps --at` prints on.
    pub fn sanitize(&mut self) {
        fn clean(s: &mut String) {
            if let std::borrow::Cow::Owned(c) = kernstat_model::text::printable(s) {
                *s = c;
            }
        }
        for p in &mut self.procs {
            clean(&mut p.comm);
            clean(&mut p.cmd);
            clean(&mut p.cgroup);
        }
        for e in &mut self.ended {
            clean(&mut e.comm);
            clean(&mut e.cmd);
            clean(&mut e.cgroup);
        }
        for g in &mut self.groups {
            clean(&mut g.path);
        }
        for l in &mut self.links {
            clean(&mut l.name);
        }
        for d in &mut self.disks {
            clean(&mut d.name);
        }
        for w in &mut self.hists.writes {
            clean(&mut w.syscall);
            clean(&mut w.kind);
        }
        for b in &mut self.hists.biolat {
            clean(&mut b.disk);
            clean(&mut b.op);
        }
        for r in &mut self.retransmits {
            clean(&mut r.comm);
            clean(&mut r.cgroup);
            clean(&mut r.peer);
        }
        for ev in &mut self.events {
            match ev {
                Event::OomKill {
                    comm,
                    group,
                    limit,
                    killer_comm,
                    growers,
                    ..
                } => {
                    clean(comm);
                    clean(group);
                    clean(limit);
                    clean(killer_comm);
                    for g in growers.iter_mut() {
                        clean(&mut g.1);
                    }
                }
            }
        }
    }
}
