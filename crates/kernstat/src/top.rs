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
            let replay = Replay::new(cursor, off);
            if let Some(n) = args.bench_steps {
                return bench_steps(replay, n);
            }
            Some(replay)
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
        disks: args.disks,
        retrans: args.retrans,
        iterations: args.iterations,
        report: args.report,
        replay,
    })
}

/// `top --at T --bench-steps N`: the cost of a step in a replay, without a terminal.
fn bench_steps(mut replay: Replay, n: u32) -> anyhow::Result<i32> {
    let mut procs = Vec::new();
    replay.show(&mut procs);
    let mut times = Vec::with_capacity(2 * n as usize);
    for forward in [false, true] {
        for _ in 0..n {
            let t = std::time::Instant::now();
            if !replay.step(forward) {
                break;
            }
            replay.show(&mut procs);
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    if times.is_empty() {
        crate::cli::usage!("--bench-steps: the archive has no frame to step to");
    }
    times.sort_by(f64::total_cmp);
    let round = |v: f64| (v * 100.0).round() / 100.0;
    println!(
        "{}",
        serde_json::json!({
            "n": times.len(),
            "processes": procs.len(),
            "step_ms_p50": round(times[times.len() / 2]),
            "step_ms_max": round(times[times.len() - 1]),
        })
    );
    Ok(0)
}
