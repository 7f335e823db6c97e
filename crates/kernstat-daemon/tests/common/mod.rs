//! The daemon on a temporary socket, in this process: what the daemon's integration
//! tests (server.rs, context.rs) share.
#![allow(dead_code)]

use std::path::PathBuf;
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use kernstat_client::Session;
use kernstat_daemon::{Config, Daemon};
use kernstat_model::Model;
use serde_json::Value;

pub struct TestDaemon {
    pub _dir: tempfile::TempDir,
    pub sock: PathBuf,
    pub daemon: Arc<Daemon>,
    pub refreshes: mpsc::Receiver<()>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    rt: Option<tokio::runtime::Runtime>,
}

impl Drop for TestDaemon {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(rt) = self.rt.take() {
            rt.shutdown_timeout(Duration::from_secs(1));
        }
    }
}

pub fn model(load: f64) -> Model {
    Model {
        cpu_percent: 12.5,
        load: [load, 0.3, 0.2],
        ..Default::default()
    }
}

pub fn start_with(config: Config, dir_mode: u32, sock_mode: u32) -> TestDaemon {
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("run/sock");
    let daemon = Daemon::new(config);
    daemon.publish_system(&model(0.42), 50.0);
    let (tx, refreshes) = mpsc::channel();
    daemon.set_refresh(move || {
        let _ = tx.send(());
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let listener = kernstat_daemon::bind(&sock, sock_mode, dir_mode).unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    rt.spawn(kernstat_daemon::serve(listener, daemon.clone(), async {
        let _ = stopped.await;
    }));
    rt.spawn(daemon.clone().run_providers());
    TestDaemon {
        _dir: dir,
        sock,
        daemon,
        refreshes,
        stop: Some(stop),
        rt: Some(rt),
    }
}

pub fn start() -> TestDaemon {
    start_with(Config::default(), 0o700, 0o600)
}

/// One request line and its parsed reply.
pub fn ask(s: &mut Session, req: &str) -> Value {
    let line = s.raw(req.as_bytes()).unwrap();
    serde_json::from_slice(line)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(line)))
}

/// A session with the test daemon.
pub fn session(d: &TestDaemon) -> Session {
    let s = Session::connect(&d.sock).unwrap();
    s.set_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}
