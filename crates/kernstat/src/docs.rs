//! Shell completions and man pages, generated from the same clap definitions the
//! program parses with, so they cannot drift from the flags. `make install` and the
//! Debian package call these at build time.

use std::io::Write;
use std::path::Path;

use anyhow::Context;
use clap::CommandFactory;

use crate::cli::{Cli, CompletionsArgs, ManpagesArgs};

/// `kernstat completions SHELL`.
pub fn completions(args: &CompletionsArgs) -> anyhow::Result<i32> {
    let mut cmd = Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "kernstat", &mut out);
    std::io::stdout().lock().write_all(&out)?;
    Ok(0)
}

fn write_page(dir: &Path, name: &str, cmd: clap::Command) -> anyhow::Result<()> {
    let path = dir.join(format!("{name}.1"));
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut out)?;
    std::fs::write(&path, out).with_context(|| format!("writing {}", path.display()))
}

/// `kernstat manpages DIR`: kernstat.1 and one page per command.
pub fn manpages(args: &ManpagesArgs) -> anyhow::Result<i32> {
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    let cmd = Cli::command();
    write_page(&args.dir, "kernstat", cmd.clone())?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = format!("kernstat-{}", sub.get_name());
        write_page(&args.dir, &name, sub.clone().name(name.clone()))?;
    }
    Ok(0)
}
