//! The format's promises on made-up samples: what goes in comes out through the cursor,
//! forward and back, with the frame before each; deltas are small; a torn end or a tail
//! of zeros is cut back once and said in one line; a damaged frame costs the frames up
//! to the next key; a newer version is refused and skipped; one writer per directory;
//! retention by age and by size keeps its floor; the version-1 fixture still reads.

use std::path::Path;
use std::time::Duration;

use kernstat_record::frame::{Ended, Frame, Proc};
use kernstat_record::{Archive, Retention, Writer};

const T0: u64 = 1_764_000_000_000_000_000; // 2025-11-24T16:00:00Z
const HOUR: u64 = 3_600_000_000_000;

fn frame(i: u64) -> Frame {
    Frame {
        time_unix_ns: T0 + i * 5_000_000_000,
        boot_ns: 1_000_000_000_000 + i * 5_000_000_000,
        procs: (1..300)
            .map(|pid| Proc {
                pid,
                ppid: 1,
                start_ns: pid as u64,
                cpu_ns: pid as u64 * 1000 + if pid == 7 { i * 500_000_000 } else { 0 },
                state: b'S',
                comm: format!("daemon-{pid}"),
                cmd: format!("/usr/bin/daemon-{pid} --flag"),
                ..Default::default()
            })
            .collect(),
        ended: vec![Ended {
            pid: 10_000 + i as u32,
            cpu_ns: i,
            comm: "short".into(),
            ..Default::default()
        }],
        ..Default::default()
    }
}

fn forever() -> Retention {
    Retention {
        max_age: Duration::from_secs(1 << 40),
        max_bytes: u64::MAX,
    }
}

/// Every frame from the first on, and what the cursor warned of.
fn all(dir: &Path) -> (Vec<Frame>, Vec<String>) {
    let a = Archive::open(dir).unwrap();
    let mut c = a.cursor().unwrap();
    let mut out = Vec::new();
    if c.first() {
        out.push(c.current().unwrap().clone());
        while c.forward() {
            out.push(c.current().unwrap().clone());
        }
    }
    (out, std::mem::take(&mut c.warnings))
}

#[test]
fn samples_come_back_as_written_forward_and_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = Writer::open(dir.path(), forever(), 0o600).unwrap();
    let mut sizes = Vec::new();
    for i in 0..130 {
        sizes.push(w.append(&frame(i)).unwrap());
    }
    assert!(sizes[0].key && !sizes[1].key && sizes[60].key);
    // A delta of one changed process is a few dozen bytes; a key frame thousands.
    assert!(sizes[1].bytes < 200, "{:?}", sizes[1]);
    assert!(sizes[0].bytes > 2_000, "{:?}", sizes[0]);
    drop(w);
    let (frames, warnings) = all(dir.path());
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(frames.len(), 130);
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(*f, frame(i as u64), "frame {i}");
    }
    // Back from the end, each frame with the one before it.
    let a = Archive::open(dir.path()).unwrap();
    let mut c = a.cursor().unwrap();
    assert!(c.seek_from(frame(129).time_unix_ns));
    for i in (1..130).rev() {
        assert_eq!(c.current().unwrap().time_unix_ns, frame(i).time_unix_ns);
        assert_eq!(c.before().unwrap().time_unix_ns, frame(i - 1).time_unix_ns);
        assert!(c.back());
    }
    assert!(c.before().is_none(), "the first frame has none before it");
    assert!(!c.back());
    // Read machine-only (what a timeline reads), forward and back: the same frames
    // without their lists, each with its counts, and the frame before it.
    let mut c = a.cursor().unwrap().machine_only();
    assert!(c.first());
    for i in 0..130u64 {
        let mut want = frame(i);
        want.strip();
        assert_eq!(*c.current().unwrap(), want, "frame {i}");
        assert_eq!(c.current().unwrap().process_count(), 299);
        assert_eq!(c.current().unwrap().ended_count(), 1);
        if i > 0 {
            assert_eq!(c.before().unwrap().time_unix_ns, frame(i - 1).time_unix_ns);
        }
        assert_eq!(c.forward(), i < 129);
    }
    assert!(c.seek_from(frame(70).time_unix_ns) && c.back());
    let mut want = frame(69);
    want.strip();
    assert_eq!(*c.current().unwrap(), want);
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert_eq!(
        a.span().unwrap(),
        Some((frame(0).time_unix_ns, frame(129).time_unix_ns))
    );
}

#[test]
fn a_torn_end_or_a_tail_of_zeros_is_cut_back_once() {
    for tail in [&b"\x10\x00\x00"[..], &[0u8; 4096][..]] {
        let dir = tempfile::tempdir().unwrap();
        let mut w = Writer::open(dir.path(), forever(), 0o600).unwrap();
        for i in 0..5 {
            w.append(&frame(i)).unwrap();
        }
        drop(w);
        let file = dir.path().join(kernstat_record::file_name(T0));
        let mut bytes = std::fs::read(&file).unwrap();
        bytes.extend_from_slice(tail);
        std::fs::write(&file, &bytes).unwrap();
        let (frames, warnings) = all(dir.path());
        assert_eq!(frames.len(), 5);
        assert!(warnings.len() <= 1, "{warnings:?}");
        // A restarted writer cuts it back and appends frames that read.
        let mut w = Writer::open(dir.path(), forever(), 0o600).unwrap();
        for i in 5..8 {
            w.append(&frame(i)).unwrap();
        }
        assert!(
            w.notes.iter().any(|n| n.contains("cut back")),
            "{:?}",
            w.notes
        );
        drop(w);
        let (frames, warnings) = all(dir.path());
        assert_eq!(frames.len(), 8, "{warnings:?}");
        assert!(warnings.is_empty(), "{warnings:?}");
    }
}

#[test]
fn a_second_writer_is_refused_naming_the_first() {
    let dir = tempfile::tempdir().unwrap();
    let _w = Writer::open(dir.path(), forever(), 0o600).unwrap();
    let e = Writer::open(dir.path(), forever(), 0o600).err().unwrap();
    let text = e.to_string();
    assert!(
        text.contains("already recorded by pid") && text.contains(&std::process::id().to_string()),
        "{text}"
    );
}

#[test]
fn a_flipped_byte_costs_the_frames_to_the_next_key() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = Writer::open(dir.path(), forever(), 0o600).unwrap();
    for i in 0..70 {
        w.append(&frame(i)).unwrap();
    }
    drop(w);
    let file = dir.path().join(kernstat_record::file_name(T0));
    let mut bytes = std::fs::read(&file).unwrap();
    // Inside the third frame's payload.
    let len0 = u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize;
    let second = 8 + 24 + len0;
    let len1 = u32::from_le_bytes(bytes[second..second + 4].try_into().unwrap()) as usize;
    let third = second + 24 + len1;
    bytes[third + 30] ^= 0xff;
    std::fs::write(&file, &bytes).unwrap();
    let (frames, warnings) = all(dir.path());
    // Frames 0 and 1, then from the key frame at 60.
    let times: Vec<u64> = frames
        .iter()
        .map(|f| (f.time_unix_ns - T0) / 5_000_000_000)
        .collect();
    assert_eq!(times[..2], [0, 1]);
    assert_eq!(times[2], 60, "{times:?}");
    assert_eq!(frames.len(), 12);
    assert!(
        warnings.iter().any(|w| w.contains("checksum")),
        "{warnings:?}"
    );
}

#[test]
fn a_newer_version_is_refused_and_the_rest_read() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = Writer::open(dir.path(), forever(), 0o600).unwrap();
    w.append(&frame(0)).unwrap();
    drop(w);
    let newer = dir.path().join(kernstat_record::file_name(T0 + HOUR));
    std::fs::write(&newer, b"KSREC\0\x09\x00").unwrap();
    let (frames, warnings) = all(dir.path());
    assert_eq!(frames.len(), 1);
    assert!(
        warnings.iter().any(|w| w.contains("newer kernstat")),
        "{warnings:?}"
    );
}

#[test]
fn retention_deletes_by_age_and_by_size_but_keeps_its_floor() {
    let dir = tempfile::tempdir().unwrap();
    let retention = Retention {
        max_age: Duration::from_secs(3 * 3600),
        max_bytes: u64::MAX,
    };
    let mut w = Writer::open(dir.path(), retention, 0o600).unwrap();
    for h in 0..6 {
        let mut f = frame(0);
        f.time_unix_ns = T0 + h * HOUR;
        w.append(&f).unwrap();
    }
    // At hour 5 the files of hours 0 and 1 ended more than 3 h ago.
    let hours = |dir: &Path| -> Vec<u64> {
        let mut v: Vec<u64> = std::fs::read_dir(dir)
            .unwrap()
            .filter_map(|e| kernstat_record::file_hour(e.unwrap().file_name().to_str()?))
            .map(|h| (h - T0) / HOUR)
            .collect();
        v.sort();
        v
    };
    assert_eq!(hours(dir.path()), vec![2, 3, 4, 5]);
    drop(w);
    // By size: old hours go first, the last day's never (the floor), and the writer says
    // when it cannot get under its budget.
    let tiny = Retention {
        max_age: Duration::from_secs(30 * 24 * 3600),
        max_bytes: 1,
    };
    let dir = tempfile::tempdir().unwrap();
    let mut w = Writer::open(dir.path(), tiny, 0o600).unwrap();
    let mut last = None;
    for h in 0..30 {
        let mut f = frame(0);
        f.time_unix_ns = T0 + h * HOUR;
        last = Some(w.append(&f).unwrap());
    }
    let kept = hours(dir.path());
    assert_eq!(kept.first(), Some(&5), "the last 24 hours kept: {kept:?}");
    assert_eq!(kept.len(), 25);
    assert!(last.unwrap().over_budget);
}

#[test]
fn a_file_past_its_share_is_followed_by_another_in_the_same_hour() {
    let dir = tempfile::tempdir().unwrap();
    let retention = Retention {
        max_age: Duration::from_secs(7 * 24 * 3600),
        max_bytes: 48 << 20, // 1 MiB a file
    };
    let mut w = Writer::open(dir.path(), retention, 0o600).unwrap();
    for i in 0..700 {
        // Every frame a key frame's worth: new command lines each time.
        let mut f = frame(i % 700);
        for p in f.procs.iter_mut() {
            let x = (i + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ p.pid as u64;
            p.cmd = format!("{x:x}").repeat(4);
        }
        w.append(&f).unwrap();
    }
    drop(w);
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_str().unwrap().to_string())
        .filter(|n| n.ends_with(".ksr"))
        .collect();
    assert!(names.len() >= 2, "{names:?}");
    assert!(names.iter().any(|n| n.contains(".1.ksr")), "{names:?}");
    let (frames, warnings) = all(dir.path());
    assert_eq!(frames.len(), 700, "{warnings:?}");
}

#[test]
fn the_version_1_fixture_reads() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/v1");
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    let (frames, warnings) = all(&dir);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(frames.len() as u64, expected["frames"].as_u64().unwrap());
    machine_only_reads_the_same(&dir, &frames);
    for (f, (t, n)) in frames.iter().zip(
        expected["times"]
            .as_array()
            .unwrap()
            .iter()
            .zip(expected["processes"].as_array().unwrap()),
    ) {
        assert_eq!(f.time_unix_ns, t.as_u64().unwrap());
        assert_eq!(f.procs.len() as u64, n.as_u64().unwrap());
    }
    let pids: Vec<u64> = frames[0]
        .procs
        .iter()
        .take(10)
        .map(|p| p.pid as u64)
        .collect();
    let want: Vec<u64> = expected["first_pids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert_eq!(pids, want);
    assert!(frames[1].v1_cpu_percent.is_some());
    assert!(frames
        .iter()
        .all(|f| f.procs.iter().all(|p| p.start_ns > 0 || p.pid < 3)));
}

/// A file written by format 2's writer (before each process's run delay was recorded)
/// reads to the same values, its deltas applied, with a run delay of 0.
#[test]
fn the_version_2_fixture_reads() {
    check_fixture("v2");
}

/// The fixture of the version written now reads to the values it was written with
/// (examples/write_fixture.rs): a format change that slips through fails here.
#[test]
fn the_current_version_fixture_reads() {
    assert_eq!(
        kernstat_record::VERSION,
        3,
        "a new version: keep v3's reader and write its fixture"
    );
    check_fixture("v3");
}

/// Read machine-only, the archive in `dir` is `frames` without their lists (a mirror of
/// the process, ended or group record that misses a field misreads what follows it).
fn machine_only_reads_the_same(dir: &Path, frames: &[Frame]) {
    let mut c = Archive::open(dir).unwrap().cursor().unwrap().machine_only();
    assert!(c.first());
    for (i, f) in frames.iter().enumerate() {
        let mut want = f.clone();
        want.strip();
        assert_eq!(*c.current().unwrap(), want, "{}: frame {i}", dir.display());
        assert_eq!(c.forward(), i + 1 < frames.len());
    }
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
}

fn check_fixture(version: &str) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(version);
    let expected: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("expected.json")).unwrap()).unwrap();
    let (frames, warnings) = all(&dir);
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(frames.len() as u64, expected["frames"].as_u64().unwrap());
    machine_only_reads_the_same(&dir, &frames);
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(f.time_unix_ns, expected["times"][i].as_u64().unwrap());
        assert_eq!(f.machine.busy_ns, expected["busy_ns"][i].as_u64().unwrap());
        let pids: Vec<u64> = f.procs.iter().map(|p| u64::from(p.pid)).collect();
        let want: Vec<u64> = expected["pids"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_u64().unwrap())
            .collect();
        assert_eq!(pids, want);
    }
    let last = &expected["last"];
    let p = frames[3]
        .procs
        .iter()
        .find(|p| u64::from(p.pid) == last["pid"].as_u64().unwrap())
        .unwrap();
    assert_eq!(p.cpu_ns, last["cpu_ns"].as_u64().unwrap());
    assert_eq!(p.write_bytes, last["write_bytes"].as_u64().unwrap());
    assert_eq!(p.net.unwrap()[1][3], last["net_tx_other"].as_u64().unwrap());
    assert_eq!(p.comm, last["comm"].as_str().unwrap());
    assert_eq!(p.cmd, last["cmd"].as_str().unwrap());
    assert_eq!(p.cgroup, last["cgroup"].as_str().unwrap());
    assert_eq!(p.run_delay_ns, last["run_delay_ns"].as_u64().unwrap_or(0));
}

/// The line a replayed view prints says which sample it shows, the interval its rates
/// cover (the frames are 5 s apart) and how far that is from the time asked.
#[test]
fn the_recorded_line_names_the_sample_its_interval_and_the_offset() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = Writer::open(dir.path(), forever(), 0o600).unwrap();
    for i in 0..3 {
        w.append(&frame(i)).unwrap();
    }
    drop(w);
    let a = Archive::open(dir.path()).unwrap();
    let mut c = a.cursor().unwrap();
    assert!(c.seek_from(frame(0).time_unix_ns));
    let first = kernstat_record::replay::recorded_line(&c, 0);
    assert!(first.contains("the first sample: no rates"), "{first}");
    assert!(c.seek_from(frame(1).time_unix_ns));
    let line = kernstat_record::replay::recorded_line(&c, 120_000_000_000);
    assert!(line.starts_with("recorded at "), "{line}");
    assert!(line.contains("rates over the 5 s before it"), "{line}");
    assert!(line.contains("2 min from the time asked"), "{line}");
    assert!(
        !kernstat_record::replay::recorded_line(&c, 500_000_000).contains("from the time asked")
    );
}
