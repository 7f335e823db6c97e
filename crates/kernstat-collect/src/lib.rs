//! Sampling the machine: everything a view reads is taken here, from whichever source
//! works (the BPF programs, or /proc and /sys), into kernstat-model's raw types.
//!
//! - `collector`: one sample of the machine (the BPF sampler or procfs, the machine's
//!   files, sensors, links, per-process network, control groups) into a `RawSample`;
//! - `tasks`: the process table of `ps` and `top` (the pinned or a fresh task iterator,
//!   or procfs), and command lines;
//! - `net_interval`: per-process network over one command's interval;
//! - `tcp_interval`: TCP retransmits per process over an interval;
//! - `selfcost`: what kernstat itself costs (its CPU and its hooks' run time);
//! - `cgroups`: control groups over an interval, with their processes' network.
#![deny(missing_docs)]

pub mod cgroups;
pub mod collector;
pub mod events;
pub mod net_interval;
pub mod selfcost;
pub mod tasks;
pub mod tcp_interval;
pub mod tcp_owners;

pub use collector::{CollectOptions, Collector};
