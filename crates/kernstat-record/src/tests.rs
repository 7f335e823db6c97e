//! The format's promises on made-up samples: what goes in comes out, deltas included;
//! a torn end, a damaged frame, a newer version and retention each do what the module
//! header says.

use super::*;
use kernstat_model::record::ProcDetail;
use kernstat_model::ProcRate;

const T0: u64 = 1_764_000_000_000_000_000; // 2025-11-24T16:00:00Z

fn frame(i: u64) -> Frame {
    let mut f = Frame {
        time_unix_ns: T0 + i * 5_000_000_000,
        boot_ns: 1_000 + i,
        ..Default::default()
    };
    f.model.cpu_percent = i as f64;
    f.model.procs = (1..300)
        .map(|pid| ProcRate {
            pid,
            cpu_ns: pid as u64 * 1000 + if pid == 7 { i * 5 } else { 0 },
            state: b'S',
            ..Default::default()
        })
        .collect();
    f.details = (1..300)
        .map(|pid| ProcDetail {
            pid,
            ppid: 1,
            cmd: format!("/usr/bin/daemon-{pid} --flag"),
            ..Default::default()
        })
        .collect();
    f
}

fn forever() -> Retention {
    Retention {
        max_age: Duration::from_secs(1 << 40),
        max_bytes: u64::MAX,
    }
}

fn all(dir: &Path) -> (Vec<Frame>, Vec<String>) {
    let mut warnings = Vec::new();
    let frames = Archive::open(dir)
        .unwrap()
        .frames(0, u64::MAX, &mut |w| warnings.push(w))
        .unwrap();
    (frames, warnings)
}

#[test]
fn samples_come_back_as_written_and_deltas_are_small() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = Writer::open(dir.path(), forever(), 0o600).unwrap();
    let mut sizes = Vec::new();
    for i in 0..130 {
        sizes.push(w.append(&frame(i)).unwrap());
    }
    assert!(sizes[0].key && !sizes[1].key && sizes[60].key && !sizes[61].key);
    assert!(
        sizes[5].bytes * 10 < sizes[0].bytes,
        "{:?} vs {:?}",
        sizes[5],
        sizes[0]
    );
    let (frames, warnings) = all(dir.path());
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(frames.len(), 130);
    for (i, f) in frames.iter().enumerate() {
        assert_eq!(f.time_unix_ns, frame(i as u64).time_unix_ns);
        assert_eq!(f.model.cpu_percent, i as f64);
        assert_eq!(f.processes(), frame(i as u64).processes());
        assert_eq!(f.details, frame(i as u64).details);
    }
    // 130 samples at 5 s: 10 min 50 s, all in one hour's file.
    assert_eq!(Archive::open(dir.path()).unwrap().files().unwrap().len(), 1);
    let a = Archive::open(dir.path()).unwrap();
    let at = a.at(T0 + 17_000_000_000, &mut |_| {}).unwrap();
    assert_eq!(
        at.model.cpu_percent, 3.0,
        "the last sample at or before the time"
    );
    let before_all = a.at(T0 - 1, &mut |_| {}).unwrap();
    assert_eq!(before_all.model.cpu_percent, 0.0, "else the first after");
}

#[test]
fn a_delta_stays_small_when_a_sample_is_larger_than_zstds_usual_window() {
    // 10,000 processes: the previous sample is megabytes back.
    let big = |i: u64| {
        let mut f = frame(i);
        f.model.procs = (1..10_000)
            .map(|pid| ProcRate {
                pid,
                cpu_ns: pid as u64 * 1000 + if pid % 97 == 0 { i * 5000 } else { 0 },
                state: b'S',
                ..Default::default()
            })
            .collect();
        f.details = (1..10_000)
            .map(|pid| ProcDetail {
                pid,
                ppid: 1,
                start_ns: pid as u64 * 77_777,
                cmd: "/usr/bin/worker --idle".into(),
                ..Default::default()
            })
            .collect();
        f
    };
    let dir = tempfile::tempdir().unwrap();
    let mut w = Writer::open(dir.path(), forever(), 0o600).unwrap();
    let key = w.append(&big(0)).unwrap();
    let delta = w.append(&big(1)).unwrap();
    assert!(delta.bytes * 20 < key.bytes, "{delta:?} vs {key:?}");
    let (frames, _) = all(dir.path());
    assert_eq!(frames[1].model.procs, big(1).model.procs);
}

#[test]
fn a_torn_last_frame_is_cut_on_reopen_and_ignored_by_readers() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = Writer::open(dir.path(), forever(), 0o600).unwrap();
    for i in 0..5 {
        w.append(&frame(i)).unwrap();
    }
    drop(w);
    let path = &Archive::open(dir.path()).unwrap().files().unwrap()[0].0;
    let whole = fs::metadata(path).unwrap().len();
    // A crash mid-write: half a frame at the end.
    let mut f = OpenOptions::new().append(true).open(path).unwrap();
    f.write_all(&[9, 0, 0, 0, 1, 2, 3, 4, 1, 0, 0, 0]).unwrap();
    drop(f);
    let (frames, warnings) = all(dir.path());
    assert_eq!(frames.len(), 5);
    assert!(
        warnings.is_empty(),
        "the newest file's torn end is a write in progress: {warnings:?}"
    );
    let mut w = Writer::open(dir.path(), forever(), 0o600).unwrap();
    assert!(
        w.append(&frame(5)).unwrap().key,
        "a reopened file continues with a key"
    );
    drop(w);
    assert!(fs::metadata(path).unwrap().len() > whole);
    let (frames, warnings) = all(dir.path());
    assert_eq!(frames.len(), 6, "{warnings:?}");
}

#[test]
fn a_damaged_frame_costs_the_samples_up_to_the_next_key_only() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = Writer::open(dir.path(), forever(), 0o600).unwrap();
    let mut offsets = vec![FILE_HEADER as u64];
    for i in 0..70 {
        let a = w.append(&frame(i)).unwrap();
        offsets.push(offsets.last().unwrap() + a.bytes);
    }
    drop(w);
    let path = Archive::open(dir.path()).unwrap().files().unwrap()[0]
        .0
        .clone();
    let mut bytes = fs::read(&path).unwrap();
    // Flip a byte in sample 10's payload.
    bytes[offsets[10] as usize + FRAME_HEADER + 3] ^= 0xff;
    fs::write(&path, &bytes).unwrap();
    let (frames, warnings) = all(dir.path());
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("fails its checksum"), "{warnings:?}");
    let kept: Vec<f64> = frames.iter().map(|f| f.model.cpu_percent).collect();
    // 0..=9 read, 10..=59 lost (they depend on 10), 60 is a key.
    assert_eq!(kept.len(), 10 + 10, "{kept:?}");
    assert_eq!(kept[9], 9.0);
    assert_eq!(kept[10], 60.0);
}

#[test]
fn a_file_from_a_newer_version_is_refused_in_one_sentence() {
    let dir = tempfile::tempdir().unwrap();
    let mut w = Writer::open(dir.path(), forever(), 0o600).unwrap();
    w.append(&frame(0)).unwrap();
    drop(w);
    let path = Archive::open(dir.path()).unwrap().files().unwrap()[0]
        .0
        .clone();
    let mut bytes = fs::read(&path).unwrap();
    bytes[6] = 2;
    fs::write(&path, &bytes).unwrap();
    let err = Archive::open(dir.path())
        .unwrap()
        .at(T0, &mut |_| {})
        .unwrap_err();
    assert!(
        err.contains("written by a newer kernstat (archive format 2; this kernstat reads up to 1)"),
        "{err}"
    );
    let (frames, warnings) = all(dir.path());
    assert!(frames.is_empty());
    assert_eq!(warnings.len(), 1);
    // And the writer does not append to it.
    let mut w = Writer::open(dir.path(), forever(), 0o600).unwrap();
    assert!(w.append(&frame(1)).is_err());
}

/// The hours (after T0) whose files the archive holds.
fn hours_kept(dir: &Path) -> Vec<u64> {
    let hour = 3_600_000_000_000u64;
    let files = Archive::open(dir).unwrap().files().unwrap();
    files.iter().map(|f| (f.1 - T0) / hour).collect()
}

#[test]
fn retention_deletes_whole_files_by_age_and_by_size() {
    let dir = tempfile::tempdir().unwrap();
    let hour = 3_600_000_000_000u64;
    let mut w = Writer::open(
        dir.path(),
        Retention {
            max_age: Duration::from_secs(3 * 3600),
            max_bytes: u64::MAX,
        },
        0o600,
    )
    .unwrap();
    for h in 0..6 {
        let mut f = frame(0);
        f.time_unix_ns = T0 + h * hour;
        w.append(&f).unwrap();
    }
    // At hour 5 the files of hours 0 and 1 ended more than 3 h ago.
    assert_eq!(hours_kept(dir.path()), vec![2, 3, 4, 5]);
    let one = fs::metadata(dir.path().join(file_name(T0 + 5 * hour)))
        .unwrap()
        .len();
    drop(w);
    let mut w = Writer::open(
        dir.path(),
        Retention {
            max_age: Duration::from_secs(1 << 40),
            max_bytes: one * 2 + one / 2,
        },
        0o600,
    )
    .unwrap();
    let mut f = frame(0);
    f.time_unix_ns = T0 + 6 * hour;
    let a = w.append(&f).unwrap();
    assert_eq!(
        a.deleted, 3,
        "four files and the new one, room for two and a half"
    );
    assert_eq!(hours_kept(dir.path()), vec![5, 6]);
}

#[test]
fn file_names_are_utc_hours() {
    assert_eq!(file_name(T0), "20251124T16.ksr");
    assert_eq!(file_hour("20251124T16.ksr"), Some(T0));
    assert_eq!(file_hour("notes.txt"), None);
}
