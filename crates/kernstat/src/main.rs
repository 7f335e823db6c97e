//! kernstat: a Linux observer that costs almost nothing.
//!
//! This program (`kernstat-full`: `kernstat` answers `get` from shared memory itself and
//! execs this for everything else, see kernstat-front) parses the command line and dispatches;
//! each command is a module. Errors reach the user as one line on stderr and a non-zero
//! status; a closed stdout is not an error (status 0).

mod bar;
mod biolat;
mod cgroups;
mod cli;
mod client;
mod daemon;
mod docs;
mod doctor;
mod events;
mod init;
mod ps;
mod replay;
mod runqlat;
mod session;
mod snapshot;
mod source;
mod tcp;
mod top;
mod view;
mod why;
mod writes;

use kernstat_collect::selfcost;
use kernstat_os::{alloc, interval, privileges, signals, stdout};

use clap::Parser;

#[global_allocator]
static GLOBAL: alloc::CountingAlloc = alloc::CountingAlloc;

fn main() {
    // `kernstat` runs this program as `kernstat-full` (see kernstat-front); top, htop, pgrep -x
    // and `kernstat ps` show the name people typed. SAFETY: PR_SET_NAME with a
    // NUL-terminated name of under 16 bytes.
    unsafe { libc::prctl(libc::PR_SET_NAME, c"kernstat".as_ptr()) };
    let cli = cli::Cli::parse();
    match cli.command {
        cli::Command::Daemon(_) | cli::Command::Bar(_) => alloc::return_freed_memory(1 << 20),
        // Per-refresh buffers of a large table (the iterator's rows, several MB at 10,000
        // processes) are mapped and unmapped: measured with `bench.sh top` at 9,700
        // processes, steady VmRSS 23.9 -> 14.4 MiB (docs/top.md).
        cli::Command::Top(_) => alloc::return_freed_memory(256 << 10),
        _ => {}
    }
    let result = match &cli.command {
        cli::Command::Bar(a) => bar::run(a),
        cli::Command::Snapshot(a) => snapshot::run(a),
        cli::Command::Ps(a) => ps::run(a),
        cli::Command::Cgroups(a) => cgroups::run(a),
        cli::Command::Dump(a) => replay::dump(a),
        cli::Command::Top(a) => top::run(a),
        cli::Command::Runqlat(a) => runqlat::run(a),
        cli::Command::Biolat(a) => biolat::run(a),
        cli::Command::Events(a) => events::run(a),
        cli::Command::Tcp(a) => tcp::run(a),
        cli::Command::Why(a) => {
            let mut a = a.clone();
            a.window = a.window_arg.unwrap_or(if a.replay.at.is_some() {
                std::time::Duration::from_secs(60)
            } else {
                std::time::Duration::from_secs(10)
            });
            why::run(&a)
        }
        cli::Command::View(a) => view::run(a),
        cli::Command::Writes(a) => writes::run(a),
        cli::Command::Daemon(a) => daemon::run(a),
        cli::Command::Get(a) => Ok(client::get(a)),
        cli::Command::Eval(a) => Ok(client::eval(a)),
        cli::Command::Put(a) => Ok(client::put(a)),
        cli::Command::Watch(a) => Ok(client::watch(a)),
        cli::Command::Session(a) => session::run(a),
        cli::Command::Init(a) => init::run(a),
        cli::Command::Status(a) => Ok(client::status(a)),
        cli::Command::Doctor(a) => doctor::run(a),
        cli::Command::Completions(a) => docs::completions(a),
        cli::Command::Manpages(a) => docs::manpages(a),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            if is_broken_pipe(&e) {
                std::process::exit(0);
            }
            eprintln!("kernstat: {e:#}");
            // One rule: 2 for a usage error (clap's, a template's, ours), 1 otherwise.
            let usage = e
                .chain()
                .any(|c| c.is::<kernstat_render::TemplateError>() || c.is::<cli::UsageError>());
            std::process::exit(if usage { 2 } else { 1 });
        }
    }
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        let kind = c
            .downcast_ref::<std::io::Error>()
            .map(std::io::Error::kind)
            // serde_json::to_writer wraps the write's error in its own.
            .or_else(|| c.downcast_ref::<serde_json::Error>()?.io_error_kind());
        kind == Some(std::io::ErrorKind::BrokenPipe)
    })
}
