//! The layout, its reader and its writer together: round trips, growth, torn writes,
//! damage.

use super::*;

#[test]
fn values_round_trip_grow_and_replace() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("snapshot");
    let mut w = Writer::create(&p, 0o600, 2000).unwrap();
    w.set("load.one", b"0.42", false, 5).unwrap();
    w.set(
        &stored_key("git.branch", Some("/repo")),
        b"\"main\"",
        false,
        6,
    )
    .unwrap();
    let mut r = Reader::open(&p).unwrap();
    assert_eq!(r.interval_ms(), 2000);
    assert_eq!(r.get("load.one").unwrap().bytes, b"0.42");
    assert_eq!(r.get("git.branch\0/repo").unwrap().bytes, b"\"main\"");
    assert!(r.get("git.branch").is_none());
    // In place (fits), then larger (a new file: the reader follows).
    w.set("load.one", b"0.5", false, 7).unwrap();
    assert_eq!(
        r.get("load.one").unwrap(),
        Stored {
            bytes: b"0.5".to_vec(),
            error: false,
            updated_ns: 7
        }
    );
    let long = vec![b'7'; 1000];
    w.set("load.one", &long, false, 8).unwrap();
    assert_eq!(r.get("load.one").unwrap().bytes, long);
    w.set("x", b"failed: why", true, 9).unwrap();
    assert!(r.get("x").unwrap().error);
    w.remove("x").unwrap();
    assert!(r.get("x").is_none());
    // A hundred new keys at once: one new file, not a hundred.
    let before = w.rebuilds();
    let batch = (0..100)
        .map(|i| {
            (
                format!("new.{i}"),
                Stored {
                    bytes: b"1".to_vec(),
                    error: false,
                    updated_ns: 1,
                },
            )
        })
        .collect();
    w.apply(batch, &[]).unwrap();
    assert_eq!(w.rebuilds(), before + 1);
    assert_eq!(r.get("new.99").unwrap().bytes, b"1");
    assert_eq!(r.get("git.branch\0/repo").unwrap().bytes, b"\"main\"");
    // A file whose pid and start time name no live process is refused.
    let mut bytes = std::fs::read(&p).unwrap();
    bytes[32..40].copy_from_slice(&1u64.to_ne_bytes());
    let dead = d.path().join("dead");
    std::fs::write(&dead, &bytes).unwrap();
    assert!(matches!(Reader::open(&dead), Err(Unusable::Dead(_))));
    std::fs::write(
        &dead,
        b"not a snapshot at all, but long enough to map 64 bytes....",
    )
    .unwrap();
    assert!(matches!(Reader::open(&dead), Err(Unusable::Format)));
}

/// Files a reader must refuse, each with its own reason, and a corrupt index that
/// must read as a missing value rather than out of bounds.
#[test]
fn truncated_corrupt_newer_and_foreign_snapshots_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("snapshot");
    let mut w = Writer::create(&p, 0o600, 2000).unwrap();
    for i in 0..10 {
        w.set(&format!("k.{i}"), b"12345", false, 1).unwrap();
    }
    let good = std::fs::read(&p).unwrap();
    let bad = d.path().join("bad");
    // Truncated inside the index.
    std::fs::write(&bad, &good[..HEADER + 3 * SLOT]).unwrap();
    assert!(matches!(Reader::open(&bad), Err(Unusable::Format)));
    // Shorter than a header.
    std::fs::write(&bad, &good[..10]).unwrap();
    assert!(matches!(Reader::open(&bad), Err(Unusable::Format)));
    // A newer layout.
    let mut newer = good.clone();
    newer[8..12].copy_from_slice(&3u32.to_ne_bytes());
    std::fs::write(&bad, &newer).unwrap();
    let err = Reader::open(&bad).unwrap_err();
    assert!(matches!(err, Unusable::Version(3)));
    assert!(err.to_string().contains("version 3"), "{err}");
    // An index entry pointing past the end, or misaligned: that key has no value,
    // the others still read.
    let mut corrupt = good.clone();
    corrupt[HEADER + 16..HEADER + 20].copy_from_slice(&u32::MAX.to_ne_bytes());
    corrupt[HEADER + SLOT + 16..HEADER + SLOT + 20].copy_from_slice(&3u32.to_ne_bytes());
    corrupt[HEADER + 2 * SLOT + 20..HEADER + 2 * SLOT + 24]
        .copy_from_slice(&u32::MAX.to_ne_bytes());
    std::fs::write(&bad, &corrupt).unwrap();
    let mut r = Reader::open(&bad).unwrap();
    assert!(r.get("k.0").is_none());
    assert!(r.get("k.1").is_none());
    assert!(r.get("k.2").is_none());
    assert_eq!(r.get("k.3").unwrap().bytes, b"12345");
    // A file of someone who is neither this user nor root is refused, whoever owns
    // the socket beside it (as root: the file given to nobody).
    let sock = d.path().join("sock");
    std::fs::write(&sock, b"").unwrap();
    assert!(Reader::beside(&sock).is_ok());
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } == 0 {
        std::os::unix::fs::chown(&p, Some(65534), None).unwrap();
        std::os::unix::fs::chown(&sock, Some(65534), None).unwrap();
        let err = Reader::beside(&sock).unwrap_err();
        assert!(matches!(err, Unusable::Owner(_, 65534, 0)), "{err}");
        assert!(err.to_string().contains("refusing"), "{err}");
    }
    // A link in place of the file is not followed.
    let link = d.path().join("linked");
    std::fs::create_dir(&link).unwrap();
    std::os::unix::fs::symlink(&p, link.join("snapshot")).unwrap();
    assert!(Reader::beside(&link.join("sock")).is_err());
}

/// The daemon's file is one file for its whole life: a hundred new keys and values
/// that outgrow their slots rewrite it in place (same inode), and a reader that
/// mapped it first follows every change.
#[test]
fn layouts_are_rewritten_in_place() {
    use std::os::unix::fs::MetadataExt;
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("snapshot");
    let mut w = Writer::create(&p, 0o600, 1000).unwrap();
    let ino = std::fs::metadata(&p).unwrap().ino();
    w.set("a", b"1", false, 1).unwrap();
    let mut r = Reader::open(&p).unwrap();
    for i in 0..3000 {
        w.set(
            &format!("k.{i:05}"),
            format!("{i}").repeat(i % 50 + 1).as_bytes(),
            false,
            2,
        )
        .unwrap();
    }
    assert!(std::fs::metadata(&p).unwrap().len() > 64 * 1024, "it grew");
    assert_eq!(std::fs::metadata(&p).unwrap().ino(), ino, "the same file");
    assert_eq!(
        r.get("k.02999").unwrap().bytes,
        "2999".repeat(50).as_bytes()
    );
    assert_eq!(r.get("a").unwrap().bytes, b"1");
}

/// A file cut short under every mapping of it (as its owner may): no reader and no
/// writer dies of SIGBUS, readers find no value rather than a wrong one, and the
/// writer notices and makes the file whole — a hundred times.
#[test]
fn a_file_cut_short_kills_nobody() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("snapshot");
    let mut w = Writer::create(&p, 0o600, 1000).unwrap();
    for round in 0..100 {
        for i in 0..50 {
            w.set(&format!("k.{i}"), format!("{round}").as_bytes(), false, 1)
                .unwrap();
        }
        let mut r = Reader::open(&p).unwrap();
        assert_eq!(r.get("k.7").unwrap().bytes, format!("{round}").as_bytes());
        let cut = [0, 10, 64, 4096][round % 4];
        std::fs::OpenOptions::new()
            .write(true)
            .open(&p)
            .unwrap()
            .set_len(cut)
            .unwrap();
        // Reads through the old mapping touch pages past the end.
        assert_eq!(
            r.get("k.7"),
            None,
            "round {round}: no value from a cut file"
        );
        assert!(!r.is_current());
        // The writer writes into the cut pages without dying, then sees the damage.
        let _ = w.set("k.8", b"x", false, 1);
        assert!(w.damaged(), "round {round}");
        w.reset().unwrap();
    }
    w.set("k.1", b"whole", false, 1).unwrap();
    assert_eq!(
        Reader::open(&p).unwrap().get("k.1").unwrap().bytes,
        b"whole"
    );
}

/// One writer updating 1,000 keys as fast as it can, four readers checking that
/// every value they read is whole and of one write: a million reads, no torn one.
#[test]
fn a_million_reads_beside_a_busy_writer_are_never_torn() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("snapshot");
    let mut w = Writer::create(&p, 0o600, 1000).unwrap();
    let keys: Vec<String> = (0..1000).map(|i| format!("k{i:04}")).collect();
    // Each value: a generation repeated, padded to a length that depends on it, so
    // a torn read shows as mixed generations or a wrong length.
    let value = |g: u64| -> Vec<u8> {
        let mut s = String::new();
        for _ in 0..(4 + g % 20) {
            s.push_str(&format!("{g:016x}"));
        }
        s.into_bytes()
    };
    for k in &keys {
        w.set(k, &value(0).repeat(2), false, 0).unwrap();
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let readers: Vec<_> = (0..4)
        .map(|t| {
            let p = p.clone();
            let keys = keys.clone();
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut r = Reader::open(&p).unwrap();
                let (mut reads, mut torn) = (0u64, 0u64);
                let mut i = t * 250;
                while reads < 250_000 {
                    if let Some(v) = r.get(&keys[i % 1000]) {
                        reads += 1;
                        let s = std::str::from_utf8(&v.bytes).unwrap_or("");
                        let first = s.get(..16).unwrap_or("");
                        let whole = s.len().is_multiple_of(16)
                            && !s.is_empty()
                            && s.as_bytes().chunks(16).all(|c| c == first.as_bytes())
                            && u64::from_str_radix(first, 16).is_ok_and(|g| {
                                g == 0 && s.len() == 2 * 16 * 4
                                    || s.len() as u64 == 16 * (4 + g % 20)
                            });
                        torn += u64::from(!whole);
                    }
                    i += 1;
                }
                let _ = stop;
                (reads, torn)
            })
        })
        .collect();
    let writer = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut g = 1u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                for k in &keys {
                    w.set(k, &value(g), false, g).unwrap();
                }
                g += 1;
            }
            g
        })
    };
    let (mut reads, mut torn) = (0, 0);
    for r in readers {
        let (n, t) = r.join().unwrap();
        reads += n;
        torn += t;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let generations = writer.join().unwrap();
    assert_eq!(reads, 1_000_000);
    assert_eq!(
        torn, 0,
        "torn reads among {reads} ({generations} writer passes)"
    );
    assert!(
        generations > 2,
        "the writer kept writing: {generations} passes"
    );
}

// --- Property tests: the reader against forged files -------------------------------
// A snapshot is written by the daemon's user, but a reader must still never read out
// of bounds or panic on whatever that file holds. Cases: proptest's default (256) in
// `make test`; `make fuzz` raises PROPTEST_CASES.
mod props {
    use super::*;
    use proptest::prelude::*;

    /// A good snapshot of this process (so the liveness check passes) with `n` keys
    /// of values of several lengths.
    /// A key and the value written for it.
    type Written = (String, Vec<u8>);

    fn good(n: usize) -> (tempfile::TempDir, Vec<u8>, Vec<Written>) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("snapshot");
        let mut w = Writer::create(&p, 0o600, 1000).unwrap();
        let values: Vec<Written> = (0..n)
            .map(|i| {
                let key = stored_key(&format!("k.{i}"), (i % 3 == 0).then_some("/p"));
                (key, vec![b'a' + (i % 26) as u8; 1 + i * 7 % 90])
            })
            .collect();
        let batch = values
            .iter()
            .map(|(k, v)| {
                let stored = Stored {
                    bytes: v.clone(),
                    error: i_is_error(k),
                    updated_ns: 1,
                };
                (k.clone(), stored)
            })
            .collect();
        w.apply(batch, &[]).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        (d, bytes, values)
    }

    fn i_is_error(key: &str) -> bool {
        key.ends_with('7')
    }

    /// One way a file can be wrong.
    #[derive(Debug, Clone)]
    enum Damage {
        /// XOR a byte anywhere.
        Flip(usize, u8),
        /// An aligned 32-bit field set to a chosen value (counts, offsets, lengths).
        Word(usize, u32),
        /// Cut the file short.
        Cut(usize),
        /// Bytes appended.
        Append(Vec<u8>),
    }

    fn damage() -> impl Strategy<Value = Damage> {
        let word = prop_oneof![
            Just(0u32),
            Just(1),
            Just(7),
            Just(64),
            Just(u32::MAX),
            Just(u32::MAX - 7),
            any::<u32>(),
        ];
        prop_oneof![
            (any::<usize>(), 1u8..=255).prop_map(|(at, x)| Damage::Flip(at, x)),
            (any::<usize>(), word).prop_map(|(at, v)| Damage::Word(at, v)),
            any::<usize>().prop_map(Damage::Cut),
            proptest::collection::vec(any::<u8>(), 1..200).prop_map(Damage::Append),
        ]
    }

    fn apply(bytes: &mut Vec<u8>, d: &Damage) {
        if bytes.is_empty() {
            return;
        }
        match d {
            Damage::Flip(at, x) => {
                let at = at % bytes.len();
                bytes[at] ^= x;
            }
            Damage::Word(at, v) => {
                let at = (at % bytes.len()) & !3;
                if at + 4 <= bytes.len() {
                    bytes[at..at + 4].copy_from_slice(&v.to_ne_bytes());
                }
            }
            Damage::Cut(at) => bytes.truncate(at % bytes.len()),
            Damage::Append(more) => bytes.extend_from_slice(more),
        }
    }

    /// Everything a client can ask of a reader; panics if the reader does.
    fn read_all(r: &mut Reader, keys: &[String], file_len: usize) {
        let _ = r.interval_ms();
        let _ = r.is_current();
        for k in keys {
            let _ = r.updated_ns(k);
            if let Some(v) = r.get(k) {
                assert!(
                    v.bytes.len() <= file_len,
                    "{} bytes read from a {file_len}-byte file",
                    v.bytes.len()
                );
            }
        }
    }

    proptest! {
        /// A good file with damage anywhere: refused, or read without a panic or a
        /// read out of bounds; without damage every value reads back exactly.
        #[test]
        fn damaged_snapshots_are_refused_or_read_safely(
            n in 0usize..40,
            damages in proptest::collection::vec(damage(), 0..6),
            extra in proptest::collection::vec(".{0,12}", 0..4),
        ) {
            let (d, mut bytes, values) = good(n);
            for x in &damages {
                apply(&mut bytes, x);
            }
            let bad = d.path().join("bad");
            std::fs::write(&bad, &bytes).unwrap();
            let mut keys: Vec<String> = values.iter().map(|(k, _)| k.clone()).collect();
            keys.extend(extra);
            match Reader::open(&bad) {
                Ok(mut r) => {
                    read_all(&mut r, &keys, bytes.len());
                    if damages.is_empty() {
                        for (k, v) in &values {
                            let got = r.get(k).unwrap();
                            prop_assert_eq!(&got.bytes, v);
                            prop_assert_eq!(got.error, i_is_error(k));
                        }
                    }
                }
                Err(e) => {
                    prop_assert!(!damages.is_empty(), "a good file refused: {e}");
                    prop_assert!(!e.to_string().is_empty());
                }
            }
        }

        /// A right header (magic, version, this live process) over arbitrary bytes:
        /// whatever the index says, a reader refuses or reads within the file.
        #[test]
        fn a_live_header_over_any_bytes_is_read_safely(
            count in prop_oneof![0u32..64, any::<u32>()],
            replaced in prop_oneof![Just(0u64), any::<u64>()],
            body in proptest::collection::vec(any::<u8>(), 0..4096),
            keys in proptest::collection::vec(prop_oneof![Just("k.1".to_string()), ".{0,12}".prop_map(String::from)], 1..6),
        ) {
            let d = tempfile::tempdir().unwrap();
            let p = d.path().join("snapshot");
            let pid = std::process::id();
            let mut bytes = vec![0u8; HEADER];
            bytes[..8].copy_from_slice(&MAGIC);
            bytes[8..12].copy_from_slice(&VERSION.to_ne_bytes());
            bytes[12..16].copy_from_slice(&count.to_ne_bytes());
            bytes[16..24].copy_from_slice(&replaced.to_ne_bytes());
            bytes[24..28].copy_from_slice(&pid.to_ne_bytes());
            bytes[32..40].copy_from_slice(&start_time(pid).unwrap().to_ne_bytes());
            bytes.extend_from_slice(&body);
            std::fs::write(&p, &bytes).unwrap();
            if let Ok(mut r) = Reader::open(&p) {
                read_all(&mut r, &keys, bytes.len());
            }
        }
    }
}
