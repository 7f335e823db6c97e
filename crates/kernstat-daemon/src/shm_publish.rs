//! The daemon's publishing task: mirrors the cache into the snapshot after every change
//! the daemon announces (a sample, a path's git keys, a context, a put, a script).

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use kernstat_shm::{now_ns, stored_key, Stored, Writer};

/// Mirrors `d`'s cache into `w` until the daemon stops. `scoped`: per-path and context
/// keys too (a user daemon); a system daemon publishes only the machine's keys, its file
/// being readable by every local user, and none of `hidden` (per-process keys where
/// /proc hides other users' processes).
pub async fn publish(
    d: Arc<crate::Daemon>,
    mut w: Writer,
    scoped: bool,
    hidden: &'static [&'static str],
) {
    let mut rx = d.subscribe();
    // Stored key -> the entry's time when last copied.
    let mut copied: HashMap<String, Instant> = HashMap::new();
    loop {
        if w.damaged() {
            // Cut short by someone who may write it: made whole, everything again.
            eprintln!(
                "kernstat daemon: snapshot {} was cut short; writing it again",
                w.path().display()
            );
            if w.reset().is_err() {
                return;
            }
            copied.clear();
        }
        let now = now_ns();
        let mut seen = HashSet::with_capacity(copied.len());
        let mut changed: Vec<(String, Arc<crate::cache::Entry>)> = Vec::new();
        d.cache().visit(|key, scope, e| {
            if (scope.is_some() && !scoped) || hidden.contains(&key) {
                return;
            }
            let k = stored_key(key, scope);
            if copied.get(&k) != Some(&e.updated) {
                changed.push((k.clone(), e.clone()));
            }
            seen.insert(k);
        });
        let batch: Vec<(String, Stored)> = changed
            .into_iter()
            .map(|(k, e)| {
                let updated_ns = now.saturating_sub(e.updated.elapsed().as_nanos() as u64);
                copied.insert(k.clone(), e.updated);
                let v = match &e.error {
                    Some(why) => Stored {
                        bytes: why.as_bytes().to_vec(),
                        error: true,
                        updated_ns,
                    },
                    None => Stored {
                        bytes: e.json.to_vec(),
                        error: false,
                        updated_ns,
                    },
                };
                (k, v)
            })
            .collect();
        let gone: Vec<String> = copied
            .keys()
            .filter(|k| !seen.contains(*k))
            .cloned()
            .collect();
        for k in &gone {
            copied.remove(k);
        }
        if let Err(e) = w.apply(batch, &gone) {
            eprintln!(
                "kernstat daemon: snapshot {}: a write failed ({e}); clients use the socket",
                w.path().display()
            );
            w.close();
            return;
        }
        w.beat();
        match rx.recv().await {
            Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
            Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
        }
    }
}
