//! Bounds on how many entries a frame read from a file may hold, whatever it declares:
//! what decoding a forged frame can allocate stays within ~40 MB (docs/security.md);
//! a real machine's frame is far below them (the recorder's own bounds: per user, and
//! `--cgroup-max`).

use serde::de::{Deserialize, Deserializer, Error, SeqAccess, Visitor};
use std::marker::PhantomData;

/// Processes a frame may list.
pub const MAX_PROCS: usize = 100_000;
/// Ended processes, groups, interfaces, disks, summaries or events.
pub const MAX_OTHERS: usize = 20_000;

struct Bounded<T>(usize, PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for Bounded<T> {
    type Value = Vec<T>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "at most {} entries", self.0)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
        let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(1024));
        while let Some(x) = seq.next_element()? {
            if v.len() == self.0 {
                return Err(A::Error::custom(format!(
                    "more than {} entries in one sample",
                    self.0
                )));
            }
            v.push(x);
        }
        Ok(v)
    }
}

/// A list of processes.
pub fn procs<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    d.deserialize_seq(Bounded(MAX_PROCS, PhantomData))
}

/// Any other list.
pub fn others<'de, D: Deserializer<'de>, T: Deserialize<'de>>(d: D) -> Result<Vec<T>, D::Error> {
    d.deserialize_seq(Bounded(MAX_OTHERS, PhantomData))
}
