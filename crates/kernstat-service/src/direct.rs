//! A key answered without a daemon, the way the daemon would: what `kernstat get` falls
//! back to when no daemon answers (and what starting one will serve next time).

use std::io;
use std::path::Path;
use std::time::Duration;

use kernstat_client::keys::{self as providers, is_whole};
use kernstat_client::Reply;
use kernstat_collect::{CollectOptions, Collector};
use kernstat_daemon::providers::context::{self, Client, Env};
use kernstat_daemon::providers::{basic, git, system};
use kernstat_daemon::Cache;
use kernstat_model::{Model, ModelOptions, RawSample};

/// The window rates are computed over without a daemon.
const DIRECT_WINDOW: Duration = Duration::from_millis(250);

fn unknown(key: &str) -> Reply {
    Reply {
        ok: false,
        code: Some("unknown_key".into()),
        error: Some(format!(
            "unknown key {key:?} (kernstat get --list names them)"
        )),
        ..Reply::default()
    }
}

/// Computes one key the way the daemon would, without a daemon: context keys from the
/// tools' files with this process's environment, git keys from the repository's files,
/// host facts from uname and sysinfo, system metrics from /proc (rates over a 250 ms
/// window); a provider's name gathers its fields.
pub fn answer(key: &str, path: Option<&str>) -> anyhow::Result<Reply> {
    if let Some((p, _)) = context::lookup(key) {
        // SAFETY: geteuid has no preconditions.
        let client = Client::of(unsafe { libc::geteuid() }, std::process::id() as i32);
        let reading = context::read_now(p, path.map(Path::new), &Env::Process, Some(&client));
        if let Some(why) = reading.error {
            return Ok(Reply {
                ok: false,
                code: Some("failed".into()),
                error: Some(why),
                ..Reply::default()
            });
        }
        return Ok(context::values(p, &reading)
            .into_iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| Reply::from_json(&v))
            .unwrap_or_else(|| Reply::from_json(b"null")));
    }
    if is_whole(key) {
        let mut obj = serde_json::Map::new();
        for k in providers::keys_under(key) {
            if let Some(v) = answer(k, path.filter(|_| k.starts_with("git.")))?.data {
                obj.insert(k[key.len() + 1..].to_string(), v);
            }
        }
        if key == "git" && !obj.contains_key("root") {
            return Ok(Reply::from_json(b"null"));
        }
        return Ok(Reply::from_json(&serde_json::to_vec(&obj)?));
    }
    if !providers::is_known(key) {
        return Ok(unknown(key));
    }
    if let Some(p) = path {
        return Ok(
            match git::read(Path::new(p), &kernstat_daemon::client_files::Rights::Own) {
                Ok(info) => {
                    let values = if git::COUNT_KEYS.contains(&key) {
                        git::count_values(
                            &git::counts(&info).map_err(|e| anyhow::anyhow!("{p}: {e}"))?,
                        )
                    } else {
                        git::values(&info)
                    };
                    values
                        .into_iter()
                        .find(|(k, _)| *k == key)
                        .map(|(_, v)| Reply::from_json(&v))
                        .unwrap_or_else(|| Reply::from_json(b"null"))
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => Reply::from_json(b"null"),
                Err(e) => anyhow::bail!("{p}: {e}"),
            },
        );
    }
    let cache = Cache::new();
    if basic::BASIC_KEYS.iter().any(|(k, _)| *k == key) {
        basic::publish(&cache);
    } else {
        let mut c = Collector::open(&CollectOptions {
            no_bpf: true,
            ..CollectOptions::default()
        })?;
        let (mut a, mut b) = (RawSample::default(), RawSample::default());
        c.sample(&mut a)?;
        if system::system_key(key).is_some_and(|m| m.kind == system::Kind::Rate) {
            std::thread::sleep(DIRECT_WINDOW);
        }
        c.sample(&mut b)?;
        let mut m = Model::default();
        m.update(&a, &b, &ModelOptions::default());
        system::publish(&cache, &m, 0.0);
    }
    Ok(match cache.get(key, None) {
        Some(e) => Reply::from_json(&e.json),
        None => Reply::from_json(b"null"),
    })
}
