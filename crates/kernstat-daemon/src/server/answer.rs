//! Answering one request: a key's value from the cache or its provider (git paths and
//! contexts read on demand, with the asker's rights), a whole provider as one object,
//! and the reply written as JSON or text.

use std::sync::Arc;

use crate::cache::Entry;
use crate::providers::context::{self, Env, Scope};
use crate::providers::git::schedule::{self as git_schedule, Counts};
use crate::providers::system;
use kernstat_client::protocol::{self, Code, Request, PROTOCOL_VERSION};

use super::{check_env, client_of, Asking, Daemon, Event, Peer, Rights};

impl Daemon {
    pub(super) async fn value(self: &Arc<Self>, key: &str, ask: &Asking<'_>) -> Option<Arc<Entry>> {
        let path = ask.path;
        if self.config.hide_processes
            && ask.rights.uid().is_some()
            && system::PER_PROCESS_KEYS.contains(&key)
        {
            return Some(Arc::new(Entry::failed(
                "other users' processes are hidden on this machine (/proc is mounted with hidepid); ask as root",
            )));
        }
        if self.config.private_counters && system::COUNTER_KEYS.contains(&key) {
            return self.counters_for(key, ask.rights.uid());
        }
        let settings = self.settings();
        if let Some(script) = settings.script(key.split('.').next().unwrap_or(key)) {
            return self.scripts.get(&self.hub, script, key).await;
        }
        if let Some((p, _)) = context::lookup(key) {
            if p.scope == Scope::Path && path.is_none() {
                return None;
            }
            let env = ask.env.map_or(Env::Process, |m| Env::Given(m.clone()));
            let client = client_of(p, ask.peer);
            let scope = context::scope_id(p, path, &env, client.as_ref(), ask.rights.uid());
            return self
                .contexts
                .get(
                    &self.hub,
                    p,
                    key,
                    &scope,
                    path,
                    &env,
                    client.as_ref(),
                    ask.rights,
                )
                .await;
        }
        match path {
            Some(p) if key.starts_with("git.") => {
                let scope = git_schedule::scope(p, ask.rights);
                let ensured = self
                    .git
                    .ensure(&self.hub, p, ask.rights, Counts::for_key(key))
                    .await;
                match (self.hub.cache.get(key, Some(&scope)), ensured) {
                    (Some(e), _) => Some(e),
                    (None, Err(why)) => Some(Arc::new(Entry::failed(&why.0))),
                    (None, Ok(())) => None,
                }
            }
            // A user's own value of a name first, then the one everybody sees.
            _ if key.starts_with(crate::providers::puts::PREFIX) && ask.rights.uid().is_some() => {
                let own = crate::providers::puts::scope(ask.rights.uid());
                self.hub
                    .cache
                    .get(key, own.as_deref())
                    .or_else(|| self.hub.cache.get(key, None))
            }
            _ => match self.hub.cache.get(key, None) {
                Some(e) => Some(e),
                None if !key.contains('.') => Box::pin(self.whole(key, ask)).await,
                None => None,
            },
        }
    }

    /// Every field of a provider that is not a context provider (`git`, `load`), as one
    /// object of the fields that have values.
    async fn whole(self: &Arc<Self>, prefix: &str, ask: &Asking<'_>) -> Option<Arc<Entry>> {
        let keys = crate::providers::keys_under(prefix);
        if keys.is_empty() || (prefix == "git" && ask.path.is_none()) {
            return None;
        }
        let mut obj = serde_json::Map::new();
        let mut failed: Option<Arc<Entry>> = None;
        for k in keys {
            let ask = Asking {
                path: if k.starts_with("git.") {
                    ask.path
                } else {
                    None
                },
                ..*ask
            };
            if let Some(e) = Box::pin(self.value(k, &ask)).await {
                if e.error.is_some() && k == "git.root" {
                    failed = Some(e.clone());
                }
                if e.error.is_none() {
                    let v = serde_json::from_slice(&e.json).unwrap_or(serde_json::Value::Null);
                    obj.insert(k[prefix.len() + 1..].to_string(), v);
                }
            }
        }
        if prefix == "git" && obj.get("root").is_none_or(|v| v.is_null()) {
            // Why the repository could not be read, rather than "no data".
            return Some(failed.unwrap_or_else(|| Arc::new(Entry::made(b"null".to_vec()))));
        }
        let json = serde_json::to_vec(&obj).ok()?;
        Some(Arc::new(Entry::made(json)))
    }

    /// Answers one request (not `watch`) into `out`.
    pub(super) async fn respond(
        self: &Arc<Self>,
        req: &Request<'_>,
        peer: Peer,
        rights: &Rights,
        out: &mut Vec<u8>,
    ) {
        match *req {
            Request::Get {
                key,
                path,
                ref env,
                text,
            } => {
                let ask = Asking {
                    path,
                    env: env.as_ref(),
                    peer,
                    rights,
                };
                match (check_env(ask.env), text) {
                    (Err(why), false) => protocol::write_error(out, Code::BadRequest, &why),
                    (Err(_), true) => out.push(b'\n'),
                    (Ok(()), false) => self.respond_get(key, &ask, out).await,
                    (Ok(()), true) => match self.answer_get(key, &ask).await {
                        GetAnswer::Value(e, _) => protocol::write_text(out, &e.json),
                        GetAnswer::Error(..) => out.push(b'\n'),
                    },
                }
            }
            Request::List => {
                // The names of values others put are theirs to know.
                let mut keys: Vec<String> = self
                    .hub
                    .cache
                    .keys()
                    .into_iter()
                    .filter(|k| !k.starts_with(crate::providers::puts::PREFIX))
                    .collect();
                keys.extend(self.puts.names(rights.uid()));
                keys.sort();
                keys.dedup();
                let keys = serde_json::to_vec(&keys).unwrap_or_default();
                protocol::write_data(out, &keys);
            }
            Request::Status => protocol::write_data(out, &self.status_json()),
            Request::Hello => {
                let v = serde_json::json!({
                    "name": "kernstat",
                    "version": env!("CARGO_PKG_VERSION"),
                    "protocol": PROTOCOL_VERSION,
                });
                protocol::write_data(out, &serde_json::to_vec(&v).unwrap_or_default());
            }
            Request::Refresh { key, path } => {
                match (key, path) {
                    (Some(k), Some(p)) if k.starts_with("git.") => {
                        // Asked for: the counts too, now, whatever their schedule.
                        let _ = self.git.ensure(&self.hub, p, rights, Counts::Force).await;
                    }
                    _ => {
                        if let Some(hook) = self.refresh.lock().ok().and_then(|r| r.clone()) {
                            hook();
                        }
                    }
                }
                protocol::write_data(out, b"true");
            }
            Request::Put {
                key,
                ref data,
                ttl_s,
            } => {
                use crate::providers::puts::Refused;
                match self
                    .puts
                    .put(&self.hub.cache, rights.uid(), key, &data.to_string(), ttl_s)
                {
                    Ok(()) => {
                        self.notify(Event::System);
                        protocol::write_data(out, b"true")
                    }
                    Err(Refused::Bad(why)) => protocol::write_error(out, Code::BadRequest, &why),
                    Err(Refused::Full(why)) => protocol::write_error(out, Code::Full, &why),
                }
            }
            Request::Watch { .. } => {}
        }
    }

    /// A `get`'s answer, before it is written as JSON or as text.
    async fn answer_get(self: &Arc<Self>, key: &str, ask: &Asking<'_>) -> GetAnswer {
        let path = ask.path;
        if let Some((p, _)) = context::lookup(key).filter(|(p, _)| self.settings().disabled(p.name))
        {
            let why = format!("{} is switched off in the config file", p.name);
            return GetAnswer::Error(Code::NoData, why);
        }
        let needs_path = key.starts_with("git.")
            || key == "git"
            || context::lookup(key).is_some_and(|(p, _)| p.scope == Scope::Path);
        if ask.rights.uid().is_some() && crate::providers::git::COUNT_KEYS.contains(&key) {
            return GetAnswer::Error(
                Code::NoData,
                format!(
                    "{key}: counted only by a daemon of your own (`kernstat daemon`): this daemon does not open other users' object databases"
                ),
            );
        }
        match self.value(key, ask).await {
            Some(e) if e.error.is_some() => GetAnswer::Error(
                Code::Failed,
                format!("{key}: {}", e.error.as_deref().unwrap_or("failed")),
            ),
            Some(e) if &*e.json == b"null" => {
                GetAnswer::Error(Code::NoData, format!("no data for {key}"))
            }
            Some(e) => {
                let stale = self.stale(&e, key);
                GetAnswer::Value(e, stale)
            }
            None if needs_path && path.is_none() => {
                GetAnswer::Error(Code::BadRequest, format!("{key} needs a path"))
            }
            None if self.known(key) || !crate::providers::keys_under(key).is_empty() => {
                GetAnswer::Error(Code::NoData, format!("no data for {key}"))
            }
            None => GetAnswer::Error(
                Code::UnknownKey,
                format!("unknown key {key:?} (the list op names the keys)"),
            ),
        }
    }

    async fn respond_get(self: &Arc<Self>, key: &str, ask: &Asking<'_>, out: &mut Vec<u8>) {
        match self.answer_get(key, ask).await {
            GetAnswer::Value(e, stale) => protocol::write_value(out, &e.json, e.age_ms(), stale),
            GetAnswer::Error(code, why) => protocol::write_error(out, code, &why),
        }
    }
}

/// What a `get` found.
enum GetAnswer {
    /// The value, and whether it is stale.
    Value(Arc<Entry>, bool),
    /// Why there is none.
    Error(Code, String),
}
