//! The daemon's state and its Unix-socket server.
//!
//! `Daemon` owns the cache, the update channel that feeds `watch` streams, and the
//! path-scoped providers' schedules (providers/git/schedule.rs). The system sampler
//! lives outside (it needs BPF) and calls `publish_system` each tick.
//!
//! `connection.rs` is the socket side (accept loop, caps, connections, watch streams);
//! `answer.rs` answers one request. The providers' schedules share the cache, events,
//! settings and job slots through `hub.rs`, never through this module.

mod answer;
mod connection;

pub use connection::{bind, serve};

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kernstat_model::{Model, Viewer};
use tokio::sync::broadcast;

use crate::cache::{Cache, Entry};
use crate::client_files::Rights;
use crate::hub::{Hub, Timing};
use crate::providers::context::{self, schedule::Contexts, Client, Env};
use crate::providers::git::schedule::{Counts, GitPaths};
use crate::providers::network::{Events, Network};
use crate::providers::{basic, system};
use kernstat_client::protocol::PROTOCOL_VERSION;

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

pub use crate::hub::Event;

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
    /// Per-process I/O and network counters go to root and to each process's own user
    /// only (a system daemon: /proc/PID/io's rule); the published values (the
    /// world-readable snapshot, watch streams) carry nobody's.
    pub private_counters: bool,
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
            private_counters: false,
        }
    }
}

/// What `refresh` of system keys calls (wakes the sampler).
pub type RefreshHook = Arc<dyn Fn() + Send + Sync>;

/// The daemon's shared state.
pub struct Daemon {
    /// The cache, events, settings and job slots the providers share (hub.rs).
    hub: Arc<Hub>,
    config: Config,
    started: Instant,
    requests: AtomicU64,
    clients: AtomicU64,
    refresh: Mutex<Option<RefreshHook>>,
    git: Arc<GitPaths>,
    contexts: Arc<Contexts>,
    network: Network,
    puts: crate::providers::puts::Puts,
    scripts: Arc<crate::providers::scripts::Scripts>,
    settings_watch: Mutex<Option<notify::RecommendedWatcher>>,
    /// The latest system sample, whole, when counters are private: each asker's view
    /// of the counter keys is made from it.
    latest: Mutex<Option<LatestSample>>,
    /// What the flight recorder says of itself (where, its span, its size), when on.
    recorder: Mutex<Option<serde_json::Value>>,
}

/// A published model, when and how long it took.
#[derive(Clone)]
struct LatestSample {
    model: Arc<Model>,
    sample_us: f64,
    at: Instant,
}

impl std::fmt::Debug for Daemon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Daemon")
            .field("keys", &self.hub.cache.len())
            .finish()
    }
}

impl Daemon {
    /// A daemon with an empty cache (basic facts published).
    pub fn new(config: Config) -> Arc<Self> {
        let hub = Arc::new(Hub::new(Timing {
            idle_after: config.idle_after,
            poll_every: config.poll_every,
        }));
        let d = Arc::new(Daemon {
            hub,
            config,
            started: Instant::now(),
            requests: AtomicU64::new(0),
            clients: AtomicU64::new(0),
            refresh: Mutex::new(None),
            git: Arc::default(),
            contexts: Arc::default(),
            network: Network::default(),
            puts: Default::default(),
            scripts: Arc::default(),
            settings_watch: Mutex::new(None),
            latest: Mutex::new(None),
            recorder: Mutex::new(None),
        });
        basic::publish(&d.hub.cache);
        d
    }

    /// Every value.
    pub fn cache(&self) -> &Cache {
        &self.hub.cache
    }

    /// The settings in force (the config file's).
    pub fn settings(&self) -> Arc<crate::settings::Settings> {
        self.hub.settings()
    }

    /// Replaces the settings (a config file read and checked).
    pub fn set_settings(&self, s: crate::settings::Settings) {
        self.scripts.set_concurrency(s.scripts.concurrency);
        self.hub.set_settings(s);
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
        if self.config.private_counters {
            let full = Arc::new(m.clone());
            let mut public = m.clone();
            public.restrict_counters(Viewer::Nobody);
            system::publish(&self.hub.cache, &public, sample_us);
            if let Ok(mut l) = self.latest.lock() {
                *l = Some(LatestSample {
                    model: full,
                    sample_us,
                    at: Instant::now(),
                });
            }
        } else {
            system::publish(&self.hub.cache, m, sample_us);
        }
        basic::refresh(&self.hub.cache);
        self.network.publish(&self.hub.cache, true);
        self.notify(Event::System);
    }

    /// What `status` says of the flight recorder.
    pub fn set_recorder_status(&self, status: serde_json::Value) {
        if let Ok(mut r) = self.recorder.lock() {
            *r = Some(status);
        }
    }

    /// A counter key (system::COUNTER_KEYS) as `uid` may read it (None: root, or the
    /// daemon's own user): made from the latest sample.
    fn counters_for(&self, key: &str, uid: Option<u32>) -> Option<Arc<Entry>> {
        let latest = self.latest.lock().ok()?.clone()?;
        let mut model = (*latest.model).clone();
        model.restrict_counters(uid.map_or(Viewer::Everyone, Viewer::Uid));
        let sample = system::Sample {
            model: &model,
            sample_us: latest.sample_us,
        };
        let json = system::value_json(key, &sample)?;
        Some(Arc::new(Entry::made_at(json, latest.at)))
    }

    /// Re-publishes the network keys whenever the kernel announces a link, address or
    /// route change on `events` (opened before privileges were dropped).
    pub fn watch_network(self: &Arc<Self>, mut events: Events) -> std::io::Result<()> {
        if let Some(p) = events.probe.take() {
            self.network.set_probe(p);
        }
        let d = self.clone();
        events.run(move || {
            d.network.publish(&d.hub.cache, false);
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
            .hub
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
            "keys": self.hub.cache.len(),
            "clients": self.clients.load(Ordering::Relaxed),
            "requests": self.requests.load(Ordering::Relaxed),
            "git_paths": self.git.len(),
            "contexts": self.contexts.len(),
            "watched_dirs": self.contexts.watched_dirs(),
            "vars": self.puts.usage().0,
            "scripts_started": self.scripts.started(),
            "recorder": self.recorder.lock().ok().and_then(|r| r.clone()),
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
        self.hub.subscribe()
    }

    /// Wakes the watchers of what changed.
    pub(crate) fn notify(&self, ev: Event) {
        self.hub.notify(ev);
    }

    /// Makes the git keys of `path` current for the daemon's own user (see
    /// [`GitPaths::ensure`]); the slow counts follow in the background.
    pub async fn refresh_git(self: &Arc<Self>, path: &str) {
        let _ = self
            .git
            .ensure(&self.hub, path, &Rights::Own, Counts::Spawn)
            .await;
    }

    /// Background work of the providers (inotify events, poll timers, idle contexts,
    /// expiring values, scripts that are due).
    pub async fn run_providers(self: Arc<Self>) {
        let every_second = async {
            let mut tick = tokio::time::interval(Duration::from_secs(1));
            loop {
                tick.tick().await;
                if self.puts.sweep(&self.hub.cache) {
                    self.notify(Event::System);
                }
                self.scripts.tick(&self.hub).await;
            }
        };
        tokio::join!(
            self.git.clone().run(self.hub.clone()),
            self.contexts.clone().run(self.hub.clone()),
            every_second
        );
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
}

pub use kernstat_client::keys::is_stale;

/// The asking process, for providers whose answer depends on it.
fn client_of(p: &context::Provider, peer: Peer) -> Option<Client> {
    match (p.per_client, peer.uid, peer.pid) {
        (true, Some(uid), Some(pid)) => Some(Client::of(uid, pid)),
        _ => None,
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
