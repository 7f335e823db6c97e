//! `kernstat top`: its flags into kernstat-tui's options (the sort by the one `--sort`
//! convention, a recorded moment opened for `--at`), then the view runs.

use kernstat_render::sort::SortSpec;
use kernstat_top::replay::Replay;
use kernstat_top::view::SortKey;

use crate::cli::TopArgs;

/// Runs `kernstat top`; returns the exit status.
pub fn run(args: &TopArgs) -> anyhow::Result<i32> {
    let spec = SortSpec::parse(&args.sort);
    let Some(sort) = SortKey::parse(spec.key) else {
        let names: Vec<&str> = SortKey::ALL.iter().map(|k| k.name()).collect();
        crate::cli::usage!(
            "--sort {:?}: no such column (one of {}; -KEY for largest first)",
            args.sort,
            names.join(", ")
        );
    };
    let replay = match &args.replay.at {
        Some(at) => {
            let (cursor, off) = match crate::replay::cursor_at(&args.replay, at)? {
                Ok(c) => c,
                Err(code) => return Ok(code),
            };
            Some(Replay::new(cursor, off))
        }
        None => None,
    };
    kernstat_tui::run(kernstat_tui::TopOptions {
        sort,
        descending: spec.descending,
        delay: args.delay,
        filter: args.filter.clone(),
        tree: args.tree,
        no_bpf: args.no_bpf,
        pin_dir: args.pin_dir.clone(),
        temp: args.temp.clone(),
        runqlat: args.runqlat,
        writes: args.writes,
        iterations: args.iterations,
        report: args.report,
        replay,
    })
}
