//! `kernstat snapshot`: two readings INTERVAL apart, one full model, printed once as JSON
//! (every metric and every process) or as the bar's tooltip text.

use std::io::Write;

use anyhow::Context;
use kernstat_model::{Model, ModelOptions, RawSample};
use kernstat_render::tooltip::{write_tooltip, TooltipExtras};
use kernstat_render::SnapshotView;

use crate::cli::SnapshotArgs;
use crate::source::open_collector;

/// Runs `kernstat snapshot`; returns the exit status.
pub fn run(args: &SnapshotArgs) -> anyhow::Result<i32> {
    if let Some(at) = &args.replay.at {
        return crate::replay::snapshot(&args.replay, at, args.json);
    }
    let mut collector = open_collector(&args.source)?;
    collector.with_cgroups(
        &crate::source::collect_options(&args.source).roots,
        Some(args.cgroup_depth),
        args.cgroup_max,
    );
    let mut a = RawSample::default();
    let mut b = RawSample::default();
    collector.sample(&mut a).context("sampling")?;
    std::thread::sleep(args.interval);
    let t0 = std::time::Instant::now();
    collector.sample(&mut b).context("sampling")?;
    let mut model = Model::default();
    let opts = ModelOptions {
        include_kthreads: args.kthreads,
        ..Default::default()
    };
    model.update(&a, &b, &opts);
    let sample_us = t0.elapsed().as_secs_f64() * 1e6;
    if args.json {
        let view = SnapshotView {
            model: &model,
            sample_us,
            self_cost_percent: None,
        };
        let mut out = std::io::stdout().lock();
        serde_json::to_writer(&mut out, &view)?;
        writeln!(out)?;
    } else {
        let mut s = String::new();
        write_tooltip(
            &mut s,
            &model,
            &TooltipExtras {
                sample_us,
                self_cost_percent: None,
                markup: false,
            },
        )?;
        writeln!(std::io::stdout().lock(), "{s}")?;
    }
    Ok(0)
}
