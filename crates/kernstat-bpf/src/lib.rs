//! kernstat's BPF programs: built from `bpf/` by build.rs, loaded with libbpf-rs
//! skeletons, attached, and read into kernstat-model's raw types.
//!
//! Each collector is one `bpf/<name>.bpf.c` with its shared types in `bpf/<name>.h` and
//! one module here. Loading always goes through [`loader::preflight`], so the usual
//! reasons BPF cannot work become one clear [`LoadError`] and the caller can fall back to
//! procfs.
#![deny(missing_docs)]

mod batch;
pub mod biolat;
pub mod cgroups;
pub mod doctor;
pub mod exits;
pub mod kernel;
pub mod loader;
pub mod net;
pub mod oom;
pub mod ps;
pub mod runqlat;
pub mod sampler;
pub mod stats;
pub mod tcp;
pub mod trampolines;
pub mod walk;
pub mod writes;

/// Generated skeletons (libbpf-cargo); not part of the public API.
#[allow(
    missing_docs,
    clippy::all,
    non_camel_case_types,
    non_snake_case,
    dead_code
)]
mod skel {
    pub mod biolat {
        include!(concat!(env!("OUT_DIR"), "/biolat.skel.rs"));
    }
    pub mod sampler {
        include!(concat!(env!("OUT_DIR"), "/sampler.skel.rs"));
    }
    pub mod ps {
        include!(concat!(env!("OUT_DIR"), "/ps.skel.rs"));
    }
    pub mod runqlat {
        include!(concat!(env!("OUT_DIR"), "/runqlat.skel.rs"));
    }
    pub mod net {
        include!(concat!(env!("OUT_DIR"), "/net.skel.rs"));
    }
    pub mod cgroups {
        include!(concat!(env!("OUT_DIR"), "/cgroups.skel.rs"));
    }
    pub mod tcp {
        include!(concat!(env!("OUT_DIR"), "/tcp.skel.rs"));
    }
    pub mod oom {
        include!(concat!(env!("OUT_DIR"), "/oom.skel.rs"));
    }
    pub mod exits {
        include!(concat!(env!("OUT_DIR"), "/exits.skel.rs"));
    }
    pub mod writes {
        include!(concat!(env!("OUT_DIR"), "/writes.skel.rs"));
    }
}

pub use loader::LoadError;
pub use sampler::{Sampler, WalkSummary};
