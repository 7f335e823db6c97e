//! Property tests of the /proc and sysfs parsers: whatever a file holds (truncated,
//! huge numbers, invalid UTF-8, missing or extra fields, a command name with spaces and
//! parentheses), a parser returns a value or None and never panics or overflows; and a
//! well-formed line reads back the numbers it was made of.
//!
//! Cases per property: proptest's default (256) in `make test`; `make fuzz` sets
//! PROPTEST_CASES for longer runs.

use kernstat_sources::{file, procs, ps_procfs, sysfs, system};
use proptest::prelude::*;

/// Bytes that look like /proc text more often than uniform bytes would.
fn procish() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        proptest::collection::vec(any::<u8>(), 0..600),
        proptest::collection::vec(
            prop::sample::select(b" \n\t:()0123456789-abcdefghijklmnopqrstuvwxyz_=.kB".to_vec()),
            0..600
        ),
    ]
}

/// A number as the kernel might print it, or something that is almost one.
fn field() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => any::<u64>().prop_map(|n| n.to_string()),
        1 => any::<i64>().prop_map(|n| n.to_string()),
        1 => "[0-9]{19,40}",
        1 => "[a-zA-Z()]{0,5}",
        1 => Just(String::new()),
    ]
}

/// A /proc/PID/stat line: pid, a command name with spaces and parentheses, and 50
/// fields of anything number-like, cut anywhere.
fn stat_line() -> impl Strategy<Value = Vec<u8>> {
    (
        field(),
        "[ a-z()\\)]{0,16}",
        proptest::collection::vec(field(), 0..52),
        any::<prop::sample::Index>(),
    )
        .prop_map(|(pid, comm, rest, cut)| {
            let mut s = format!("{pid} ({comm}) {}", rest.join(" ")).into_bytes();
            s.truncate(cut.index(s.len() + 1));
            s
        })
}

fn keyed_text(keys: &'static [&'static str]) -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec((prop::sample::select(keys), field()), 0..20).prop_map(|kv| {
        kv.iter()
            .map(|(k, v)| format!("{k}: {v} kB\n"))
            .collect::<String>()
            .into_bytes()
    })
}

proptest! {
    #[test]
    fn stat_lines_never_panic(line in prop_oneof![stat_line(), procish()]) {
        let _ = procs::parse_stat_line(&line, 10_000_000, 4096);
        let _ = ps_procfs::parse_stat(&line, 10_000_000, 4096);
    }

    #[test]
    fn well_formed_stat_lines_read_back(
        pid in 1u32..4_000_000,
        utime in 0u64..1 << 36,
        stime in 0u64..1 << 36,
        threads in 1u64..100_000,
        start in any::<u32>(),
        rss in 0u64..1 << 36,
    ) {
        let line = format!(
            "{pid} (a (b) c) S 1 1 1 0 -1 4194560 0 0 0 0 {utime} {stime} 0 0 20 0 {threads} 0 {start} 0 {rss} 0"
        );
        let (p, n) = procs::parse_stat_line(line.as_bytes(), 10_000_000, 4096).unwrap();
        prop_assert_eq!(p.pid, pid);
        prop_assert_eq!(p.cpu_ns, (utime + stime) * 10_000_000);
        prop_assert_eq!(p.rss_bytes, rss * 4096);
        prop_assert_eq!(p.start, start as u64);
        prop_assert_eq!(n, threads);
        prop_assert_eq!(p.comm.as_str(), "a (b) c");
    }

    #[test]
    fn io_status_meminfo_psi_never_panic(buf in procish()) {
        let _ = procs::parse_io(&buf);
        let _ = ps_procfs::parse_ids(&buf);
        let _ = system::parse_meminfo(&buf);
        let _ = system::parse_psi(&buf);
        let mut cores = Vec::new();
        let _ = system::parse_stat(&buf, 10_000_000, &mut cores);
        let _ = file::parse_u64(&buf);
        let _ = file::parse_i64(&buf);
        let _ = file::parse_f32(&buf);
        let _ = sysfs::parse_dpm_max_mhz(&String::from_utf8_lossy(&buf));
    }

    #[test]
    fn keyed_files_with_huge_or_odd_values_never_panic(
        meminfo in keyed_text(&["MemTotal", "MemAvailable", "MemFree", "SwapTotal", "SwapFree", "Cached"]),
        io in keyed_text(&["read_bytes", "write_bytes", "rchar", "cancelled_write_bytes"]),
        status in keyed_text(&["Uid", "Gid", "Name", "State", "Threads"]),
    ) {
        let _ = system::parse_meminfo(&meminfo);
        let _ = procs::parse_io(&io);
        let _ = ps_procfs::parse_ids(&status);
    }

    #[test]
    fn proc_stat_with_odd_cpu_lines_never_panics(
        lines in proptest::collection::vec(
            ("cpu[0-9]{0,6}", proptest::collection::vec(field(), 0..12)),
            0..70,
        )
    ) {
        let text: String = lines
            .iter()
            .map(|(name, f)| format!("{name} {}\n", f.join(" ")))
            .collect();
        let mut cores = Vec::new();
        let _ = system::parse_stat(text.as_bytes(), 10_000_000, &mut cores);
    }

    #[test]
    fn psi_lines_read_back(some in 0u32..10_000, full in 0u32..10_000, total in any::<u64>()) {
        let (s, f) = (some as f64 / 100.0, full as f64 / 100.0);
        let text = format!(
            "some avg10={s:.2} avg60=0.00 avg300=0.00 total={total}\nfull avg10={f:.2} avg60=0.00 avg300=0.00 total={total}\n"
        );
        let (a, b) = system::parse_psi(text.as_bytes());
        let (a, b) = (a.unwrap(), b.unwrap());
        prop_assert!((a.avg10 as f64 - s).abs() < 0.006, "{} vs {}", a.avg10, s);
        prop_assert!((b.avg10 as f64 - f).abs() < 0.006);
    }
}
