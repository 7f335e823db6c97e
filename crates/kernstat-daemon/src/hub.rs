//! What the providers' schedules need from the daemon, kept below both so that the
//! server depends on the providers and never the reverse: the cache they fill, the
//! events that wake `watch` streams and the snapshot's publisher, the settings in force,
//! the timing of polls and expiry, and the per-user slots their blocking work runs in.
//! The server (`server.rs`) owns a `Hub` beside the providers' schedules and answers
//! requests from both; a schedule sees only the `Hub` (tests/layering.rs checks that no
//! file under providers/ names the server).

use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::sync::broadcast;

use crate::cache::Cache;
use crate::jobs::Jobs;
use crate::settings::Settings;

/// What changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// A system sample was published (every global key may have changed).
    System,
    /// The keys of this scope (a git path, a context) were recomputed.
    Path(Arc<str>),
}

/// When per-path and per-context keys are polled and forgotten.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// Keys nobody read for this long stop being refreshed.
    pub idle_after: Duration,
    /// Poll timer for path-scoped keys (inotify is the main trigger).
    pub poll_every: Duration,
}

/// The providers' view of the daemon.
#[derive(Debug)]
pub struct Hub {
    /// Every value.
    pub cache: Cache,
    /// Blocking work on clients' behalf, in per-user slots.
    pub jobs: Arc<Jobs>,
    events: broadcast::Sender<Event>,
    settings: RwLock<Arc<Settings>>,
    timing: Timing,
}

impl Hub {
    /// An empty hub.
    pub fn new(timing: Timing) -> Hub {
        let (events, _) = broadcast::channel(256);
        Hub {
            cache: Cache::new(),
            jobs: Arc::default(),
            events,
            settings: Default::default(),
            timing,
        }
    }

    /// Wakes the watchers of what changed.
    pub fn notify(&self, ev: Event) {
        let _ = self.events.send(ev);
    }

    /// A receiver of every change from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.events.subscribe()
    }

    /// The settings in force (the config file's).
    pub fn settings(&self) -> Arc<Settings> {
        self.settings.read().map(|s| s.clone()).unwrap_or_default()
    }

    /// Replaces the settings.
    pub fn set_settings(&self, s: Settings) {
        if let Ok(mut g) = self.settings.write() {
            *g = Arc::new(s);
        }
    }

    /// Poll and expiry timing.
    pub fn timing(&self) -> Timing {
        self.timing
    }
}
