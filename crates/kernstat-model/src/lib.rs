//! kernstat's data model, with no I/O.
//!
//! Sources (the BPF sampler, procfs and sysfs readers) fill a [`RawSample`] with
//! cumulative counters; [`Model::update`] turns two of them into what people read:
//! rates, percentages, top lists and an alert level. Keeping raw samples apart from the
//! derived model (the habit of `below`) lets every formula be tested on made-up numbers,
//! and lets the daemon, the bar and `snapshot` share one definition of each metric.
#![deny(missing_docs)]

pub mod biolat;
pub mod cgroup;
pub mod cgroup_tree;
pub mod counters;
pub mod events;
pub mod exits;
pub mod hist;
pub mod model;
pub mod net;
pub mod ps;
pub mod rates;
pub mod raw;
pub mod runqlat;
pub mod sample;
pub mod tcp;
pub mod text;
pub mod thresholds;
pub mod top;
pub mod writes;

pub use model::{Alert, MemModel, Model, ModelOptions, ProcRate};
pub use raw::{
    BatterySample, Comm, CoreTimes, GpuDriver, GpuSample, Hardware, MemInfo, ProcSample, Psi,
    PsiLine, Source, SystemSample, TaskName, TaskTable, Viewer,
};
pub use sample::RawSample;
pub use text::ShortStr;
pub use thresholds::{Level, LevelSpec, Threshold, Thresholds};
pub use top::{Top, TopEntry, TOP_N};
