//! Where process tables come from, for `ps` and `top`: the BPF task iterator (a pin when
//! one exists, else a freshly loaded program), procfs when BPF cannot be used.

use std::io;
use std::path::Path;

use kernstat_bpf::ps::{self as bpf_ps, PsReader};
use kernstat_model::ps::{processes, TaskRow};
use kernstat_sources::{ProcfsPs, Roots, Want};

/// Where the rows come from.
pub enum TaskSource {
    Bpf(PsReader),
    Procfs(ProcfsPs),
}

impl TaskSource {
    pub fn name(&self) -> &'static str {
        match self {
            TaskSource::Bpf(r) => r.source_name(),
            TaskSource::Procfs(_) => "procfs",
        }
    }

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
        if !rows.iter().any(|t| t.pid == 1) && Path::new("/proc/1").exists() {
            if procfs_extra.is_none() {
                *procfs_extra = Some(ProcfsPs::open(&Roots::default())?);
            }
            if let Some(p) = procfs_extra.as_mut() {
                // procfs reports group totals on the leader: nothing "dead" to add.
                p.visit_one(1, threads, |v| rows.push(v.to_row()));
            }
        }
        Ok(if threads { rows } else { processes(rows) })
    }
}

impl TaskSource {
    /// The pinned iterator under `pin_dir` when there is one, else a loaded iterator, else
    /// procfs (saying why on stderr).
    pub fn open(no_bpf: bool, pin_dir: &Path, cmdline: bool) -> anyhow::Result<TaskSource> {
        if no_bpf {
            return Ok(TaskSource::Procfs(ProcfsPs::open(&Roots::default())?));
        }
        let pin = bpf_ps::pin_path(pin_dir, cmdline);
        if pin.exists() {
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
