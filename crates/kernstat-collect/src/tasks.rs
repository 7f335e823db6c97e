//! Where process tables come from, for `ps` and `top`: the BPF task iterator (a pin when
//! one exists, else a freshly loaded program), procfs when BPF cannot be used.

use std::io;
use std::path::Path;

use kernstat_bpf::ps::{self as bpf_ps, PsReader};
use kernstat_model::ps::{command_line, processes, PsRow, RowExtras, TaskRow};
use kernstat_sources::cgroup::CgroupPaths;
use kernstat_sources::users::UserNames;
use kernstat_sources::{ProcfsPs, Roots, Want};

/// Where the rows come from.
pub enum TaskSource {
    /// The BPF task iterator (pinned, or loaded by this process).
    Bpf(PsReader),
    /// /proc.
    Procfs(ProcfsPs),
}

impl TaskSource {
    /// "bpf", "bpf-pin" or "procfs", as `--json` says it.
    pub fn name(&self) -> &'static str {
        match self {
            TaskSource::Bpf(r) => r.source_name(),
            TaskSource::Procfs(_) => "procfs",
        }
    }

    /// Every process (and with `threads`, every thread) now; a pin written by another
    /// kernstat version is never misread (the iterator is loaded instead).
    pub fn read(
        &mut self,
        threads: bool,
        want: Want,
        procfs_extra: &mut Option<ProcfsPs>,
    ) -> io::Result<Vec<TaskRow>> {
        let rows = match self {
            TaskSource::Bpf(r) => match r.read() {
                Ok(rows) => rows,
                Err(e)
                    if e.kind() == io::ErrorKind::InvalidData && r.source_name() == "bpf-pin" =>
                {
                    // A pin written by another kernstat version: never misread it.
                    eprintln!("kernstat: {e}; loading the iterator instead");
                    *self = match PsReader::load(want.cmdline) {
                        Ok(r) => TaskSource::Bpf(r),
                        Err(e) => {
                            eprintln!("kernstat: BPF unavailable ({e}); reading /proc instead (\"source\": \"procfs\")");
                            TaskSource::Procfs(ProcfsPs::open(&Roots::default())?)
                        }
                    };
                    return self.read(threads, want, procfs_extra);
                }
                Err(e) => return Err(e),
            },
            TaskSource::Procfs(p) => return p.read(threads, want),
        };
        let mut rows = rows;
        // This sandbox's kernel hides PID 1 from task iterators (docs/limits.md);
        // /proc still shows it, so complete the table from there.
        if !rows.iter().any(|t| t.pid == 1) {
            if procfs_extra.is_none() {
                // Without /proc the table is the walk's alone, as before PID 1 was added.
                *procfs_extra = ProcfsPs::open(&Roots::default()).ok();
            }
            if let Some(p) = procfs_extra.as_mut() {
                // procfs reports group totals on the leader: nothing "dead" to add.
                // Only the files the rows need: top reads no command line from here (it
                // keeps its own), so neither /proc/1/cmdline nor its cgroup at every
                // refresh; and its files stay open (a reader that reads again and again).
                let mut push =
                    |v: &kernstat_sources::ps_procfs::TaskView<'_>| rows.push(v.to_row());
                if threads {
                    p.visit_one(1, threads, want, push);
                } else {
                    p.visit_kept(1, want, &mut push);
                }
            }
        }
        Ok(if threads { rows } else { processes(rows) })
    }
}

impl TaskSource {
    /// The pinned iterator under `pin_dir` when there is one, else a loaded iterator, else
    /// procfs (saying why on stderr).
    pub fn open(no_bpf: bool, pin_dir: &Path, cmdline: bool) -> anyhow::Result<TaskSource> {
        Self::open_with(no_bpf, pin_dir, cmdline, Reads::Once)
    }

    /// [`TaskSource::open`] for a reader that reads again and again (`top`, the cgroup
    /// view): where this process may load BPF, it loads the iterator even when a pin
    /// exists, since a loaded reader without command lines walks by BPF_PROG_RUN on 6.7+
    /// (kernstat_bpf::walk: half the CPU of a read of the pin at 300 tasks), and the
    /// load's ~10 ms is paid once.
    pub fn open_repeated(
        no_bpf: bool,
        pin_dir: &Path,
        cmdline: bool,
    ) -> anyhow::Result<TaskSource> {
        Self::open_with(no_bpf, pin_dir, cmdline, Reads::Repeated)
    }

    fn open_with(
        no_bpf: bool,
        pin_dir: &Path,
        cmdline: bool,
        reads: Reads,
    ) -> anyhow::Result<TaskSource> {
        if no_bpf {
            return Ok(TaskSource::Procfs(ProcfsPs::open(&Roots::default())?));
        }
        let pin = bpf_ps::pin_path(pin_dir, cmdline);
        if reads == Reads::Repeated
            && !cmdline
            && kernstat_bpf::loader::has_bpf_privileges()
            && kernstat_bpf::walk::wanted()
        {
            // Where the kernel cannot run the walk, the loaded iterator costs what the pin
            // does per read: kept either way.
            if let Ok(r) = PsReader::load(cmdline) {
                return Ok(TaskSource::Bpf(r));
            }
        }
        // A pinned iterator walks the tasks of the namespace it was pinned from (the
        // host's, for `kernstat ps --pin` run as root): read from a child PID namespace
        // that can see the host's bpffs (a container sharing its mounts) it would list
        // the host's processes by the host's pids. There the iterator is loaded here,
        // in the reader's namespace, or /proc is read.
        if pin.exists() && kernstat_bpf::loader::reader_pid_namespace().is_none() {
            match PsReader::pinned(&pin) {
                Ok(r) => return Ok(TaskSource::Bpf(r)),
                Err(e) => eprintln!(
                    "kernstat: cannot read the pinned iterator {} ({e}); loading one",
                    pin.display()
                ),
            }
        }
        match PsReader::load(cmdline) {
            Ok(r) => Ok(TaskSource::Bpf(r)),
            Err(e) => {
                eprintln!(
                "kernstat: BPF unavailable ({e}); reading /proc instead (\"source\": \"procfs\")"
            );
                Ok(TaskSource::Procfs(ProcfsPs::open(&Roots::default())?))
            }
        }
    }
}

/// How often a [`TaskSource`] is read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reads {
    Once,
    Repeated,
}

/// Where a pinned iterator is looked for by commands without a --pin-dir flag (cgroups,
/// the daemon's recorder): KERNSTAT_PIN_DIR, as `ps` and `top` read it, else the default.
pub fn pin_dir() -> std::path::PathBuf {
    std::env::var_os("KERNSTAT_PIN_DIR")
        .filter(|d| !d.is_empty())
        .map_or_else(|| bpf_ps::DEFAULT_PIN_DIR.into(), Into::into)
}

/// Bytes of a command line kept, as the iterator (KS_PS_CMDLINE_MAX in bpf/ps.h) and
/// the procfs reader's buffer keep: any user can make theirs megabytes long.
const CMDLINE_MAX: u64 = 4096;

/// A process's command line as `ps` shows it, read from /proc/PID/cmdline (at most
/// CMDLINE_MAX bytes, "…" when cut); `[comm]` for kernel threads and for processes
/// without one (zombies). For `top` and the recorder, which read it once per process.
pub fn read_command_line(t: &TaskRow) -> String {
    use std::io::Read;
    if t.kthread {
        return format!("[{}]", t.comm);
    }
    let mut bytes = Vec::new();
    if let Ok(f) = std::fs::File::open(format!("/proc/{}/cmdline", t.pid)) {
        let _ = f.take(CMDLINE_MAX + 1).read_to_end(&mut bytes);
    }
    let cut = bytes.len() as u64 > CMDLINE_MAX;
    bytes.truncate(CMDLINE_MAX as usize);
    kernstat_model::ps::command_line(&TaskRow {
        cmdline: bytes,
        cmdline_cut: cut,
        ..t.clone()
    })
}

/// Table rows of `tasks`, with the names and paths they show looked up (only what is
/// shown: user names go through NSS, which loads its modules on first use).
pub fn ps_rows(
    tasks: &[TaskRow],
    per_thread: bool,
    want: Want,
    want_names: bool,
    cpu_percent: impl Fn(usize, &TaskRow) -> f64,
) -> Vec<PsRow> {
    let mut users = UserNames::default();
    let cgroups = want.cgroup.then(|| CgroupPaths::scan(&Roots::default()));
    tasks
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let cgroup = match (&t.cgroup_path, &cgroups) {
                (Some(p), _) => p.clone(),
                (None, Some(c)) => c.path(t.cgroup_id),
                (None, None) => String::new(),
            };
            let extras = RowExtras {
                cpu_percent: cpu_percent(i, t),
                user: if want_names {
                    users.name(t.uid).to_string()
                } else {
                    String::new()
                },
                cmd: if want.cmdline {
                    command_line(t)
                } else {
                    String::new()
                },
                cgroup,
            };
            PsRow::from_task(t, per_thread, extras)
        })
        .collect()
}

/// `ps --bench`'s comparison: the BPF iterator's and procfs' read times, medians over
/// `n` alternating runs (after three warm-ups), so that both see the same machine.
#[derive(Clone, Copy, Debug)]
pub struct IteratorBench {
    /// Task records the iterator returned in the last run.
    pub tasks: usize,
    /// Processes the procfs walk saw in the last run.
    pub processes: usize,
    /// The iterator's median read, µs.
    pub bpf_p50_us: f64,
    /// The procfs walk's median, µs.
    pub procfs_p50_us: f64,
}

/// Runs [`IteratorBench`] `n` times (`n` > 0).
pub fn bench_iterator(reader: &mut PsReader, n: u32, want: Want) -> anyhow::Result<IteratorBench> {
    let mut procfs = ProcfsPs::open(&Roots::default())?;
    let mut bpf_t = Vec::with_capacity(n as usize);
    let mut procfs_t = Vec::with_capacity(n as usize);
    let mut tasks = 0usize;
    let mut processes = 0usize;
    for i in 0..n + 3 {
        let t0 = std::time::Instant::now();
        let raw = reader.read_raw()?;
        let records = bpf_ps::count_records(raw);
        let bt = t0.elapsed();
        let t1 = std::time::Instant::now();
        let mut count = 0usize;
        procfs.walk(false, want, |v| {
            count += 1;
            std::hint::black_box(v);
        })?;
        let pt = t1.elapsed();
        if i >= 3 {
            bpf_t.push(bt.as_nanos() as u64);
            procfs_t.push(pt.as_nanos() as u64);
        }
        tasks = records;
        processes = count;
    }
    bpf_t.sort_unstable();
    procfs_t.sort_unstable();
    Ok(IteratorBench {
        tasks,
        processes,
        bpf_p50_us: bpf_t[bpf_t.len() / 2] as f64 / 1000.0,
        procfs_p50_us: procfs_t[procfs_t.len() / 2] as f64 / 1000.0,
    })
}
