//! kernstat's renderers: everything that turns a [`kernstat_model::Model`] into bytes for
//! a status bar, a terminal or a script. Output formats sit behind one type
//! ([`bar::BarRenderer`]) so the sampling loop does not care which one it feeds.
#![deny(missing_docs)]

pub mod bar;
pub mod cgroups;
pub mod hist;
pub mod human;
pub mod plot;
pub mod ps;
pub mod runqlat;
pub mod sort;
pub mod status;
pub mod table;
pub mod tcp;
pub mod template;
pub mod tooltip;
pub mod writes;

pub use bar::{BarFormat, BarRenderer, SnapshotView, TickInfo};
pub use template::{Template, TemplateError, FIELDS};
