//! The daemon's state and its Unix-socket server.
//!
//! `Daemon` owns the cache, the update channel that feeds `watch` streams, and the
//! path-scoped providers' schedules (providers/git/schedule.rs). The system sampler
//! lives outside (it needs BPF) and calls `publish_system` each tick.
//!
//! The server is mini-redis shaped: an accept loop with a connection cap and a peer
//! check, one task per connection, `serve(listener, daemon, shutdown)`. A connection
//! reads newline-delimited requests (each at most 64 KiB) and answers each; answers to
//! pipelined requests are written together, in one write. A client that stops reading only stalls its
//! own task, and a watch stream that cannot be written for 10 s (configurable) is dropped.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kernstat_model::Model;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{broadcast, Semaphore};

use crate::cache::{Cache, Entry};
use crate::client_files::{Creds, Rights};
use crate::jobs::Jobs;
use crate::protocol::{self, Code, Request, MAX_REQUEST, PROTOCOL_VERSION};
use crate::providers::context::{self, schedule::Contexts, Client, Env, Scope};
use crate::providers::git::schedule::{self as git_schedule, Counts, GitPaths};
use crate::providers::network::{Events, Network};
use crate::providers::{basic, system};

/// Who is at the other end of a connection (the socket's peer credentials).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Peer {
    /// Its uid.
    pub uid: Option<u32>,
    /// Its pid.
    pub pid: Option<i32>,
}

/// What a `get` or `watch` asks about besides the key.
#[derive(Clone, Copy, Debug)]
struct Asking<'a> {
    path: Option<&'a str>,
    env: Option<&'a std::collections::BTreeMap<String, String>>,
    peer: Peer,
    /// Whose rights files are read with for this client.
    rights: &'a Rights,
}

/// What changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A system sample was published (every global key may have changed).
    System,
    /// The git keys of this path were recomputed.
    Path(Arc<str>),
}

/// Who may connect.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Access {
    /// Only these uids (root is always allowed); None: anyone who can open the socket.
    pub uids: Option<Vec<u32>>,
}

/// Daemon settings.
#[derive(Clone, Debug)]
pub struct Config {
    /// Most connections served at once; more are refused with an error.
    pub max_connections: usize,
    /// Who may connect.
    pub access: Access,
    /// The sampler's interval (for staleness: a value older than 3 intervals is stale).
    pub interval: Duration,
    /// Path-scoped keys nobody read for this long stop being refreshed.
    pub idle_after: Duration,
    /// Poll timer for path-scoped keys (inotify is the main trigger).
    pub poll_every: Duration,
    /// A watch stream that cannot be written for this long is dropped.
    pub watch_write_timeout: Duration,
    /// Per-process keys are answered to root only (a system daemon where /proc hides
    /// other users' processes: `hidepid`).
    pub hide_processes: bool,
    /// Most connections one user (other than root) may hold at once.
    pub max_connections_per_user: usize,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            max_connections: 4096,
            access: Access::default(),
            interval: Duration::from_secs(2),
            idle_after: Duration::from_secs(60),
            poll_every: Duration::from_secs(5),
            watch_write_timeout: Duration::from_secs(10),
            hide_processes: false,
            max_connections_per_user: 4096,
        }
    }
}

/// What `refresh` of system keys calls (wakes the sampler).
pub type RefreshHook = Arc<dyn Fn() + Send + Sync>;

/// The daemon's shared state.
pub struct Daemon {
    /// Every value.
    pub cache: Cache,
    config: Config,
    events: broadcast::Sender<Event>,
    started: Instant,
    requests: AtomicU64,
    clients: AtomicU64,
    refresh: Mutex<Option<RefreshHook>>,
    pub(crate) git: GitPaths,
    pub(crate) contexts: Contexts,
    /// Blocking work on clients' behalf, in per-user slots.
    pub(crate) jobs: Arc<Jobs>,
    network: Network,
    pub(crate) puts: crate::providers::puts::Puts,
    pub(crate) scripts: crate::providers::scripts::Scripts,
    settings: std::sync::RwLock<Arc<crate::settings::Settings>>,
    settings_watch: Mutex<Option<notify::RecommendedWatcher>>,
}

impl std::fmt::Debug for Daemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Daemon")
            .field("keys", &self.cache.len())
            .finish()
    }
}

impl Daemon {
    /// A daemon with an empty cache (basic facts published).
    pub fn new(config: Config) -> Arc<Self> {
        let (events, _) = broadcast::channel(256);
        let d = Arc::new(Daemon {
            cache: Cache::new(),
            config,
            events,
            started: Instant::now(),
            requests: AtomicU64::new(0),
            clients: AtomicU64::new(0),
            refresh: Mutex::new(None),
            git: GitPaths::default(),
            contexts: Contexts::default(),
            jobs: Arc::default(),
            network: Network::default(),
            puts: Default::default(),
            scripts: Default::default(),
            settings: Default::default(),
            settings_watch: Mutex::new(None),
        });
        basic::publish(&d.cache);
        d
    }

    /// The settings in force (the config file's).
    pub fn settings(&self) -> Arc<crate::settings::Settings> {
        self.settings.read().map(|s| s.clone()).unwrap_or_default()
    }

    /// Replaces the settings (a config file read and checked).
    pub fn set_settings(&self, s: crate::settings::Settings) {
        self.scripts.set_concurrency(s.scripts.concurrency);
        if let Ok(mut g) = self.settings.write() {
            *g = Arc::new(s);
        }
    }

    /// Reloads `path` whenever it changes; a file that does not parse is reported on
    /// stderr and the settings in force stay.
    pub fn watch_settings(self: &Arc<Self>, path: std::path::PathBuf) -> notify::Result<()> {
        use notify::Watcher;
        let dir = path
            .parent()
            .map(std::path::Path::to_path_buf)
            .unwrap_or_default();
        let d = Arc::downgrade(self);
        let file = path.clone();
        let mut w = notify::recommended_watcher(move |res: notify::Result<notify::Event>| {
            let Ok(ev) = res else { return };
            if !ev.paths.contains(&file) || ev.kind.is_access() {
                return;
            }
            let Some(d) = d.upgrade() else { return };
            match crate::settings::Settings::load(&file) {
                Ok(s) if *d.settings() == s => {}
                Ok(s) => {
                    eprintln!("kernstat daemon: config {} reloaded", file.display());
                    d.set_settings(s);
                    d.notify(Event::System);
                }
                Err(e) => eprintln!("kernstat daemon: config {e}; keeping the previous settings"),
            }
        })?;
        // A directory that does not exist yet is not created (nor watched): a config
        // written there later applies at the next start.
        if !dir.is_dir() {
            return Ok(());
        }
        w.watch(&dir, notify::RecursiveMode::NonRecursive)?;
        if let Ok(mut g) = self.settings_watch.lock() {
            *g = Some(w);
        }
        Ok(())
    }

    /// Whether `key` is one this daemon can serve (a script's included).
    fn known(&self, key: &str) -> bool {
        crate::providers::is_known(key)
            || self
                .settings()
                .script(key.split('.').next().unwrap_or(key))
                .is_some()
    }

    /// What a `refresh` of system keys calls (the sampler's wake-up).
    pub fn set_refresh(&self, hook: impl Fn() + Send + Sync + 'static) {
        if let Ok(mut r) = self.refresh.lock() {
            *r = Some(Arc::new(hook));
        }
    }

    /// Publishes a system sample and wakes watchers.
    pub fn publish_system(&self, m: &Model, sample_us: f64) {
        system::publish(&self.cache, m, sample_us);
        basic::refresh(&self.cache);
        self.network.publish(&self.cache, true);
        let _ = self.events.send(Event::System);
    }

    /// Re-publishes the network keys whenever the kernel announces a link, address or
    /// route change on `events` (opened before privileges were dropped).
    pub fn watch_network(self: &Arc<Self>, mut events: Events) -> std::io::Result<()> {
        if let Some(p) = events.probe.take() {
            self.network.set_probe(p);
        }
        let d = self.clone();
        events.run(move || {
            d.network.publish(&d.cache, false);
            d.notify(Event::System);
        })
    }

    /// Requests served so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }

    /// Connections open now.
    pub fn clients(&self) -> u64 {
        self.clients.load(Ordering::Relaxed)
    }

    fn status_json(&self) -> Vec<u8> {
        let source: Option<String> = self
            .cache
            .get("source", None)
            .and_then(|e| serde_json::from_slice(&e.json).ok());
        let v = serde_json::json!({
            "name": "kernstat",
            "version": env!("CARGO_PKG_VERSION"),
            "protocol": PROTOCOL_VERSION,
            "pid": std::process::id(),
            "uptime_s": self.started.elapsed().as_secs_f64(),
            "source": source,
            "interval_s": self.config.interval.as_secs_f64(),
            "keys": self.cache.len(),
            "clients": self.clients.load(Ordering::Relaxed),
            "requests": self.requests.load(Ordering::Relaxed),
            "git_paths": self.git.len(),
            "contexts": self.contexts.len(),
            "watched_dirs": self.contexts.watched_dirs(),
            "vars": self.puts.usage().0,
            "scripts_started": self.scripts.started(),
        });
        serde_json::to_vec(&v).unwrap_or_default()
    }

    fn stale(&self, e: &Entry, key: &str) -> bool {
        is_stale(key, e.updated.elapsed(), self.config.interval)
    }

    /// The daemon's settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// A receiver of every change from now on.
    pub(crate) fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// Wakes the watchers of what changed.
    pub(crate) fn notify(&self, ev: Event) {
        let _ = self.events.send(ev);
    }

    /// Makes the git keys of `path` current for the daemon's own user (see
    /// [`GitPaths::ensure`]); the slow counts follow in the background.
    pub async fn refresh_git(self: &Arc<Self>, path: &str) {
        let _ = self
            .git
            .ensure(self, path, &Rights::Own, Counts::Spawn)
            .await;
    }

    /// Background work of the providers (inotify events, poll timers, idle contexts).
    pub async fn run_providers(self: Arc<Self>) {
        tokio::join!(GitPaths::run(self.clone()), Contexts::run(self));
    }

    /// A context key's scope id for this request (None for other keys).
    fn context_scope(&self, key: &str, ask: &Asking<'_>) -> Option<String> {
        let (p, _) = context::lookup(key)?;
        let env = ask.env.map_or(Env::Process, |m| Env::Given(m.clone()));
        let client = client_of(p, ask.peer);
        Some(context::scope_id(
            p,
            ask.path,
            &env,
            client.as_ref(),
            ask.rights.uid(),
        ))
    }

    async fn value(self: &Arc<Self>, key: &str, ask: &Asking<'_>) -> Option<Arc<Entry>> {
        let path = ask.path;
        if self.config.hide_processes
            && ask.rights.uid().is_some()
            && system::PER_PROCESS_KEYS.contains(&key)
        {
            return Some(Arc::new(Entry::failed(
                "other users' processes are hidden on this machine (/proc is mounted with hidepid); ask as root",
            )));
        }
        let settings = self.settings();
        if let Some(script) = settings.script(key.split('.').next().unwrap_or(key)) {
            return self.scripts.get(self, script, key).await;
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
                    self,
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
                    .ensure(self, p, ask.rights, Counts::for_key(key))
                    .await;
                match (self.cache.get(key, Some(&scope)), ensured) {
                    (Some(e), _) => Some(e),
                    (None, Err(why)) => Some(Arc::new(Entry::failed(&why.0))),
                    (None, Ok(())) => None,
                }
            }
            // A user's own value of a name first, then the one everybody sees.
            _ if key.starts_with(crate::providers::puts::PREFIX) && ask.rights.uid().is_some() => {
                let own = crate::providers::puts::scope(ask.rights.uid());
                self.cache
                    .get(key, own.as_deref())
                    .or_else(|| self.cache.get(key, None))
            }
            _ => match self.cache.get(key, None) {
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
    async fn respond(
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
                        let _ = self.git.ensure(self, p, rights, Counts::Await).await;
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
                    .put(&self.cache, rights.uid(), key, &data.to_string(), ttl_s)
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

/// Whether a value of `key` this old is stale for a daemon sampling every `interval`:
/// system keys are refreshed every interval, so one older than three intervals and a
/// second means the sampler is stuck; git, context and put keys change on events and are
/// never stale. (The shared-memory readers judge by the same rule.)
pub fn is_stale(key: &str, age: Duration, interval: Duration) -> bool {
    !key.starts_with("git.")
        && !key.starts_with(crate::providers::puts::PREFIX)
        && context::lookup(key).is_none()
        && age > interval * 3 + Duration::from_secs(1)
}

/// The asking process, for providers whose answer depends on it.
fn client_of(p: &context::Provider, peer: Peer) -> Option<Client> {
    match (p.per_client, peer.uid, peer.pid) {
        (true, Some(uid), Some(pid)) => Some(Client::of(uid, pid)),
        _ => None,
    }
}

/// Whose rights files are read with for the client at the other end of `stream`: its
/// own (uid, primary and supplementary groups as it connected) when the daemon runs as
/// another user and the client is not root (a system daemon), so that nobody learns
/// through the daemon what they could not read; the daemon's own otherwise.
fn rights_for(stream: &UnixStream, peer: Peer) -> Rights {
    use std::os::fd::AsFd;
    let me = rustix::process::geteuid().as_raw();
    match (peer.uid, stream.peer_cred()) {
        (Some(uid), _) if uid == me || uid == 0 => Rights::Own,
        (Some(uid), Ok(c)) => Rights::Of(Creds {
            uid,
            gid: c.gid(),
            groups: crate::client_files::peer_groups(stream.as_fd()).unwrap_or_default(),
        }),
        // Nobody we can name: the rights of nobody.
        _ => Rights::Of(Creds {
            uid: 65534,
            gid: 65534,
            groups: Vec::new(),
        }),
    }
}

/// A request's `env` within bounds.
fn check_env(env: Option<&std::collections::BTreeMap<String, String>>) -> Result<(), String> {
    let Some(env) = env else { return Ok(()) };
    if env.len() > context::MAX_ENV_VARS {
        return Err(format!(
            "env carries {} variables; at most {}",
            env.len(),
            context::MAX_ENV_VARS
        ));
    }
    match env.iter().find(|(_, v)| v.len() > context::MAX_ENV_VALUE) {
        Some((k, _)) => Err(format!(
            "env {k} is longer than {} bytes",
            context::MAX_ENV_VALUE
        )),
        None => Ok(()),
    }
}

/// The process at the other end of `stream`.
fn peer_of(stream: &UnixStream) -> Peer {
    match stream.peer_cred() {
        Ok(c) => Peer {
            uid: Some(c.uid()),
            pid: c.pid(),
        },
        Err(_) => Peer::default(),
    }
}

fn allowed(access: &Access, uid: Option<u32>) -> bool {
    match (&access.uids, uid) {
        (None, _) => true,
        (Some(_), Some(0)) => true,
        (Some(list), Some(u)) => list.contains(&u),
        (Some(_), None) => false,
    }
}

async fn refuse(mut stream: UnixStream, msg: &str) {
    let mut out = Vec::new();
    protocol::write_error(&mut out, Code::Refused, msg);
    let _ = tokio::time::timeout(Duration::from_secs(1), stream.write_all(&out)).await;
}

/// Accepts connections on `listener` (from `bind`) until `shutdown` resolves. Must run
/// on a tokio runtime.
pub async fn serve(
    listener: std::os::unix::net::UnixListener,
    d: Arc<Daemon>,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    listener.set_nonblocking(true)?;
    let listener = UnixListener::from_std(listener)?;
    let permits = Arc::new(Semaphore::new(d.config.max_connections));
    let per_user: Arc<Mutex<std::collections::HashMap<u32, usize>>> = Arc::default();
    tokio::pin!(shutdown);
    loop {
        let Some(stream) = crate::accept::next(|| listener.accept(), &mut shutdown).await else {
            return Ok(());
        };
        let peer = peer_of(&stream);
        if !allowed(&d.config.access, peer.uid) {
            tokio::spawn(refuse(stream, "not allowed to use this daemon"));
            continue;
        }
        // One user may not take every connection (root may).
        let uid = peer.uid.unwrap_or(u32::MAX);
        if uid != 0 {
            let mut g = per_user.lock().unwrap_or_else(|e| e.into_inner());
            let n = g.entry(uid).or_insert(0);
            if *n >= d.config.max_connections_per_user {
                drop(g);
                let why = format!(
                    "too many connections from uid {uid} (at most {} per user)",
                    d.config.max_connections_per_user
                );
                tokio::spawn(async move { refuse(stream, &why).await });
                continue;
            }
            *n += 1;
        }
        match permits.clone().try_acquire_owned() {
            Ok(permit) => {
                let d = d.clone();
                let per_user = per_user.clone();
                tokio::spawn(async move {
                    d.clients.fetch_add(1, Ordering::Relaxed);
                    let _ = connection(stream, &d, peer).await;
                    d.clients.fetch_sub(1, Ordering::Relaxed);
                    drop(permit);
                    if uid != 0 {
                        let mut g = per_user.lock().unwrap_or_else(|e| e.into_inner());
                        if let Some(n) = g.get_mut(&uid) {
                            *n -= 1;
                            if *n == 0 {
                                g.remove(&uid);
                            }
                        }
                    }
                });
            }
            Err(_) => {
                if uid != 0 {
                    let mut g = per_user.lock().unwrap_or_else(|e| e.into_inner());
                    if let Some(n) = g.get_mut(&uid) {
                        *n = n.saturating_sub(1);
                    }
                }
                tokio::spawn(refuse(stream, "too many connections"));
            }
        }
    }
}

/// Reads one line (without its newline) into `line`, at most `MAX_REQUEST` bytes.
/// Ok(false) at end of stream; Err(InvalidData) for a line that is too long.
async fn read_line<R: tokio::io::AsyncBufRead + Unpin>(
    r: &mut R,
    line: &mut Vec<u8>,
) -> std::io::Result<bool> {
    line.clear();
    loop {
        let buf = r.fill_buf().await?;
        if buf.is_empty() {
            return Ok(!line.is_empty());
        }
        let (chunk, found) = match buf.iter().position(|&b| b == b'\n') {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if line.len() + chunk.len() > MAX_REQUEST {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                "too long",
            ));
        }
        line.extend_from_slice(chunk);
        let used = found.unwrap_or(buf.len());
        r.consume(used);
        if found.is_some() {
            return Ok(true);
        }
    }
}

async fn connection(stream: UnixStream, d: &Arc<Daemon>, peer: Peer) -> std::io::Result<()> {
    let rights = rights_for(&stream, peer);
    let (rd, wr) = stream.into_split();
    // Small per-connection buffers (requests are short; answers are built in `out` and
    // written with one call), so that thousands of idle clients cost little memory.
    let mut rd = BufReader::with_capacity(4096, rd);
    let mut wr = wr;
    let mut line = Vec::with_capacity(256);
    let mut out = Vec::with_capacity(1024);
    loop {
        match read_line(&mut rd, &mut line).await {
            Ok(true) => {}
            Ok(false) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                protocol::write_error(
                    &mut out,
                    Code::TooLong,
                    &format!("request longer than {MAX_REQUEST} bytes; closing"),
                );
                return wr.write_all(&out).await;
            }
            Err(e) => return Err(e),
        }
        d.requests.fetch_add(1, Ordering::Relaxed);
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        match protocol::parse(&line) {
            Err(e) => protocol::write_error(&mut out, Code::BadRequest, &e.to_string()),
            Ok(Request::Watch { key, path, env }) => {
                if let Err(why) = check_env(env.as_ref()) {
                    protocol::write_error(&mut out, Code::BadRequest, &why);
                    continue_or_flush(&mut rd, &mut wr, &mut out).await?;
                    continue;
                }
                let key = key.to_string();
                let path = path.map(str::to_string);
                wr.write_all(&out).await?;
                out.clear();
                let ask = Asking {
                    path: path.as_deref(),
                    env: env.as_ref(),
                    peer,
                    rights: &rights,
                };
                return watch(d, &key, &ask, rd, wr).await;
            }
            Ok(req) => d.respond(&req, peer, &rights, &mut out).await,
        }
        // Answers to pipelined requests go out together.
        if rd.buffer().is_empty() {
            wr.write_all(&out).await?;
            out.clear();
            if out.capacity() > 64 * 1024 {
                // Do not keep a snapshot-sized buffer for every idle client.
                out = Vec::with_capacity(1024);
            }
        }
    }
}

/// Writes the answers gathered so far unless more pipelined requests are waiting.
async fn continue_or_flush(
    rd: &mut BufReader<tokio::net::unix::OwnedReadHalf>,
    wr: &mut tokio::net::unix::OwnedWriteHalf,
    out: &mut Vec<u8>,
) -> std::io::Result<()> {
    if rd.buffer().is_empty() {
        wr.write_all(out).await?;
        out.clear();
    }
    Ok(())
}

async fn watch(
    d: &Arc<Daemon>,
    key: &str,
    ask: &Asking<'_>,
    mut rd: BufReader<tokio::net::unix::OwnedReadHalf>,
    mut wr: tokio::net::unix::OwnedWriteHalf,
) -> std::io::Result<()> {
    let path = ask.path;
    // What a change event names: the path for git keys, the scope for context keys.
    let scope = d.context_scope(key, ask).or_else(|| {
        path.filter(|_| key == "git" || key.starts_with("git."))
            .map(|p| git_schedule::scope(p, ask.rights))
    });
    let wakes_on = scope.as_deref().or(path);
    let mut rx = d.events.subscribe();
    let mut out = Vec::with_capacity(1024);
    let mut last: Option<Instant> = None;
    let mut scratch = [0u8; 512];
    loop {
        if let Some(e) = d.value(key, ask).await {
            if last != Some(e.updated) {
                last = Some(e.updated);
                out.clear();
                out.extend_from_slice(b"{\"ok\":true,\"key\":");
                let _ = serde_json::to_writer(&mut out, key);
                out.extend_from_slice(b",\"data\":");
                out.extend_from_slice(&e.json);
                out.extend_from_slice(b"}\n");
                // A client that does not read its stream is dropped.
                let write = wr.write_all(&out);
                match tokio::time::timeout(d.config.watch_write_timeout, write).await {
                    Ok(r) => r?,
                    Err(_) => return Ok(()),
                }
            }
        } else if last.is_none() && !d.known(key) {
            out.clear();
            protocol::write_error(&mut out, Code::UnknownKey, &format!("unknown key {key:?}"));
            return wr.write_all(&out).await;
        }
        tokio::select! {
            ev = rx.recv() => match ev {
                Ok(Event::System) if wakes_on.is_none() => {}
                Ok(Event::Path(p)) if Some(&*p) == wakes_on => {}
                Ok(_) => continue,
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => return Ok(()),
            },
            n = rd.read(&mut scratch) => {
                // The client closed (or sent something: watch streams take no requests).
                if n.unwrap_or(0) == 0 {
                    return Ok(());
                }
            }
        }
    }
}

/// Binds `path` for the daemon: prepares its directory (created 0755 for a system
/// daemon, 0700 for a user daemon; an existing one only when it is ours and nobody else
/// can write it: see [`crate::runtime::prepare`]), replaces a stale socket, and sets the
/// socket's mode. A plain std listener, so that it can be bound before the runtime's
/// threads exist (a system daemon binds as root, then drops privileges, then starts
/// threads).
pub fn bind(
    path: &Path,
    mode: u32,
    dir_mode: u32,
) -> std::io::Result<std::os::unix::net::UnixListener> {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    if let Some(dir) = path.parent() {
        // Made with `dir_mode` when missing; an existing one is left as it is (M1).
        crate::runtime::prepare(dir, dir_mode & 0o077 != 0)?;
    }
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AlreadyExists,
                format!(
                    "{} exists and is not a socket; refusing to replace it",
                    path.display()
                ),
            ));
        }
        // Someone answering there is a live daemon: do not take its socket.
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::AddrInUse,
                format!("a daemon is already listening on {}", path.display()),
            ));
        }
        std::fs::remove_file(path)?;
    }
    let l = std::os::unix::net::UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))?;
    Ok(l)
}
