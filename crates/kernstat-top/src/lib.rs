//! `kernstat top` without a terminal, so that another front end (or a test) can drive
//! it: `sample` reads a refresh (the process table into rows with rates, the machine's
//! figures), `view` orders, filters, folds into a tree and follows the selection,
//! `probes` switches the run-queue and write-size BPF probes on and off, `cgroups` holds
//! the cgroup view's state, `replay` turns a recorded moment into the same rows.
//! kernstat-tui draws it.
#![deny(missing_docs)]

pub mod cgroups;
pub mod probes;
pub mod replay;
pub mod sample;
pub mod view;
