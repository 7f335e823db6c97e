//! Raw samples: what a source (the BPF sampler, or procfs and sysfs) saw at one instant.
//!
//! Everything here is a cumulative counter or an instantaneous reading; nothing is a
//! rate. Rates need two samples and live in [`crate::model`]. Keeping the two apart means
//! the sources never do arithmetic across time and the model never does I/O.
//!
//! The types are sized once and reused: a sampling loop fills the same `RawSample` again
//! and again without allocating (vectors are cleared, never dropped).

use serde::{Deserialize, Serialize};

use crate::text::ShortStr;

/// Which mechanism produced a sample.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Source {
    /// The BPF task iterator and exit hooks.
    #[default]
    Bpf,
    /// /proc and /sys files only.
    Procfs,
}

impl Source {
    /// The name used in `--json` output.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Bpf => "bpf",
            Source::Procfs => "procfs",
        }
    }
}

/// A task's command name (`comm`, at most 15 bytes plus NUL in the kernel).
pub type Comm = ShortStr<16>;
/// A task's name as /proc shows it: a kernel thread's full name can be longer than comm
/// (up to 63 bytes), so `ps` carries this, while the bar's hot path keeps [`Comm`].
pub type TaskName = ShortStr<64>;

/// One process (thread group) as a source saw it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProcSample {
    /// Process id (thread group id).
    pub pid: u32,
    /// When the process started, in the source's own unit. With `pid` it names one process
    /// even after the pid is reused: a sample whose `start` differs is a different process.
    pub start: u64,
    /// CPU time of all threads, live and exited, in nanoseconds.
    pub cpu_ns: u64,
    /// Bytes this process caused to be read from storage (/proc/PID/io read_bytes).
    pub read_bytes: u64,
    /// Bytes this process caused to be written to storage (/proc/PID/io write_bytes).
    pub write_bytes: u64,
    /// Resident set size in bytes (file + anon + shmem pages).
    pub rss_bytes: u64,
    /// The /proc state letter of the process (its leader thread): R S D T t X Z P I.
    pub state: u8,
    /// Some thread of the process is in uninterruptible sleep (D).
    pub has_d_thread: bool,
    /// A kernel thread.
    pub kthread: bool,
    /// Command name.
    pub comm: Comm,
    /// Real uid.
    pub uid: u32,
    /// Effective uid: a process whose uids differ (setuid) is nobody's but root's to
    /// inspect, as /proc/PID/io's ptrace rule has it.
    pub euid: u32,
    /// Parent's pid.
    pub ppid: u32,
    /// CPU time of the children it reaped (cutime + cstime), ns.
    pub children_cpu_ns: u64,
    /// Time its live threads waited runnable for a CPU, ns (0 where not read).
    pub run_delay_ns: u64,
}

impl crate::rates::ProcessCounters for ProcSample {
    fn pid(&self) -> u32 {
        self.pid
    }
    fn start_ns(&self) -> u64 {
        self.start
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
}

impl ProcSample {
    /// Whether `viewer` may see this process's I/O and network counters: root, or the
    /// user it runs as (real and effective uid), as /proc/PID/io allows.
    pub fn counters_visible_to(&self, viewer: Viewer) -> bool {
        viewer.may_see(self.uid, self.euid)
    }

    /// In uninterruptible sleep (the process or one of its threads).
    pub fn is_blocked(&self) -> bool {
        self.state == b'D' || self.has_d_thread
    }

    /// A zombie: exited, not yet reaped by its parent.
    pub fn is_zombie(&self) -> bool {
        self.state == b'Z'
    }
}

/// Who is looking at per-process I/O and network counters (shared/security N4: the
/// kernel shows /proc/PID/io only to the process's own user and root, since
/// CVE-2011-2495: byte counts leak the lengths of typed passwords).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Viewer {
    /// Root, or a view only its owner reads: every counter.
    #[default]
    Everyone,
    /// A user: their own processes' counters only.
    Uid(u32),
    /// Anyone at all (a world-readable snapshot, /metrics): no process's counters.
    Nobody,
}

impl Viewer {
    /// Whether this viewer may see the counters of a process with these uids.
    pub fn may_see(self, uid: u32, euid: u32) -> bool {
        match self {
            Viewer::Everyone => true,
            Viewer::Uid(0) => true,
            Viewer::Uid(v) => uid == v && euid == v,
            Viewer::Nobody => false,
        }
    }
}

/// All processes, plus task counts over every thread.
#[derive(Clone, Debug, Default)]
pub struct TaskTable {
    /// One entry per process, sorted by pid after [`TaskTable::finish`].
    pub procs: Vec<ProcSample>,
    /// Tasks (threads) seen.
    pub tasks: u64,
    /// Tasks in state R.
    pub running: u64,
    /// Tasks in state D.
    pub blocked: u64,
}

impl TaskTable {
    /// Empties the table, keeping its capacity.
    pub fn clear(&mut self) {
        self.procs.clear();
        self.tasks = 0;
        self.running = 0;
        self.blocked = 0;
    }

    /// Sorts by pid so that the model can look processes up by binary search.
    pub fn finish(&mut self) {
        self.procs.sort_unstable_by_key(|p| p.pid);
    }

    /// The process with this pid, if present (the table must be finished).
    pub fn get(&self, pid: u32) -> Option<&ProcSample> {
        self.procs
            .binary_search_by_key(&pid, |p| p.pid)
            .ok()
            .map(|i| &self.procs[i])
    }
}

/// Busy and total time of one CPU, in nanoseconds, as /proc/stat's cpuN line counts them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CoreTimes {
    /// user + nice + system + irq + softirq + steal.
    pub busy_ns: u64,
    /// busy + idle + iowait.
    pub total_ns: u64,
}

/// Memory, from /proc/meminfo, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct MemInfo {
    /// MemTotal.
    pub total: u64,
    /// MemAvailable: what can be allocated without swapping.
    pub available: u64,
    /// MemFree.
    pub free: u64,
    /// SwapTotal.
    pub swap_total: u64,
    /// SwapFree.
    pub swap_free: u64,
    /// Where `total` comes from: the machine's RAM, or the limit of the reader's cgroup
    /// when one is set below it (a container).
    pub total_source: MemTotalSource,
}

/// Where a memory total comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemTotalSource {
    /// /proc/meminfo's MemTotal.
    #[default]
    Machine,
    /// The reader's cgroup's memory limit (memory.max, or v1 memory.limit_in_bytes),
    /// with its usage as what is used.
    Cgroup,
}

/// One pressure-stall line (/proc/pressure/*): the 10 s average and the cumulative total.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PsiLine {
    /// Percentage of the last 10 s that tasks were stalled.
    pub avg10: f32,
    /// Percentage of the last 60 s.
    pub avg60: f32,
    /// Total stall time in microseconds since boot.
    pub total_us: u64,
}

/// Pressure stall information; `None` where the kernel lacks the file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Psi {
    /// Some tasks stalled on CPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_some: Option<PsiLine>,
    /// Some tasks stalled on memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_some: Option<PsiLine>,
    /// All non-idle tasks stalled on memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub memory_full: Option<PsiLine>,
    /// Some tasks stalled on I/O.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io_some: Option<PsiLine>,
    /// All non-idle tasks stalled on I/O.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io_full: Option<PsiLine>,
}

/// Which GPU driver a reading came from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GpuDriver {
    /// Intel i915 (busy from RC6 residency).
    #[default]
    I915,
    /// AMD amdgpu (busy from gpu_busy_percent).
    Amdgpu,
}

/// One GPU reading.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct GpuSample {
    /// Which driver's files were read.
    pub driver: GpuDriver,
    /// Busy percentage as the driver reports it (amdgpu).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub busy_percent: Option<f32>,
    /// Cumulative RC6 (idle) residency in ms (i915): busy comes from its rate.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rc6_ms: Option<u64>,
    /// Current frequency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub freq_mhz: Option<u32>,
    /// Maximum frequency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_freq_mhz: Option<u32>,
    /// VRAM in use (amdgpu).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vram_used: Option<u64>,
    /// VRAM size (amdgpu).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub vram_total: Option<u64>,
    /// Active throttle reasons, comma separated (i915 throttle_reason_*), empty when none.
    pub throttle: ShortStr<96>,
}

/// A battery reading.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BatterySample {
    /// Charge in percent.
    pub percent: f32,
    /// Charging, Discharging, Full, Not charging, Unknown.
    pub status: ShortStr<16>,
    /// Power draw in watts, when the battery reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub power_w: Option<f32>,
    /// Seconds until empty (discharging) or full (charging) at the present draw, as
    /// UPower estimates it: energy (or charge) left over power (or current).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub time_remaining_s: Option<u32>,
}

/// Hardware readings from sysfs; each is `None` where the machine lacks it (and is then
/// left out of JSON output).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Hardware {
    /// CPU temperature in degrees Celsius.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temp_c: Option<f32>,
    /// CPU frequency (average over CPUs) in MHz.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_freq_mhz: Option<f32>,
    /// Maximum CPU frequency in MHz.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_freq_max_mhz: Option<f32>,
    /// GPU.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuSample>,
    /// /sys/firmware/acpi/platform_profile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub power_profile: Option<ShortStr<32>>,
    /// Battery.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub battery: Option<BatterySample>,
}

/// Machine-wide counters and readings.
#[derive(Clone, Debug, Default)]
pub struct SystemSample {
    /// When the sample was taken: CLOCK_MONOTONIC nanoseconds.
    pub taken_ns: u64,
    /// Cumulative CPU busy time of the whole machine in nanoseconds: the sum of every
    /// task's runtime (BPF), or /proc/stat's busy fields (procfs). Only differences matter.
    pub busy_ns: u64,
    /// Number of online CPUs the percentages are relative to.
    pub ncpus: u32,
    /// Per-CPU busy/total time, from /proc/stat.
    pub cores: Vec<CoreTimes>,
    /// Memory.
    pub mem: MemInfo,
    /// Bytes per page (for the swap counters).
    pub page_size: u64,
    /// Pages swapped in since boot.
    pub swap_in_pages: u64,
    /// Pages swapped out since boot.
    pub swap_out_pages: u64,
    /// 1, 5 and 15 minute load averages.
    pub load: [f64; 3],
    /// Pressure stall information.
    pub psi: Psi,
    /// Sensors and devices.
    pub hw: Hardware,
}
