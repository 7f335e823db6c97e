//! Running the daemon: what `kernstat daemon` does once its flags are resolved, for any
//! front end that wants one. Start-up in the order least privilege needs (everything a
//! mistake stops, then everything that needs privileges: the ports, the socket, the
//! snapshot's file, the BPF programs, the archive; then the privileges dropped, the
//! seccomp allow-list installed, and only then threads), the sampling loop on a fixed
//! grid, the metrics endpoint's feed (`metrics_feed`) and the flight recorder
//! (`recording`).
#![deny(missing_docs)]

pub mod direct;
pub mod metrics_feed;
pub mod recording;

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context;
use kernstat_collect::{CollectOptions, Collector};
use kernstat_daemon::{Access, Config, Daemon};
use kernstat_model::{Model, ModelOptions, RawSample, Source};
use kernstat_os::privileges::{self, Dropped};
use kernstat_os::signals::{Signals, Wake};

use metrics_feed::MetricsSources;

/// What `kernstat daemon` was asked for, with names already resolved (the CLI turns
/// `--user` and `--allow` into users, refusing unknown ones as usage errors).
#[derive(Clone, Debug)]
pub struct DaemonOptions {
    /// `--system`: serve every local user, as root first and then `switch_to`.
    pub system: bool,
    /// The user a system daemon becomes.
    pub switch_to: Option<kernstat_sources::users::User>,
    /// Who may connect.
    pub access: Access,
    /// `--allow` narrowed who may connect (a system daemon then publishes no snapshot).
    pub allow_given: bool,
    /// The socket.
    pub socket: PathBuf,
    /// The config file, and whether it was named (a named one that is wrong is fatal).
    pub config_path: Option<PathBuf>,
    /// `--config` was given.
    pub config_named: bool,
    /// Other users' processes are private here (hidepid, or --private-processes).
    pub hidepid: bool,
    /// The sampling interval.
    pub interval: Duration,
    /// Kernel threads in the top lists.
    pub kthreads: bool,
    /// Connections at most, and per user (other than root).
    pub max_connections: usize,
    /// See `max_connections`.
    pub max_connections_per_user: usize,
    /// How to collect (BPF or procfs, sensors, roots).
    pub collect: CollectOptions,
    /// Control groups read: depth and count.
    pub cgroup_depth: u32,
    /// See `cgroup_depth`.
    pub cgroup_max: usize,
    /// The Prometheus endpoint.
    pub metrics: Option<metrics_feed::MetricsOptions>,
    /// The flight recorder.
    pub record: Option<recording::RecordOptions>,
}

/// The first sample is published this soon after the baseline, so that clients get
/// numbers right after start (rates over a short window, like the bar's first tick).
const FIRST_WINDOW: Duration = Duration::from_millis(20);
/// Refresh requests closer together than this are merged (clients cannot spin the
/// sampler).
const MIN_REFRESH_GAP: Duration = Duration::from_millis(100);

enum Msg {
    Refresh,
    Stop,
}

fn raise_fd_limit() {
    // Each client is a descriptor; the default soft limit (1024) is below the
    // connection cap. SAFETY: getrlimit/setrlimit with a valid struct.
    unsafe {
        let mut r: libc::rlimit = std::mem::zeroed();
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < r.rlim_max {
            r.rlim_cur = r.rlim_max.min(65536);
            libc::setrlimit(libc::RLIMIT_NOFILE, &r);
        }
    }
}

/// Runs `kernstat daemon`; returns the exit status. Wiring only: each step below is a
/// function, in the order least privilege needs.
pub fn run(opts: &DaemonOptions) -> anyhow::Result<i32> {
    let (args, plan) = (opts, opts);
    let mut opened = match Opened::while_privileged(args, plan)? {
        Ok(o) => o,
        Err(code) => return Ok(code),
    };
    let dropped = drop_privileges(plan, &mut opened)?;
    let daemon = make_daemon(args, plan, &mut opened)?;
    let (tx, rx) = mpsc::channel::<Msg>();
    wire_refresh_and_signals(&daemon, tx, opened.signals.take())?;
    let serving = Serving::start(&daemon, &mut opened)?;
    say_listening(args, plan, &opened, dropped);
    let opts = ModelOptions {
        include_kthreads: args.kthreads,
        ..ModelOptions::default()
    };
    let result = sample_loop(&mut opened, &daemon, &rx, args.interval, &opts);
    serving.stop();
    if plan.switch_to.is_none() {
        if let Err(e) = std::fs::remove_file(&plan.socket) {
            eprintln!(
                "kernstat daemon: could not remove {}: {e}",
                plan.socket.display()
            );
        }
    }
    result.map(|()| 0)
}

/// What is opened while the daemon may still do anything: the ports, the socket, the
/// snapshot's file, the BPF programs, the netlink subscription.
struct Opened {
    settings: kernstat_daemon::settings::Settings,
    metrics_listener: Option<std::net::TcpListener>,
    metrics_addr: Option<std::net::SocketAddr>,
    network_events: Option<kernstat_daemon::providers::network::Events>,
    signals: Option<Signals>,
    collector: kernstat_collect::Collector,
    metrics: Option<MetricsSources>,
    listener: Option<std::os::unix::net::UnixListener>,
    snapshot: Option<(kernstat_shm::Writer, bool)>,
    /// The flight recorder (--record).
    recorder: Option<recording::Recorder>,
    /// OOM kills (BPF; it fires only when the kernel kills).
    oom: Option<kernstat_collect::events::OomWatcher>,
}

impl Opened {
    /// Everything a mistake in the flags or the config stops (Err(2): one sentence
    /// said), then everything that needs privileges.
    fn while_privileged(
        args: &DaemonOptions,
        plan: &DaemonOptions,
    ) -> anyhow::Result<Result<Opened, i32>> {
        // The metrics port is taken first: an address in use is one sentence and exit
        // 2, before anything is loaded or bound.
        let metrics_listener = match args.metrics.as_ref().map(|m| m.addr) {
            Some(addr) => match std::net::TcpListener::bind(addr) {
                Ok(l) => Some(l),
                Err(e) => {
                    eprintln!("kernstat daemon: --metrics {addr}: {e}");
                    return Ok(Err(2));
                }
            },
            None => None,
        };
        // The address actually bound (a port of 0 asks the kernel for a free one), asked
        // now: getsockname is not in the --system seccomp allow-list.
        let metrics_addr = metrics_listener.as_ref().and_then(|l| l.local_addr().ok());
        // A socket directory another user could have made (or replace files in) is
        // refused before anything is loaded: one sentence, exit 2.
        if let Some(dir) = plan.socket.parent() {
            if let Err(e) = kernstat_client::runtime::prepare(dir, args.system) {
                eprintln!("kernstat daemon: {e}");
                return Ok(Err(2));
            }
        }
        let settings = match load_settings(args, plan) {
            Ok(s) => s,
            Err(code) => return Ok(Err(code)),
        };
        // Link, address and route announcements: subscribed while socket() and bind()
        // are still allowed (a system daemon's seccomp filter has neither). Without them
        // the network keys follow the samples only.
        let network_events = kernstat_daemon::providers::network::Events::open().ok();
        let signals = Some(Signals::block());
        raise_fd_limit();
        let mut collector = Collector::open(&args.collect).context("opening /proc")?;
        if let Some(notice) = collector.notice(args.collect.no_bpf) {
            eprintln!("kernstat: {notice}");
        }
        collector.with_cgroups(
            &args.collect.roots,
            Some(args.cgroup_depth),
            args.cgroup_max,
        );
        collector.with_counters(&args.collect.roots);
        // Retransmits and connect latency: hooks that fire per TCP state change and per
        // retransmit, not per packet.
        collector.with_tcp();
        // Kernel histograms and BPF statistics for /metrics: loaded while privileged.
        let metrics = match metrics_listener {
            Some(_) => Some(MetricsSources::open(
                args.metrics.as_ref().expect("listening"),
                args.system,
                &collector,
                plan.hidepid,
            )?),
            None => None,
        };
        // A system daemon's socket is for every local user (the peer check narrows it
        // with --allow); a user daemon's is for its owner only.
        let (mode, dir_mode) = if args.system {
            (0o666, 0o755)
        } else {
            (0o600, 0o700)
        };
        let listener = kernstat_daemon::bind(&plan.socket, mode, dir_mode)
            .with_context(|| format!("binding {}", plan.socket.display()))?;
        // The archive directory is made (and given to the daemon's user) while root;
        // the task iterator and the exits hook are loaded now too.
        let recorder = match &args.record {
            Some(rec) => {
                let owner = plan.switch_to.as_ref().map(|u| (u.uid, u.gid));
                match recording::Recorder::open(rec, args.collect.no_bpf, owner) {
                    Ok(r) => Some(r),
                    Err(e) => {
                        eprintln!("kernstat daemon: {e:#}");
                        return Ok(Err(2));
                    }
                }
            }
            None => None,
        };
        Ok(Ok(Opened {
            settings,
            metrics_listener,
            metrics_addr,
            network_events,
            signals,
            collector,
            metrics,
            listener: Some(listener),
            snapshot: make_snapshot(args, plan),
            recorder,
            oom: if args.collect.no_bpf {
                None
            } else {
                kernstat_collect::events::OomWatcher::open().ok()
            },
        }))
    }
}

/// The config file: a mistake is one sentence naming the line, and exit 2.
fn load_settings(
    args: &DaemonOptions,
    plan: &DaemonOptions,
) -> Result<kernstat_daemon::settings::Settings, i32> {
    let settings = match plan
        .config_path
        .as_deref()
        .map(kernstat_daemon::settings::Settings::load_or_why)
    {
        Some(Ok(s)) => s,
        // The default place not ours to read (a HOME that is another user's): not this
        // user's config, the defaults apply. Another I/O error there is said and the
        // defaults apply; a file named with --config, or one that is wrong, is fatal.
        Some(Err((Some(std::io::ErrorKind::PermissionDenied), _))) if !args.config_named => {
            Default::default()
        }
        Some(Err((Some(_), e))) if !args.config_named => {
            eprintln!("kernstat daemon: config {e}; using the defaults");
            Default::default()
        }
        Some(Err((_, e))) => {
            eprintln!("kernstat daemon: config {e}");
            return Err(2);
        }
        None => Default::default(),
    };
    if args.system && !settings.script.is_empty() {
        eprintln!(
            "kernstat daemon: config: script providers run only in a user daemon (the system daemon may not start processes)"
        );
        return Err(2);
    }
    Ok(settings)
}

/// The shared-memory snapshot beside the socket, made now (a system daemon: as root, so
/// that the file stays root's and only this descriptor can write it once the daemon runs
/// as --user): a user daemon's holds everything (0600, like its socket); a system
/// daemon's only the machine's keys (0644: every local user may connect), without
/// per-process keys where /proc hides other users' processes, and none at all when
/// --allow narrows who may connect. With whether it holds per-path keys.
fn make_snapshot(
    args: &DaemonOptions,
    plan: &DaemonOptions,
) -> Option<(kernstat_shm::Writer, bool)> {
    let (mode, scoped) = match (args.system, !args.allow_given) {
        (false, _) => (0o600, true),
        (true, true) => (0o644, false),
        (true, false) => return None,
    };
    let path = plan.socket.with_file_name("snapshot");
    let interval_ms = args.interval.as_millis().min(u128::from(u32::MAX)) as u32;
    match kernstat_shm::Writer::create(&path, mode, interval_ms) {
        Ok(w) => Some((w, scoped)),
        Err(e) => {
            eprintln!(
                "kernstat daemon: snapshot {}: {e}; clients use the socket",
                path.display()
            );
            None
        }
    }
}

/// A system daemon becomes its --user with no capabilities and installs its seccomp
/// allow-list; a user daemon that loaded BPF drops every capability. Nothing is handed
/// to the --user: the directory, socket and snapshot stay root's (the snapshot is
/// written through the descriptor opened above), so that nothing running as that user
/// can replace what clients read; the socket and snapshot (marked closed) stay behind
/// when the daemon stops, the next start replaces them, and systemd's
/// RuntimeDirectory removes them.
fn drop_privileges(plan: &DaemonOptions, opened: &mut Opened) -> anyhow::Result<Dropped> {
    let mut scratch = RawSample::default();
    let loaded = opened.collector.source() == Source::Bpf || opened.metrics.is_some();
    let (collector, metrics) = (&mut opened.collector, &opened.metrics);
    let mut works =
        || collector.sample(&mut scratch).is_ok() && metrics.as_ref().is_none_or(|m| m.readable());
    Ok(match &plan.switch_to {
        Some(user) => {
            // As root still: no capability can come back through any later execve.
            kernstat_os::sandbox::clear_bounding_set()?;
            let dropped = privileges::become_user(user, works).context("dropping privileges")?;
            // Before any thread exists, so that all of them inherit it.
            kernstat_os::sandbox::install_seccomp()?;
            dropped
        }
        None if loaded => privileges::drop_after_load(&mut works),
        None => Dropped::Nothing,
    })
}

/// The daemon's state, its settings (watched), and its netlink thread.
fn make_daemon(
    args: &DaemonOptions,
    plan: &DaemonOptions,
    opened: &mut Opened,
) -> anyhow::Result<std::sync::Arc<Daemon>> {
    let config = Config {
        max_connections: args.max_connections.max(1),
        max_connections_per_user: args.max_connections_per_user.max(1),
        access: plan.access.clone(),
        interval: args.interval,
        hide_processes: plan.hidepid,
        private_counters: args.system,
        ..Config::default()
    };
    let daemon = Daemon::new(config);
    daemon.set_settings(std::mem::take(&mut opened.settings));
    if let Some(p) = &plan.config_path {
        if let Err(e) = daemon.watch_settings(p.clone()) {
            eprintln!(
                "kernstat daemon: config {}: not watched ({e}); restart to apply changes",
                p.display()
            );
        }
    }
    if let Some(ev) = opened.network_events.take() {
        daemon
            .watch_network(ev)
            .context("starting the netlink thread")?;
    }
    Ok(daemon)
}

/// Clients' `refresh` wakes the sampler; SIGTERM/SIGINT/SIGHUP stop it (a thread of
/// its own turns the signals into a message).
fn wire_refresh_and_signals(
    daemon: &Daemon,
    tx: mpsc::Sender<Msg>,
    signals: Option<Signals>,
) -> anyhow::Result<()> {
    let refresh_tx = tx.clone();
    daemon.set_refresh(move || {
        let _ = refresh_tx.send(Msg::Refresh);
    });
    let Some(signals) = signals else {
        return Ok(());
    };
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || loop {
            if signals.wait(Duration::from_secs(3600)) == Wake::Stop {
                let _ = tx.send(Msg::Stop);
                return;
            }
        })
        .context("starting the signal thread")?;
    Ok(())
}

/// The runtime and what runs on it: the socket server, the providers' schedules, the
/// snapshot's publisher, the metrics endpoint.
struct Serving {
    rt: tokio::runtime::Runtime,
    server: tokio::task::JoinHandle<std::io::Result<()>>,
    stop_server: tokio::sync::oneshot::Sender<()>,
    metrics: Option<tokio::task::JoinHandle<std::io::Result<()>>>,
    stop_metrics: tokio::sync::oneshot::Sender<()>,
}

impl Serving {
    fn start(daemon: &std::sync::Arc<Daemon>, opened: &mut Opened) -> anyhow::Result<Serving> {
        let workers = std::thread::available_parallelism().map_or(2, |n| n.get().min(2));
        // Blocking work on clients' behalf runs in per-user slots of 4 (jobs.rs): the
        // pool must hold many users' slots, or one user's hung jobs would take every
        // thread and delay everyone's (threads idle 10 s go away).
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .max_blocking_threads(64)
            .thread_name("kernstat-daemon")
            .enable_all()
            .build()
            .context("starting the runtime")?;
        let (stop_server, stopped) = tokio::sync::oneshot::channel::<()>();
        let listener = opened.listener.take().context("the socket")?;
        let server = rt.spawn(kernstat_daemon::serve(listener, daemon.clone(), async {
            let _ = stopped.await;
        }));
        rt.spawn(daemon.clone().run_providers());
        if let Some((writer, scoped)) = opened.snapshot.take() {
            let hidden = if daemon.config().hide_processes {
                kernstat_daemon::providers::system::PER_PROCESS_KEYS
            } else {
                &[]
            };
            rt.spawn(kernstat_daemon::shm_publish::publish(
                daemon.clone(),
                writer,
                scoped,
                hidden,
            ));
        }
        let (stop_metrics, metrics_stopped) = tokio::sync::oneshot::channel::<()>();
        let metrics = match (opened.metrics_listener.take(), &opened.metrics) {
            (Some(l), Some(m)) => Some(rt.spawn(kernstat_daemon::metrics::http::serve(
                l,
                m.exporter(),
                async {
                    let _ = metrics_stopped.await;
                },
            ))),
            _ => None,
        };
        Ok(Serving {
            rt,
            server,
            stop_server,
            metrics,
            stop_metrics,
        })
    }

    /// Stops serving; the snapshot's writer marks its file closed (and removes it where
    /// it may) as the runtime drops its task.
    fn stop(self) {
        let _ = self.stop_server.send(());
        let _ = self.stop_metrics.send(());
        let _ = self.rt.block_on(self.server);
        if let Some(m) = self.metrics {
            let _ = self.rt.block_on(m);
        }
        self.rt.shutdown_timeout(Duration::from_secs(1));
    }
}

fn say_listening(args: &DaemonOptions, plan: &DaemonOptions, opened: &Opened, dropped: Dropped) {
    eprintln!(
        "kernstat daemon: listening on {}{} (source {}, every {:?}{})",
        plan.socket.display(),
        opened
            .metrics_addr
            .map(|a| format!(" and http://{a}/metrics"))
            .unwrap_or_default(),
        opened.collector.source().as_str(),
        args.interval,
        match (&plan.switch_to, dropped) {
            (Some(u), Dropped::KeptBpf) => format!(", running as {} with CAP_BPF only", u.name),
            (Some(u), _) => format!(", running as {} without capabilities", u.name),
            (None, Dropped::All) => ", capabilities dropped".to_string(),
            _ => String::new(),
        }
    );
    if let Some(r) = &opened.recorder {
        eprintln!("kernstat daemon: {}", r.state().describe());
    }
}

/// Samples on a fixed grid (and on refresh requests) until told to stop.
fn sample_loop(
    opened: &mut Opened,
    daemon: &Daemon,
    rx: &mpsc::Receiver<Msg>,
    interval: Duration,
    opts: &ModelOptions,
) -> anyhow::Result<()> {
    let collector = &mut opened.collector;
    let mut metrics = opened.metrics.as_mut();
    let mut recorder = opened.recorder.as_mut();
    let mut oom = opened.oom.as_mut();
    let mut why = WhyWindow::default();
    let mut prev = RawSample::default();
    let mut cur = RawSample::default();
    let mut model = Model::default();
    collector.sample(&mut prev).context("sampling")?;
    let mut last = Instant::now();
    let mut grid = last + FIRST_WINDOW;
    let mut due = grid;
    let mut failing = false;
    loop {
        let now = Instant::now();
        if due > now {
            match rx.recv_timeout(due - now) {
                Ok(Msg::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
                Ok(Msg::Refresh) => {
                    due = due.min((last + MIN_REFRESH_GAP).max(now));
                    continue;
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
        }
        let t0 = Instant::now();
        if let Err(e) = collector.sample(&mut cur) {
            // A failed sample (descriptors exhausted by someone's thousands of cgroups, a
            // transient iterator error) never ends the daemon: clients keep the last
            // figures, said once, and the next grid point tries again.
            if !failing {
                eprintln!("kernstat daemon: sampling failed ({e}); serving the last sample and retrying every interval");
                failing = true;
            }
            last = Instant::now();
            while grid <= last {
                grid += interval;
            }
            due = grid;
            continue;
        }
        if failing {
            eprintln!("kernstat daemon: sampling resumed");
            failing = false;
        }
        model.update(&prev, &cur, opts);
        if let Some(w) = oom.as_deref_mut() {
            w.remember(model.procs.iter().map(|p| (p.pid, p.comm, p.rss_bytes)));
            let events = w.poll();
            if let Some(r) = recorder.as_deref_mut() {
                r.note_events(&events);
            }
            for e in events {
                eprintln!("kernstat daemon: {}", e.line());
                model.events.push(e);
            }
            let excess = model.events.len().saturating_sub(50);
            model.events.drain(..excess);
        }
        why.sample(&cur, &mut model);
        let sample_us = t0.elapsed().as_secs_f64() * 1e6;
        daemon.publish_system(&model, sample_us);
        if let Some(m) = metrics.as_deref_mut() {
            m.publish(collector, &cur, &model, sample_us);
        }
        if let Some(r) = recorder.as_deref_mut() {
            r.note_retransmits(&cur.tcp.retransmits);
            r.maybe_record(&cur, metrics.as_deref(), Instant::now());
            if let Ok(status) = serde_json::to_value(r.state()) {
                daemon.set_recorder_status(status);
            }
        }
        std::mem::swap(&mut prev, &mut cur);
        last = Instant::now();
        // The next grid point after now; a refresh in between does not move the grid.
        while grid <= last {
            grid += interval;
        }
        // Frames are recorded at the first sample at or after each --record-interval
        // (so exactly when the two intervals line up, else up to one --interval late);
        // extra samples are taken only for a --record-interval shorter than --interval.
        due = match recorder.as_ref() {
            Some(r) if r.interval() < interval => grid.min(r.next_due),
            _ => grid,
        };
    }
}

/// `kernstat why` over the daemon's last window: a snapshot of the counters once a
/// window (not at every sample: its cost is one snapshot per 10 s), the findings between
/// the last two, put in the model for the `why.*` keys and /metrics.
#[derive(Default)]
struct WhyWindow {
    base: Option<kernstat_why::Snapshot>,
    taken: Option<Instant>,
    /// Retransmits per process since the base.
    retransmits: Vec<(u32, String, Option<String>, u64)>,
}

/// The window `why.*` covers.
const WHY_WINDOW: Duration = Duration::from_secs(10);

impl WhyWindow {
    fn sample(&mut self, cur: &RawSample, model: &mut Model) {
        for s in &cur.tcp.retransmits {
            let cgroup = (!s.cgroup.is_empty()).then(|| s.cgroup.clone());
            let full = self.retransmits.len() >= 256;
            match self
                .retransmits
                .iter_mut()
                .find(|r| r.0 == s.pid && r.1 == s.comm)
            {
                Some(r) => r.3 += s.count,
                None if !full => self
                    .retransmits
                    .push((s.pid, s.comm.clone(), cgroup, s.count)),
                None => {}
            }
        }
        if self.taken.is_some_and(|t| t.elapsed() < WHY_WINDOW) {
            return;
        }
        let now_unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let snap = kernstat_why::Snapshot::of(cur, now_unix, &|_| None);
        if let Some(base) = &self.base {
            let events: Vec<kernstat_model::events::Event> = model
                .events
                .iter()
                .filter(|e| e.time_unix_ns() >= base.unix_ns)
                .cloned()
                .collect();
            let report = kernstat_why::findings(
                base,
                &snap,
                &kernstat_why::Between {
                    events: &events,
                    retransmits: &self.retransmits,
                    ended: &[],
                },
                &kernstat_why::Thresholds::default(),
                "live",
            );
            model.why = serde_json::to_value(&report).ok();
        }
        self.base = Some(snap);
        self.taken = Some(Instant::now());
        self.retransmits.clear();
    }
}
