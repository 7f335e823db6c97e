//! The key list is written in three places people read: `kernstat get --list` (from the
//! providers' tables), docs/protocol.md and the daemon's guide (docs/daemon.md). This
//! keeps them in step: every
//! key the daemon can serve is documented in both, and every key-shaped name the docs
//! put in their key tables is one the daemon serves.

use std::collections::BTreeSet;

use kernstat_daemon::providers::all_keys;

fn doc(rel: &str) -> String {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// Every `backticked` word in `text`.
fn backticked(text: &str) -> BTreeSet<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

#[test]
fn every_key_is_documented_in_the_protocol_and_the_guide() {
    for (name, text) in [
        ("docs/protocol.md", doc("docs/protocol.md")),
        ("docs/daemon.md", doc("docs/daemon.md")),
    ] {
        let words = backticked(&text);
        let missing: Vec<String> = all_keys()
            .map(|(k, _)| k)
            .filter(|k| !words.contains(k.as_str()))
            .collect();
        assert!(missing.is_empty(), "{name} does not mention {missing:?}");
    }
}

#[test]
fn the_protocol_key_tables_name_only_served_keys() {
    let text = doc("docs/protocol.md");
    let keys = &text[text.find("\n## Keys").expect("a Keys section")..];
    let keys = &keys[..keys.find("\n## Examples").unwrap_or(keys.len())];
    let served: BTreeSet<String> = all_keys().map(|(k, _)| k).collect();
    // Table rows start with `| `key``; each backticked key in the first cell is checked.
    for line in keys.lines().filter(|l| l.starts_with("| `")) {
        let first = line.split('|').nth(1).unwrap_or("");
        for word in backticked(first) {
            assert!(
                served.contains(word),
                "docs/protocol.md documents {word:?}, which the daemon does not serve"
            );
        }
    }
}
