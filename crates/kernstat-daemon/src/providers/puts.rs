//! `var.*`: values clients set for each other (`put`): a deploy script publishes
//! `var.deploy`, every prompt shows it. Bounded — a key is at most 128 bytes of
//! `[A-Za-z0-9._-]`, a value at most 16 KiB of JSON, at most 1,000 keys and 4 MiB in all —
//! and each may expire (`ttl_s`); expired values are swept every second. A `null` value
//! removes the key.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::cache::Cache;

/// The namespace clients may write.
pub const PREFIX: &str = "var.";
/// Longest key.
pub const MAX_KEY: usize = 128;
/// Largest value (its JSON).
pub const MAX_VALUE: usize = 16 * 1024;
/// Most keys.
pub const MAX_KEYS: usize = 1000;
/// Most bytes of values in all.
pub const MAX_BYTES: usize = 4 << 20;
/// Longest time to live.
pub const MAX_TTL: Duration = Duration::from_secs(30 * 24 * 3600);

/// Why a put was refused: a bad request, or the store is full.
#[derive(Debug, PartialEq, Eq)]
pub enum Refused {
    /// The key, value or TTL is not acceptable.
    Bad(String),
    /// No room.
    Full(String),
}

#[derive(Debug, Default)]
struct Store {
    /// key -> (bytes, expiry)
    keys: HashMap<String, (usize, Option<Instant>)>,
    bytes: usize,
}

/// The values clients set.
#[derive(Debug, Default)]
pub struct Puts {
    store: Mutex<Store>,
}

fn valid_key(key: &str) -> bool {
    key.len() <= MAX_KEY
        && key.len() > PREFIX.len()
        && key.starts_with(PREFIX)
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && !key.ends_with('.')
}

impl Puts {
    /// Sets `key` to `json` (removes it for `null`) for `ttl`, or says why not.
    pub fn put(
        &self,
        cache: &Cache,
        key: &str,
        json: &str,
        ttl_s: Option<f64>,
    ) -> Result<(), Refused> {
        if !valid_key(key) {
            return Err(Refused::Bad(format!(
                "put keys are {PREFIX}NAME, at most {MAX_KEY} bytes of letters, digits, . _ -"
            )));
        }
        if json.len() > MAX_VALUE {
            return Err(Refused::Bad(format!(
                "a put value is at most {MAX_VALUE} bytes of JSON"
            )));
        }
        let ttl = match ttl_s {
            None => None,
            Some(t) if t.is_finite() && t > 0.0 && t <= MAX_TTL.as_secs_f64() => {
                Some(Duration::from_secs_f64(t))
            }
            Some(_) => {
                return Err(Refused::Bad(format!(
                    "ttl_s is a number of seconds, more than 0 and at most {}",
                    MAX_TTL.as_secs()
                )))
            }
        };
        let mut s = self
            .store
            .lock()
            .map_err(|_| Refused::Full("store unavailable".into()))?;
        let old = s.keys.get(key).map_or(0, |(b, _)| *b);
        if json.trim() == "null" {
            if s.keys.remove(key).is_some() {
                s.bytes -= old;
                cache.remove(key, None);
            }
            return Ok(());
        }
        if old == 0 && s.keys.len() >= MAX_KEYS {
            return Err(Refused::Full(format!("{MAX_KEYS} keys are set already")));
        }
        if s.bytes - old + json.len() > MAX_BYTES {
            return Err(Refused::Full(format!(
                "the values set hold {MAX_BYTES} bytes already"
            )));
        }
        s.bytes = s.bytes - old + json.len();
        s.keys.insert(
            key.to_string(),
            (json.len(), ttl.map(|t| Instant::now() + t)),
        );
        cache.put(key, None, json.as_bytes().to_vec());
        Ok(())
    }

    /// Removes expired values; true when one was.
    pub fn sweep(&self, cache: &Cache) -> bool {
        let now = Instant::now();
        let Ok(mut s) = self.store.lock() else {
            return false;
        };
        let gone: Vec<(String, usize)> = s
            .keys
            .iter()
            .filter(|(_, (_, exp))| exp.is_some_and(|e| e <= now))
            .map(|(k, (b, _))| (k.clone(), *b))
            .collect();
        for (k, b) in &gone {
            s.keys.remove(k);
            s.bytes -= b;
            cache.remove(k, None);
        }
        !gone.is_empty()
    }

    /// (keys, bytes) held.
    pub fn usage(&self) -> (usize, usize) {
        self.store
            .lock()
            .map_or((0, 0), |s| (s.keys.len(), s.bytes))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bounds_and_expiry() {
        let c = Cache::new();
        let p = Puts::default();
        assert!(matches!(
            p.put(&c, "user.x", "1", None),
            Err(Refused::Bad(_))
        ));
        assert!(matches!(
            p.put(&c, "var.a b", "1", None),
            Err(Refused::Bad(_))
        ));
        assert!(matches!(
            p.put(&c, "var.x", "1", Some(-1.0)),
            Err(Refused::Bad(_))
        ));
        assert!(matches!(
            p.put(&c, "var.x", &"1".repeat(MAX_VALUE + 1), None),
            Err(Refused::Bad(_))
        ));
        p.put(&c, "var.deploy", "\"v1.2\"", Some(0.05)).unwrap();
        assert_eq!(&*c.get("var.deploy", None).unwrap().json, b"\"v1.2\"");
        std::thread::sleep(Duration::from_millis(80));
        assert!(p.sweep(&c));
        assert!(c.get("var.deploy", None).is_none());
        for i in 0..MAX_KEYS {
            p.put(&c, &format!("var.k{i}"), "1", None).unwrap();
        }
        assert!(matches!(
            p.put(&c, "var.one-more", "1", None),
            Err(Refused::Full(_))
        ));
        p.put(&c, "var.k0", "2", None).unwrap();
        p.put(&c, "var.k0", "null", None).unwrap();
        assert_eq!(p.usage(), (MAX_KEYS - 1, MAX_KEYS - 1));
        assert!(c.get("var.k0", None).is_none());
    }
}
