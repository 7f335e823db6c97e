//! A process that ended, as the exit hook (kernstat-bpf's exits) hands it over: its
//! final counters, for the recorder to keep and the live views to show as a row of its
//! own (state X), so that a process that lived between two samples is not lost.

use serde::{Deserialize, Serialize};

/// A process that ended, as its exit hook saw it.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExitedProcess {
    /// Process id.
    pub pid: u32,
    /// Parent's process id at the exit.
    pub ppid: u32,
    /// Real uid.
    pub uid: u32,
    /// Command name (the group leader's).
    pub comm: String,
    /// Command line, when a recorded sample saw the process alive (else empty).
    pub cmd: String,
    /// Start, ns after boot (as `ps`'s start_ns).
    pub start_ns: u64,
    /// Exit, ns after boot.
    pub exit_ns: u64,
    /// Exit, ns since the Unix epoch (set by the recorder).
    pub exit_unix_ns: u64,
    /// CPU time of every thread over its life, ns.
    pub cpu_ns: u64,
    /// Storage reads over its life, bytes.
    pub read_bytes: u64,
    /// Storage writes over its life, bytes.
    pub write_bytes: u64,
    /// Peak resident set, bytes.
    pub maxrss_bytes: u64,
    /// Exit status as wait(2) encodes it (signal in the low 7 bits, code in 8-15).
    pub exit_code: i32,
}

/// Its final counters, as the rate engine reads them (for its own row's rates over the
/// part of its life in the interval).
impl crate::rates::ProcessCounters for ExitedProcess {
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
}

/// The command line an ended process is shown with: its own when a reading saw it
/// alive; else its parent's when it has its parent's name (a fork that did not exec
/// shares its parent's argv); else its name.
pub fn ended_command(comm: &str, seen: Option<&str>, parent: Option<(&str, &str)>) -> String {
    match (seen, parent) {
        (Some(cmd), _) if !cmd.is_empty() => cmd.to_string(),
        (_, Some((parent_comm, parent_cmd))) if parent_comm == comm && !parent_cmd.is_empty() => {
            parent_cmd.to_string()
        }
        _ => comm.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ended_process_is_shown_with_the_best_command_line_known() {
        assert_eq!(ended_command("sh", Some("sh -c x"), None), "sh -c x");
        assert_eq!(
            ended_command("worker", None, Some(("worker", "worker --n 3"))),
            "worker --n 3"
        );
        assert_eq!(
            ended_command("true", None, Some(("sh", "sh -c true"))),
            "true"
        );
        assert_eq!(ended_command("true", Some(""), None), "true");
    }
}
