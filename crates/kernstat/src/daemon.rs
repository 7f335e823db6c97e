//! `kernstat daemon`: the sampler on its interval, publishing into the daemon's cache,
//! and the socket server (kernstat-daemon) on a small tokio runtime.
//!
//! Start-up order matters for least privilege: load BPF and bind the socket while still
//! root, then (with --system) empty the capability bounding set, switch to the
//! unprivileged user with no capabilities, install the seccomp allow-list (sandbox.rs),
//! and only then start threads. The sampler runs on the main thread (the BPF skeleton
//! stays where it was loaded); a signal thread turns SIGTERM/SIGINT/SIGHUP into a
//! clean stop that removes the socket.

use std::path::PathBuf;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use kernstat_daemon::{client::SYSTEM_SOCKET, Access, Config, Daemon};
use kernstat_model::{Model, ModelOptions, RawSample, Source};

use crate::bar::open_collector;
use crate::cli::DaemonArgs;
use crate::exporter::MetricsSources;
use crate::privileges::{self, Dropped};
use crate::signals::{Signals, Wake};

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

/// Runs `kernstat daemon`; returns the exit status.
pub fn run(args: &DaemonArgs) -> anyhow::Result<i32> {
    crate::autostart::adopt_lock();
    // SAFETY: geteuid has no preconditions.
    let euid = unsafe { libc::geteuid() };
    if args.system && euid != 0 {
        bail!(
            "--system needs root: it loads BPF and binds {SYSTEM_SOCKET}, then switches to --user {}",
            args.user
        );
    }
    let switch_to = if args.system {
        Some(
            kernstat_sources::users::by_name_or_uid(&args.user)
                .with_context(|| format!("--user {}: no such user", args.user))?,
        )
    } else {
        None
    };
    let mut allowed = Vec::new();
    for a in &args.allow {
        let u = kernstat_sources::users::by_name_or_uid(a)
            .with_context(|| format!("--allow {a}: no such user"))?;
        allowed.push(u.uid);
    }
    let access = if !allowed.is_empty() {
        Access {
            uids: Some(allowed),
        }
    } else if args.system {
        Access { uids: None }
    } else {
        Access {
            uids: Some(vec![euid]),
        }
    };
    let socket: PathBuf = args.socket.clone().unwrap_or_else(|| {
        if args.system {
            PathBuf::from(SYSTEM_SOCKET)
        } else {
            kernstat_daemon::client::user_socket()
        }
    });

    // The metrics port is taken first: an address in use is one sentence and exit 2,
    // before anything is loaded or bound.
    let metrics_listener = match args.metrics {
        Some(addr) => match std::net::TcpListener::bind(addr) {
            Ok(l) => Some(l),
            Err(e) => {
                eprintln!("kernstat daemon: --metrics {addr}: {e}");
                return Ok(2);
            }
        },
        None => None,
    };
    // The address actually bound (a port of 0 asks the kernel for a free one), asked
    // now: getsockname is not in the --system seccomp allow-list.
    let metrics_addr = metrics_listener.as_ref().and_then(|l| l.local_addr().ok());

    // A socket directory another user could have made (or replace files in) is refused
    // before anything is loaded: one sentence, exit 2.
    if let Some(dir) = socket.parent() {
        if let Err(e) = kernstat_daemon::runtime::prepare(dir, args.system) {
            eprintln!("kernstat daemon: {e}");
            return Ok(2);
        }
    }
    // The config file: a mistake is one sentence naming the line, and exit 2.
    let config_path = args
        .config
        .clone()
        .or_else(kernstat_daemon::settings::default_path);
    let settings = match config_path
        .as_deref()
        .map(kernstat_daemon::settings::Settings::load_or_why)
    {
        Some(Ok(s)) => s,
        // The default place not ours to read (a HOME that is another user's): not this
        // user's config, the defaults apply. Another I/O error there is said and the
        // defaults apply; a file named with --config, or one that is wrong, is fatal.
        Some(Err((Some(std::io::ErrorKind::PermissionDenied), _))) if args.config.is_none() => {
            Default::default()
        }
        Some(Err((Some(_), e))) if args.config.is_none() => {
            eprintln!("kernstat daemon: config {e}; using the defaults");
            Default::default()
        }
        Some(Err((_, e))) => {
            eprintln!("kernstat daemon: config {e}");
            return Ok(2);
        }
        None => Default::default(),
    };
    if args.system && !settings.script.is_empty() {
        eprintln!(
            "kernstat daemon: config: script providers run only in a user daemon (the system daemon may not start processes)"
        );
        return Ok(2);
    }
    // Link, address and route announcements: subscribed while socket() and bind() are
    // still allowed (a system daemon's seccomp filter has neither). Without them the
    // network keys follow the samples only.
    let network_events = kernstat_daemon::providers::network::Events::open().ok();
    let signals = Signals::block();
    raise_fd_limit();
    let mut collector = open_collector(&args.source)?;
    // Kernel histograms and BPF statistics for /metrics: loaded while privileged.
    let mut metrics = match metrics_listener {
        Some(_) => Some(MetricsSources::open(args, &collector)?),
        None => None,
    };
    // A system daemon's socket is for every local user (the peer check narrows it with
    // --allow); a user daemon's is for its owner only.
    let (mode, dir_mode) = if args.system {
        (0o666, 0o755)
    } else {
        (0o600, 0o700)
    };
    let listener = kernstat_daemon::bind(&socket, mode, dir_mode)
        .with_context(|| format!("binding {}", socket.display()))?;
    // The shared-memory snapshot beside the socket, made now (a system daemon: as root,
    // so that the file stays root's and only this descriptor can write it once the
    // daemon runs as --user): a user daemon's holds everything (0600, like its socket);
    // a system daemon's only the machine's keys (0644: every local user may connect),
    // without per-process keys where /proc hides other users' processes, and none at
    // all when --allow narrows who may connect.
    let snapshot = socket.with_file_name("snapshot");
    let hidepid = args.system && kernstat_daemon::providers::system::proc_hides_pids();
    let publish = match (args.system, args.allow.is_empty()) {
        (false, _) => Some((0o600, true)),
        (true, true) => Some((0o644, false)),
        (true, false) => None,
    };
    let interval_ms = args.interval.as_millis().min(u128::from(u32::MAX)) as u32;
    let snapshot_writer = match publish {
        Some((mode, scoped)) => {
            match kernstat_daemon::shm::Writer::create(&snapshot, mode, interval_ms) {
                Ok(w) => Some((w, scoped)),
                Err(e) => {
                    eprintln!(
                        "kernstat daemon: snapshot {}: {e}; clients use the socket",
                        snapshot.display()
                    );
                    None
                }
            }
        }
        None => None,
    };

    let mut scratch = RawSample::default();
    let dropped = match &switch_to {
        Some(user) => {
            // Nothing is handed to the user: the directory, socket and snapshot stay
            // root's (the snapshot is written through the descriptor opened above), so
            // that nothing running as that user can replace what clients read. The
            // socket and snapshot (marked closed) stay behind when the daemon stops;
            // the next start replaces them, and systemd's RuntimeDirectory removes them.
            // As root still: no capability can come back through any later execve.
            crate::sandbox::clear_bounding_set()?;
            let dropped = privileges::become_user(user, || {
                collector.sample(&mut scratch).is_ok()
                    && metrics.as_ref().is_none_or(|m| m.readable())
            })
            .context("dropping privileges")?;
            // Before any thread exists, so that all of them inherit it.
            crate::sandbox::install_seccomp()?;
            dropped
        }
        None if collector.source() == Source::Bpf || metrics.is_some() => {
            privileges::drop_after_load(|| {
                collector.sample(&mut scratch).is_ok()
                    && metrics.as_ref().is_none_or(|m| m.readable())
            })
        }
        None => Dropped::Nothing,
    };

    let config = Config {
        max_connections: args.max_connections.max(1),
        max_connections_per_user: args
            .max_connections_per_user
            .unwrap_or(if args.system {
                256
            } else {
                args.max_connections
            })
            .max(1),
        access,
        interval: args.interval,
        hide_processes: hidepid,
        ..Config::default()
    };
    let daemon = Daemon::new(config);
    daemon.set_settings(settings);
    if let Some(p) = config_path {
        if let Err(e) = daemon.watch_settings(p.clone()) {
            eprintln!(
                "kernstat daemon: config {}: not watched ({e}); restart to apply changes",
                p.display()
            );
        }
    }
    if let Some(ev) = network_events {
        daemon
            .watch_network(ev)
            .context("starting the netlink thread")?;
    }
    let (tx, rx) = mpsc::channel::<Msg>();
    let refresh_tx = tx.clone();
    daemon.set_refresh(move || {
        let _ = refresh_tx.send(Msg::Refresh);
    });
    std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || loop {
            if signals.wait(Duration::from_secs(3600)) == Wake::Stop {
                let _ = tx.send(Msg::Stop);
                return;
            }
        })
        .context("starting the signal thread")?;

    let workers = std::thread::available_parallelism().map_or(2, |n| n.get().min(2));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .max_blocking_threads(4)
        .thread_name("kernstat-daemon")
        .enable_all()
        .build()
        .context("starting the runtime")?;
    let (stop_server, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = rt.spawn(kernstat_daemon::serve(listener, daemon.clone(), async {
        let _ = stopped.await;
    }));
    rt.spawn(daemon.clone().run_providers());
    if let Some((writer, scoped)) = snapshot_writer {
        let hidden = if hidepid {
            kernstat_daemon::providers::system::PER_PROCESS_KEYS
        } else {
            &[]
        };
        rt.spawn(kernstat_daemon::shm::publish(
            daemon.clone(),
            writer,
            scoped,
            hidden,
        ));
    }
    let (stop_metrics, metrics_stopped) = tokio::sync::oneshot::channel::<()>();
    let metrics_server = match (metrics_listener, &metrics) {
        (Some(l), Some(m)) => Some(rt.spawn(kernstat_daemon::metrics::http::serve(
            l,
            m.exporter(),
            async {
                let _ = metrics_stopped.await;
            },
        ))),
        _ => None,
    };

    eprintln!(
        "kernstat daemon: listening on {}{} (source {}, every {:?}{})",
        socket.display(),
        metrics_addr
            .map(|a| format!(" and http://{a}/metrics"))
            .unwrap_or_default(),
        collector.source().as_str(),
        args.interval,
        match (&switch_to, dropped) {
            (Some(u), Dropped::KeptBpf) => format!(", running as {} with CAP_BPF only", u.name),
            (Some(u), _) => format!(", running as {} without capabilities", u.name),
            (None, Dropped::All) => ", capabilities dropped".to_string(),
            _ => String::new(),
        }
    );

    let opts = ModelOptions {
        include_kthreads: args.kthreads,
        ..ModelOptions::default()
    };
    let result = sample_loop(
        &mut collector,
        &daemon,
        metrics.as_mut(),
        &rx,
        args.interval,
        &opts,
    );

    let _ = stop_server.send(());
    let _ = stop_metrics.send(());
    let _ = rt.block_on(server);
    if let Some(m) = metrics_server {
        let _ = rt.block_on(m);
    }
    // The snapshot's writer marks it closed (and removes it where it may) as the
    // runtime drops its task.
    rt.shutdown_timeout(Duration::from_secs(1));
    if switch_to.is_none() {
        if let Err(e) = std::fs::remove_file(&socket) {
            eprintln!(
                "kernstat daemon: could not remove {}: {e}",
                socket.display()
            );
        }
    }
    result.map(|()| 0)
}

/// Samples on a fixed grid (and on refresh requests) until told to stop.
fn sample_loop(
    collector: &mut crate::collect::Collector,
    daemon: &Daemon,
    mut metrics: Option<&mut MetricsSources>,
    rx: &mpsc::Receiver<Msg>,
    interval: Duration,
    opts: &ModelOptions,
) -> anyhow::Result<()> {
    let mut prev = RawSample::default();
    let mut cur = RawSample::default();
    let mut model = Model::default();
    collector.sample(&mut prev).context("sampling")?;
    let mut last = Instant::now();
    let mut grid = last + FIRST_WINDOW;
    let mut due = grid;
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
        collector.sample(&mut cur).context("sampling")?;
        model.update(&prev, &cur, opts);
        let sample_us = t0.elapsed().as_secs_f64() * 1e6;
        daemon.publish_system(&model, sample_us);
        if let Some(m) = metrics.as_deref_mut() {
            m.publish(collector, &cur, &model, sample_us);
        }
        std::mem::swap(&mut prev, &mut cur);
        last = Instant::now();
        // The next grid point after now; a refresh in between does not move the grid.
        while grid <= last {
            grid += interval;
        }
        due = grid;
    }
}
