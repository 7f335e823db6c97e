//! `var.*`: values clients set for each other (`put`): a deploy script publishes
//! `var.deploy`, every prompt shows it. Bounded — a key is at most 128 bytes of
//! `[A-Za-z0-9._-]`, a value at most 16 KiB of JSON, at most 1,000 keys and 4 MiB per
//! owner — and each may expire (`ttl_s`); expired values are swept every second. A
//! `null` value removes the key.
//!
//! Owners: in a user daemon every put is its user's. A system daemon serves many users,
//! so each user other than root puts into a namespace of their own (seen by them only,
//! at most [`MAX_KEYS_OTHER`] keys and [`MAX_BYTES_OTHER`] bytes), and what root puts is
//! seen by everyone (a deploy script running as root): a user reads their own value of
//! a name first, then root's. Nobody can overwrite, delete or fill up another's values
//! (shared/security L5).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::cache::Cache;

/// The namespace clients may write.
pub use kernstat_client::keys::PUT_PREFIX as PREFIX;
/// Longest key.
pub const MAX_KEY: usize = 128;
/// Largest value (its JSON).
pub const MAX_VALUE: usize = 16 * 1024;
/// Most keys.
pub const MAX_KEYS: usize = 1000;
/// Most bytes of values in all.
pub const MAX_BYTES: usize = 4 << 20;
/// Most keys one user other than root keeps in a system daemon.
pub const MAX_KEYS_OTHER: usize = 100;
/// Most bytes of values one user other than root keeps in a system daemon.
pub const MAX_BYTES_OTHER: usize = 512 << 10;
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

/// Who set a value: None for the daemon's own user and root (seen by everyone), a uid
/// for another user of a system daemon (seen by that user only).
pub type Owner = Option<u32>;

#[derive(Debug, Default)]
struct Store {
    /// (owner, key) -> (bytes, expiry)
    keys: HashMap<(Owner, String), (usize, Option<Instant>)>,
    /// Per owner: (keys, bytes).
    usage: HashMap<Owner, (usize, usize)>,
}

/// Where an owner's values live in the cache: global for None, a scope per user.
pub fn scope(owner: Owner) -> Option<String> {
    owner.map(|uid| format!("uid={uid}"))
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
        owner: Owner,
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
        let id = (owner, key.to_string());
        let (max_keys, max_bytes) = match owner {
            None => (MAX_KEYS, MAX_BYTES),
            Some(_) => (MAX_KEYS_OTHER, MAX_BYTES_OTHER),
        };
        let old = s.keys.get(&id).map(|(b, _)| *b);
        let (n, bytes) = s.usage.get(&owner).copied().unwrap_or((0, 0));
        let scope = scope(owner);
        if json.trim() == "null" {
            if let Some(old) = old {
                s.keys.remove(&id);
                s.usage.insert(owner, (n - 1, bytes - old));
                cache.remove(key, scope.as_deref());
            }
            return Ok(());
        }
        if old.is_none() && n >= max_keys {
            return Err(Refused::Full(format!("{max_keys} keys are set already")));
        }
        let after = bytes - old.unwrap_or(0) + json.len();
        if after > max_bytes {
            return Err(Refused::Full(format!(
                "the values set hold {max_bytes} bytes already"
            )));
        }
        s.usage
            .insert(owner, (n + usize::from(old.is_none()), after));
        s.keys
            .insert(id, (json.len(), ttl.map(|t| Instant::now() + t)));
        cache.put(key, scope.as_deref(), json.as_bytes().to_vec());
        Ok(())
    }

    /// The names `owner` may see: its own and those of the global owner.
    pub fn names(&self, owner: Owner) -> Vec<String> {
        let Ok(s) = self.store.lock() else {
            return Vec::new();
        };
        s.keys
            .keys()
            .filter(|(o, _)| o.is_none() || *o == owner)
            .map(|(_, k)| k.clone())
            .collect()
    }

    /// Removes expired values; true when one was.
    pub fn sweep(&self, cache: &Cache) -> bool {
        let now = Instant::now();
        let Ok(mut s) = self.store.lock() else {
            return false;
        };
        let gone: Vec<((Owner, String), usize)> = s
            .keys
            .iter()
            .filter(|(_, (_, exp))| exp.is_some_and(|e| e <= now))
            .map(|(k, (b, _))| (k.clone(), *b))
            .collect();
        for ((owner, k), b) in &gone {
            s.keys.remove(&(*owner, k.clone()));
            if let Some(u) = s.usage.get_mut(owner) {
                *u = (u.0 - 1, u.1 - b);
            }
            cache.remove(k, scope(*owner).as_deref());
        }
        s.usage.retain(|_, u| u.0 > 0);
        !gone.is_empty()
    }

    /// (keys, bytes) held, all owners together.
    pub fn usage(&self) -> (usize, usize) {
        self.store.lock().map_or((0, 0), |s| {
            s.usage
                .values()
                .fold((0, 0), |(k, b), (k2, b2)| (k + k2, b + b2))
        })
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
            p.put(&c, None, "user.x", "1", None),
            Err(Refused::Bad(_))
        ));
        assert!(matches!(
            p.put(&c, None, "var.a b", "1", None),
            Err(Refused::Bad(_))
        ));
        assert!(matches!(
            p.put(&c, None, "var.x", "1", Some(-1.0)),
            Err(Refused::Bad(_))
        ));
        assert!(matches!(
            p.put(&c, None, "var.x", &"1".repeat(MAX_VALUE + 1), None),
            Err(Refused::Bad(_))
        ));
        p.put(&c, None, "var.deploy", "\"v1.2\"", Some(0.05))
            .unwrap();
        assert_eq!(&*c.get("var.deploy", None).unwrap().json, b"\"v1.2\"");
        std::thread::sleep(Duration::from_millis(80));
        assert!(p.sweep(&c));
        assert!(c.get("var.deploy", None).is_none());
        for i in 0..MAX_KEYS {
            p.put(&c, None, &format!("var.k{i}"), "1", None).unwrap();
        }
        assert!(matches!(
            p.put(&c, None, "var.one-more", "1", None),
            Err(Refused::Full(_))
        ));
        p.put(&c, None, "var.k0", "2", None).unwrap();
        p.put(&c, None, "var.k0", "null", None).unwrap();
        assert_eq!(p.usage(), (MAX_KEYS - 1, MAX_KEYS - 1));
        assert!(c.get("var.k0", None).is_none());
    }

    /// Another user's values are theirs: nobody else sees, overwrites or deletes them,
    /// and one user filling their namespace leaves room for everyone else.
    #[test]
    fn other_users_have_namespaces_of_their_own() {
        let c = Cache::new();
        let p = Puts::default();
        p.put(&c, Some(1002), "var.deploy", "\"mine\"", None)
            .unwrap();
        p.put(&c, Some(1003), "var.deploy", "null", None).unwrap();
        p.put(&c, Some(1003), "var.deploy", "\"theirs\"", None)
            .unwrap();
        assert_eq!(
            &*c.get("var.deploy", scope(Some(1002)).as_deref())
                .unwrap()
                .json,
            b"\"mine\""
        );
        assert_eq!(
            &*c.get("var.deploy", scope(Some(1003)).as_deref())
                .unwrap()
                .json,
            b"\"theirs\""
        );
        assert!(c.get("var.deploy", None).is_none(), "not global");
        // Its first key was var.deploy.
        for i in 1..MAX_KEYS_OTHER {
            p.put(&c, Some(1003), &format!("var.k{i}"), "1", None)
                .unwrap();
        }
        assert!(matches!(
            p.put(&c, Some(1003), "var.more", "1", None),
            Err(Refused::Full(_))
        ));
        p.put(&c, Some(1002), "var.more", "1", None).unwrap();
        p.put(&c, None, "var.root", "1", None).unwrap();
        let names = p.names(Some(1002));
        assert!(names.contains(&"var.root".to_string()));
        assert!(names.contains(&"var.more".to_string()));
        assert!(
            !names.contains(&"var.k1".to_string()),
            "not another's names"
        );
    }
}
