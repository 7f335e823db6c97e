//! Timelines and heatmaps over a range of the archive, downsampled on the server: the
//! range is cut into as many buckets as the chart has pixels, and each bucket keeps the
//! smallest and largest value of the frames in it, so a one-frame spike in a week still
//! shows (a mean would flatten it). Values are computed between consecutive frames from
//! their cumulative counters (the interval between them, as every replay does).

use kernstat_record::archive::Cursor;
use kernstat_record::frame::Frame;
use serde::Serialize;

/// Most buckets a request may ask for (a wide screen's pixels, twice).
pub const MAX_POINTS: usize = 8000;

/// One timeline: per bucket, the smallest and largest value (None: no frame there).
#[derive(Debug, Serialize)]
pub struct Series {
    /// Its name (`cpu`, `psi_io`, ...).
    pub name: &'static str,
    /// What it is, for the legend.
    pub label: &'static str,
    /// Its unit (`%`, `B/s`, ...).
    pub unit: &'static str,
    /// Per bucket.
    pub min: Vec<Option<f64>>,
    /// Per bucket.
    pub max: Vec<Option<f64>>,
}

/// The machine's timelines over a range.
#[derive(Debug, Serialize)]
pub struct Timelines {
    /// The range asked (clamped to the archive), ns since the Unix epoch.
    pub from_unix_ns: u64,
    /// See `from_unix_ns`.
    pub to_unix_ns: u64,
    /// Each bucket's start, s since the Unix epoch.
    pub t: Vec<f64>,
    /// The timelines.
    pub series: Vec<Series>,
    /// Frames read.
    pub frames: u64,
}

/// A recorded histogram over time: per bucket, the counts added in it per slot.
#[derive(Debug, Serialize)]
pub struct Heatmap {
    /// Which histogram (`runqlat`, `biolat`).
    pub hist: String,
    /// Each bucket's start, s since the Unix epoch.
    pub t: Vec<f64>,
    /// Each row's lower bound, µs (log2 rows: 0, 2, 4, 8, ...; the recorded log-linear
    /// slots summed into them).
    pub slots_us: Vec<u64>,
    /// Per bucket, per slot.
    pub counts: Vec<Vec<u64>>,
    /// All counts.
    pub total: u64,
}

/// The values of one interval (frame `b` to frame `f`), in the order of [`NAMES`].
fn values(b: &Frame, f: &Frame) -> [Option<f64>; NAMES.len()] {
    let (m0, m1) = (&b.machine, &f.machine);
    let dt_ns = m1.mono_ns.saturating_sub(m0.mono_ns);
    let mut out = [None; NAMES.len()];
    if dt_ns == 0 || m1.mono_ns < m0.mono_ns {
        return out;
    }
    let dt_s = dt_ns as f64 / 1e9;
    let per_s = |a: u64, b: u64| b.saturating_sub(a) as f64 / dt_s;
    let ncpus = f64::from(m1.ncpus.max(1));
    out[0] = Some(
        (m1.busy_ns.saturating_sub(m0.busy_ns) as f64 / (dt_ns as f64 * ncpus) * 100.0).min(100.0),
    );
    if m1.mem.total > 0 {
        out[1] = Some(
            (m1.mem.total - m1.mem.available.min(m1.mem.total)) as f64 / m1.mem.total as f64
                * 100.0,
        );
    }
    out[2] = Some(m1.load[0]);
    for (k, i) in [(3, 0), (4, 1), (5, 3)] {
        if let (Some(a), Some(z)) = (m0.psi[i], m1.psi[i]) {
            out[k] = Some((per_s(a.total_us, z.total_us) / 1e6 * 100.0).min(100.0));
        }
    }
    let util = f
        .disks
        .iter()
        .filter_map(|d| {
            let before = b.disks.iter().find(|x| x.name == d.name)?;
            Some(per_s(before.io_ms, d.io_ms) / 1000.0 * 100.0)
        })
        .fold(None, |acc: Option<f64>, u| {
            Some(acc.map_or(u, |a| a.max(u)))
        });
    out[6] = util.map(|u| u.min(100.0));
    let link = |k: usize| -> Option<f64> {
        let mut any = false;
        let mut sum = 0.0;
        for l in f.links.iter().filter(|l| l.name != "lo") {
            if let Some(before) = b.links.iter().find(|x| x.name == l.name) {
                any = true;
                sum += per_s(
                    if k == 0 { before.rx[0] } else { before.tx[0] },
                    if k == 0 { l.rx[0] } else { l.tx[0] },
                );
            }
        }
        any.then_some(sum)
    };
    out[7] = link(0);
    out[8] = link(1);
    out[9] = Some(f.process_count() as f64);
    out[10] = Some(f.ended_count() as f64);
    out
}

/// The timelines: (name, label, unit).
pub const NAMES: [(&str, &str, &str); 11] = [
    ("cpu", "CPU busy", "%"),
    ("mem", "memory used", "%"),
    ("load1", "load (1 min)", ""),
    ("psi_cpu", "CPU pressure (some)", "%"),
    ("psi_mem", "memory pressure (some)", "%"),
    ("psi_io", "I/O pressure (some)", "%"),
    ("disk_util", "busiest disk busy", "%"),
    ("net_rx", "received", "B/s"),
    ("net_tx", "sent", "B/s"),
    ("procs", "processes", ""),
    ("ended", "processes ended", "per frame"),
];

/// The bucket of time `t` in [from, to) cut into `n`.
fn bucket(t: u64, from: u64, to: u64, n: usize) -> Option<usize> {
    if t < from || t > to || to <= from {
        return None;
    }
    let i = ((t - from) as u128 * n as u128 / (to - from).max(1) as u128) as usize;
    Some(i.min(n - 1))
}

fn starts(from: u64, to: u64, n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| (from as f64 + (to - from) as f64 * i as f64 / n as f64) / 1e9)
        .collect()
}

/// What the page needs of one recorded interval (frame `b` to frame `f`), kept by the
/// [`Store`] so that a range is decoded once: its end, its timelines' values and the
/// histogram counts added in it (log2 rows, as (row, count) pairs).
#[derive(Clone, Debug)]
pub struct Light {
    /// The frame's time, ns since the Unix epoch.
    pub time_unix_ns: u64,
    values: [f32; NAMES.len()],
    hists: [Vec<(u8, u64)>; HISTS.len()],
}

impl Light {
    fn of(b: &Frame, f: &Frame) -> Light {
        let values = values(b, f).map(|v| v.map_or(f32::NAN, |v| v as f32));
        let hists = HISTS.map(|h| added(b, f, h));
        Light {
            time_unix_ns: f.time_unix_ns,
            values,
            hists,
        }
    }

    fn value(&self, k: usize) -> Option<f64> {
        let v = self.values[k];
        (!v.is_nan()).then_some(f64::from(v))
    }
}

/// Histogram `hist`'s counts added from frame `b` to frame `f`, by log2 row (a counter
/// that went back, a restarted daemon's, counts from zero).
fn added(b: &Frame, f: &Frame, hist: &str) -> Vec<(u8, u64)> {
    let Some(now) = slots(f, hist) else {
        return Vec::new();
    };
    let before = slots(b, hist).unwrap_or_default();
    let reset = now.iter().zip(&before).any(|(a, z)| a < z);
    let mut rows: Vec<(u8, u64)> = Vec::new();
    for (k, v) in now.iter().enumerate() {
        let add = if reset {
            *v
        } else {
            v - before.get(k).copied().unwrap_or(0)
        };
        if add == 0 {
            continue;
        }
        let r = log2_row(k) as u8;
        match rows.last_mut() {
            Some((last, n)) if *last == r => *n += add,
            _ => rows.push((r, add)),
        }
    }
    rows
}

/// Frames decoded once, kept for the ranges asked since: what a cold range costs is the
/// archive's decoding (every frame, every process: see docs/measured.md), and a second
/// look at it, or a part of it, costs nothing. Bounded: past [`Store::MAX`] intervals
/// it starts again.
#[derive(Default)]
pub struct Store {
    /// By time.
    lights: std::collections::BTreeMap<u64, Light>,
    /// The ranges read whole, sorted, disjoint.
    covered: Vec<(u64, u64)>,
}

impl Store {
    /// Intervals kept at most (a week at 5 s is 121,000; ~150 bytes each).
    pub const MAX: usize = 250_000;

    /// The intervals whose frames are in [from, to], decoding what is not kept yet.
    pub fn range(&mut self, cursor: &mut Cursor, from: u64, to: u64) -> Vec<Light> {
        for (a, b) in self.missing(from, to) {
            if self.lights.len() > Self::MAX {
                self.lights.clear();
                self.covered.clear();
            }
            let mut last = None;
            if cursor.seek_from(a) {
                while let Some(f) = cursor.current() {
                    if f.time_unix_ns > b {
                        break;
                    }
                    last = Some(f.time_unix_ns);
                    if let Some(before) = cursor.before() {
                        self.lights.insert(f.time_unix_ns, Light::of(before, f));
                    }
                    if !cursor.forward() {
                        break;
                    }
                }
            }
            // Only what the archive held to its end is known whole (the newest file
            // grows).
            let end = if cursor.current().is_some_and(|f| f.time_unix_ns > b) {
                b
            } else {
                last.unwrap_or(a)
            };
            self.cover(a, end);
        }
        self.lights
            .range(from..=to)
            .map(|(_, l)| l.clone())
            .collect()
    }

    fn missing(&self, from: u64, to: u64) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut at = from;
        for &(a, b) in &self.covered {
            if b < at || a > to {
                continue;
            }
            if a > at {
                out.push((at, a - 1));
            }
            at = at.max(b.saturating_add(1));
        }
        if at <= to {
            out.push((at, to));
        }
        out
    }

    fn cover(&mut self, a: u64, b: u64) {
        if b < a {
            return;
        }
        self.covered.push((a, b));
        self.covered.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(self.covered.len());
        for &(x, y) in &self.covered {
            match merged.last_mut() {
                Some(last) if x <= last.1.saturating_add(1) => last.1 = last.1.max(y),
                _ => merged.push((x, y)),
            }
        }
        self.covered = merged;
    }
}

/// The machine's timelines over [from, to] in `points` buckets.
pub fn timelines(lights: &[Light], from: u64, to: u64, points: usize) -> Timelines {
    let n = points.clamp(1, MAX_POINTS);
    let mut series: Vec<Series> = NAMES
        .iter()
        .map(|(name, label, unit)| Series {
            name,
            label,
            unit,
            min: vec![None; n],
            max: vec![None; n],
        })
        .collect();
    for l in lights {
        let Some(i) = bucket(l.time_unix_ns, from, to, n) else {
            continue;
        };
        for (k, s) in series.iter_mut().enumerate() {
            let Some(v) = l.value(k) else { continue };
            s.min[i] = Some(s.min[i].map_or(v, |m: f64| m.min(v)));
            s.max[i] = Some(s.max[i].map_or(v, |m: f64| m.max(v)));
        }
    }
    let frames = lights.len() as u64;
    let t = starts(from, to, n);
    let (t, series) = compact(t, series);
    Timelines {
        from_unix_ns: from,
        to_unix_ns: to,
        t,
        series,
        frames,
    }
}

/// Only the buckets that hold a frame (fewer frames than pixels leave most empty, and a
/// line is drawn only between neighbours), with one empty bucket kept where the record
/// has a gap (more than three times the median step between kept buckets), so a gap is not drawn
/// as a line across it.
fn compact(t: Vec<f64>, mut series: Vec<Series>) -> (Vec<f64>, Vec<Series>) {
    let kept: Vec<usize> = (0..t.len())
        .filter(|&i| series.iter().any(|s| s.max[i].is_some()))
        .collect();
    if kept.len() < 2 {
        return (t, series);
    }
    let mut steps: Vec<f64> = kept.windows(2).map(|w| t[w[1]] - t[w[0]]).collect();
    steps.sort_by(f64::total_cmp);
    let spacing = steps[steps.len() / 2];
    let mut order: Vec<Option<usize>> = Vec::with_capacity(kept.len());
    for (j, &i) in kept.iter().enumerate() {
        if j > 0 && t[i] - t[kept[j - 1]] > 3.0 * spacing && i > kept[j - 1] + 1 {
            order.push(None);
        }
        order.push(Some(i));
    }
    let new_t: Vec<f64> = order
        .iter()
        .enumerate()
        .map(|(j, o)| match o {
            Some(i) => t[*i],
            // The gap's first empty bucket.
            None => t[order[j - 1].expect("a gap follows a bucket") + 1],
        })
        .collect();
    for s in &mut series {
        let pick = |v: &Vec<Option<f64>>| {
            order
                .iter()
                .map(|o| o.and_then(|i| v[i]))
                .collect::<Vec<_>>()
        };
        s.min = pick(&s.min);
        s.max = pick(&s.max);
    }
    (new_t, series)
}

/// A frame's cumulative slots of histogram `hist` (biolat: every disk and operation
/// summed).
fn slots(f: &Frame, hist: &str) -> Option<Vec<u64>> {
    match hist {
        "runqlat" => f.hists.runqlat_us.clone(),
        "biolat" if !f.hists.biolat.is_empty() => {
            let mut sum: Vec<u64> = Vec::new();
            for d in &f.hists.biolat {
                if sum.len() < d.slots.len() {
                    sum.resize(d.slots.len(), 0);
                }
                for (s, v) in sum.iter_mut().zip(&d.slots) {
                    *s += v;
                }
            }
            Some(sum)
        }
        "connect" => f.hists.connect_us.clone(),
        _ => None,
    }
}

/// The log2 row of a histogram slot (kernstat-model's hist: log2 buckets cut in 8
/// linear sub-buckets): row r holds [2^r, 2^(r+1)), row 0 also 0.
fn log2_row(slot: usize) -> usize {
    let (lo, _) = kernstat_model::hist::slot_bounds(slot);
    if lo < 2 {
        0
    } else {
        63 - lo.leading_zeros() as usize
    }
}

/// The histograms a heatmap can show.
pub const HISTS: [&str; 3] = ["runqlat", "biolat", "connect"];

/// Histogram `hist` over [from, to] in `points` buckets: the counts added between
/// frames.
pub fn heatmap(lights: &[Light], hist: &str, from: u64, to: u64, points: usize) -> Heatmap {
    let n = points.clamp(1, MAX_POINTS);
    let mut counts: Vec<Vec<u64>> = vec![Vec::new(); n];
    let mut total = 0;
    let mut width = 0;
    let which = HISTS.iter().position(|h| *h == hist).unwrap_or(0);
    for l in lights {
        let Some(i) = bucket(l.time_unix_ns, from, to, n) else {
            continue;
        };
        let row = &mut counts[i];
        for &(r, add) in &l.hists[which] {
            let r = usize::from(r);
            if row.len() <= r {
                row.resize(r + 1, 0);
            }
            row[r] += add;
            total += add;
            width = width.max(r + 1);
        }
    }
    // Up to the highest slot that has a count (a histogram has 64 or more, mostly empty).
    width = counts
        .iter()
        .filter_map(|row| row.iter().rposition(|v| *v > 0))
        .max()
        .map_or(0, |k| k + 1)
        .min(width);
    for row in &mut counts {
        row.resize(width, 0);
    }
    Heatmap {
        hist: hist.to_string(),
        t: starts(from, to, n),
        slots_us: (0..width)
            .map(|k| {
                if k == 0 {
                    0
                } else {
                    1u64.checked_shl(k as u32).unwrap_or(u64::MAX)
                }
            })
            .collect(),
        counts,
        total,
    }
}

/// The mean of each timeline over [from, to] (for comparing two windows).
pub fn means(lights: &[Light]) -> Vec<(&'static str, Option<f64>)> {
    let mut sum = [0.0; NAMES.len()];
    let mut count = [0u64; NAMES.len()];
    for l in lights {
        for (k, (sum, count)) in sum.iter_mut().zip(count.iter_mut()).enumerate() {
            if let Some(v) = l.value(k) {
                *sum += v;
                *count += 1;
            }
        }
    }
    NAMES
        .iter()
        .enumerate()
        .map(|(k, (name, _, _))| (*name, (count[k] > 0).then(|| sum[k] / count[k] as f64)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_cover_the_range_and_nothing_outside() {
        assert_eq!(bucket(100, 100, 200, 10), Some(0));
        assert_eq!(bucket(199, 100, 200, 10), Some(9));
        assert_eq!(bucket(200, 100, 200, 10), Some(9));
        assert_eq!(bucket(99, 100, 200, 10), None);
        assert_eq!(bucket(201, 100, 200, 10), None);
        assert_eq!(bucket(150, 100, 100, 10), None);
    }

    #[test]
    fn slots_fall_in_their_power_of_two_row() {
        use kernstat_model::hist::slot_of;
        assert_eq!(log2_row(slot_of(0)), 0);
        assert_eq!(log2_row(slot_of(1)), 0);
        assert_eq!(log2_row(slot_of(3)), 1);
        assert_eq!(log2_row(slot_of(5)), 2);
        assert_eq!(log2_row(slot_of(1000)), 9);
        assert_eq!(log2_row(slot_of(1 << 20)), 20);
    }

    #[test]
    fn empty_buckets_go_and_a_gap_keeps_one() {
        let t: Vec<f64> = (0..10).map(f64::from).collect();
        let at = |idx: &[usize]| -> Vec<Option<f64>> {
            (0..10).map(|i| idx.contains(&i).then_some(1.0)).collect()
        };
        let s = vec![Series {
            name: "x",
            label: "x",
            unit: "",
            min: at(&[0, 1, 2, 8, 9]),
            max: at(&[0, 1, 2, 8, 9]),
        }];
        let (t2, s2) = compact(t, s);
        assert_eq!(t2, vec![0.0, 1.0, 2.0, 3.0, 8.0, 9.0]);
        assert_eq!(
            s2[0].max,
            vec![Some(1.0), Some(1.0), Some(1.0), None, Some(1.0), Some(1.0)]
        );
    }

    #[test]
    fn the_store_reads_only_what_it_has_not_covered() {
        let mut st = Store::default();
        st.cover(10, 20);
        st.cover(30, 40);
        assert_eq!(st.missing(0, 50), vec![(0, 9), (21, 29), (41, 50)]);
        assert_eq!(st.missing(12, 18), vec![]);
        st.cover(21, 29);
        assert_eq!(st.covered, vec![(10, 40)]);
        assert_eq!(st.missing(5, 45), vec![(5, 9), (41, 45)]);
    }
}
