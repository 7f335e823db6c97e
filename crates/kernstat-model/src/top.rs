//! Fixed-size "top N" lists, kept sorted by insertion, without touching the heap.

use serde::ser::{Serialize, SerializeSeq, Serializer};

use crate::raw::Comm;

/// How many processes each top list holds.
pub const TOP_N: usize = 5;

/// One process in a top list.
#[derive(Clone, Copy, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct TopEntry {
    /// Process id.
    pub pid: u32,
    /// Command name.
    pub comm: Comm,
    /// What the list is sorted by (CPU %, bytes, bytes/s).
    pub value: f64,
    /// A second figure shown beside it (write rate in the I/O list), else 0.
    pub extra: f64,
}

/// The `N` entries with the largest `value`, largest first.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Top<const N: usize> {
    entries: [TopEntry; N],
    len: usize,
}

impl<const N: usize> Default for Top<N> {
    fn default() -> Self {
        Self {
            entries: [TopEntry::default(); N],
            len: 0,
        }
    }
}

impl<const N: usize> Top<N> {
    /// Empties the list.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Offers an entry; it is kept if it is among the `N` largest so far. Ties keep the
    /// earlier entry first.
    pub fn offer(&mut self, entry: TopEntry) {
        if N == 0 {
            return;
        }
        if self.len == N && entry.value <= self.entries[N - 1].value {
            return;
        }
        let mut i = if self.len < N { self.len } else { N - 1 };
        while i > 0 && self.entries[i - 1].value < entry.value {
            self.entries[i] = self.entries[i - 1];
            i -= 1;
        }
        self.entries[i] = entry;
        if self.len < N {
            self.len += 1;
        }
    }

    /// The kept entries, largest first.
    pub fn as_slice(&self) -> &[TopEntry] {
        &self.entries[..self.len]
    }

    /// Nothing kept.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl<'de, const N: usize> serde::Deserialize<'de> for Top<N> {
    /// Reads a list back (a snapshot from the daemon); entries past `N` are dropped.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let entries = Vec::<TopEntry>::deserialize(d)?;
        let mut top = Self::default();
        for e in entries {
            top.offer(e);
        }
        Ok(top)
    }
}

impl<const N: usize> Serialize for Top<N> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut seq = s.serialize_seq(Some(self.len))?;
        for e in self.as_slice() {
            seq.serialize_element(e)?;
        }
        seq.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(pid: u32, value: f64) -> TopEntry {
        TopEntry {
            pid,
            value,
            ..Default::default()
        }
    }

    #[test]
    fn keeps_the_largest_in_order() {
        let mut t = Top::<3>::default();
        for (pid, v) in [(1, 5.0), (2, 1.0), (3, 9.0), (4, 7.0), (5, 0.5), (6, 8.0)] {
            t.offer(e(pid, v));
        }
        let pids: Vec<u32> = t.as_slice().iter().map(|e| e.pid).collect();
        assert_eq!(pids, vec![3, 6, 4]);
    }

    #[test]
    fn ties_keep_first_seen() {
        let mut t = Top::<2>::default();
        t.offer(e(1, 1.0));
        t.offer(e(2, 1.0));
        t.offer(e(3, 1.0));
        let pids: Vec<u32> = t.as_slice().iter().map(|e| e.pid).collect();
        assert_eq!(pids, vec![1, 2]);
    }

    #[test]
    fn short_lists() {
        let mut t = Top::<5>::default();
        assert!(t.is_empty());
        t.offer(e(1, 2.0));
        assert_eq!(t.as_slice().len(), 1);
    }
}
