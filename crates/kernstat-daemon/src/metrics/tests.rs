//! Unit tests of `mod.rs`.

use super::*;

#[test]
fn a_sample_is_encoded_once_whatever_the_scrapes() {
    let e = Exporter::new(10);
    e.publish(MetricsSample::default());
    let (a, b) = (e.encode_text().unwrap(), e.encode_text().unwrap());
    assert!(!a.is_empty());
    assert_eq!(
        a.as_ptr(),
        b.as_ptr(),
        "the second scrape is served the same bytes"
    );
    let (c, d) = (
        e.encode_classic_text().unwrap(),
        e.encode_classic_text().unwrap(),
    );
    assert_eq!(c.as_ptr(), d.as_ptr());
    let (p, q) = (e.encode_protobuf().unwrap(), e.encode_protobuf().unwrap());
    assert_eq!(p.as_ptr(), q.as_ptr());
    assert_eq!(e.scrapes(), 6);
    e.publish(MetricsSample::default());
    let fresh = e.encode_text().unwrap();
    assert_ne!(fresh.as_ptr(), a.as_ptr(), "a new sample is encoded again");
}

#[test]
fn monotonic_counters_never_go_back() {
    let mut m = Monotonic::default();
    assert_eq!(m.observe(100), 100);
    assert_eq!(m.observe(150), 150);
    assert_eq!(m.observe(120), 150, "a lower reading adds nothing");
    assert_eq!(m.observe(130), 160, "and counts on from it");
}

#[test]
fn top_by_keeps_the_largest_user_processes() {
    let p = |pid, rss, kthread| ProcRate {
        pid,
        rss_bytes: rss,
        kthread,
        ..Default::default()
    };
    let procs = [
        p(1, 10, false),
        p(2, 30, false),
        p(3, 99, true),
        p(4, 30, false),
    ];
    let top: Vec<u32> = top_by(&procs, 2, |p| p.rss_bytes as f64)
        .iter()
        .map(|p| p.pid)
        .collect();
    assert_eq!(top, [2, 4]);
}

#[test]
fn whole_values_are_written_as_integers_and_fractions_as_floats() {
    let e = Exporter::new(10);
    let mut s = MetricsSample {
        sample_us: 250.0,
        self_rss_bytes: 9_007_199_254_740_993, // above 2^53: not exact as f64
        ..MetricsSample::default()
    };
    s.model.ncpus = 2;
    e.publish(s);
    let text = e.encode_text().unwrap();
    let text = std::str::from_utf8(&text).unwrap();
    let line = |name: &str| {
        text.lines()
            .find(|l| l.split(' ').next() == Some(name))
            .unwrap_or_else(|| panic!("{name} in {text}"))
            .to_string()
    };
    assert_eq!(line("kernstat_cpus_online"), "kernstat_cpus_online 2");
    assert_eq!(
        line("kernstat_sample_duration_seconds"),
        "kernstat_sample_duration_seconds 0.00025"
    );
    assert_eq!(
        line("kernstat_self_resident_memory_bytes"),
        "kernstat_self_resident_memory_bytes 9007199254740992.0"
    );
}
