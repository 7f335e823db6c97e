//! The status bar's engine, for `kernstat bar` and any other front end that draws a bar:
//!
//! - [`Ticker`]: one tick is one sample (BPF walk or procfs), one model update and one
//!   render into a kept buffer; the front decides when ticks happen and where the bytes go;
//! - [`bench`]: ticks timed and their allocations counted, steady samples apart from
//!   samples that grow the tables;
//! - [`feed`]: the daemon's `summary` key followed (the shared-memory snapshot, else a
//!   socket `watch` stream), for a bar that renders what a daemon samples.

#![deny(missing_docs)]

pub mod bench;
pub mod feed;

use std::time::{Duration, Instant};

use anyhow::Context;
use kernstat_collect::Collector;
use kernstat_model::{Model, ModelOptions, RawSample};
use kernstat_render::{BarRenderer, TickInfo};

/// A bar's sampling state: the collector, the last two samples, the model and the
/// rendered line (kept buffers: a steady tick allocates nothing).
pub struct Ticker {
    /// Where samples come from.
    pub collector: Collector,
    /// The sample before the next one (after a tick: the one just taken).
    pub prev: RawSample,
    cur: RawSample,
    model: Model,
    /// What the model counts (kernel threads) and its alert thresholds.
    pub opts: ModelOptions,
    /// The bar's format and template.
    pub renderer: BarRenderer,
    /// The line the last tick rendered.
    pub out: Vec<u8>,
}

impl Ticker {
    /// A ticker over `collector`, told which network figures the template shows (so
    /// the collector reads only those).
    pub fn new(mut collector: Collector, renderer: BarRenderer, opts: ModelOptions) -> Self {
        let (links, processes) = renderer.network_shown();
        collector.keep_network(links, processes);
        Ticker {
            collector,
            prev: RawSample::default(),
            cur: RawSample::default(),
            model: Model::default(),
            opts,
            renderer,
            out: Vec::with_capacity(16 * 1024),
        }
    }

    /// A ticker over a collector opened with `collect` for what `renderer` shows: a line
    /// that shows no process reads none (no task walk, no BPF program loaded).
    pub fn open(
        mut collect: kernstat_collect::CollectOptions,
        renderer: BarRenderer,
        opts: ModelOptions,
    ) -> std::io::Result<Self> {
        collect.machine_only = !renderer.processes_shown();
        Ok(Ticker::new(Collector::open(&collect)?, renderer, opts))
    }

    /// The baseline sample rates are computed from.
    pub fn baseline(&mut self) -> anyhow::Result<()> {
        self.collector.sample(&mut self.prev).context("sampling")
    }

    /// Samples, updates the model from the sample before, renders into [`Ticker::out`],
    /// and makes this sample the next one's baseline. Returns how long it took.
    pub fn tick(&mut self, self_cost: Option<f64>) -> anyhow::Result<Duration> {
        let t0 = Instant::now();
        self.collector.sample(&mut self.cur).context("sampling")?;
        self.model.update(&self.prev, &self.cur, &self.opts);
        self.out.clear();
        let tick = TickInfo {
            sample_us: t0.elapsed().as_secs_f64() * 1e6,
            self_cost_percent: self_cost,
        };
        self.renderer.render(&self.model, &tick, &mut self.out);
        std::mem::swap(&mut self.prev, &mut self.cur);
        Ok(t0.elapsed())
    }
}
