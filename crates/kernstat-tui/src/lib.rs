//! `kernstat top`: the live view. A header with the machine (per-core bars, memory,
//! load, pressure, hardware where present, the view's own cost), an optional run-queue
//! latency panel, and a process table that sorts, filters, shows a tree, follows the
//! selected process and signals or renices it.
//!
//! Split by job: kernstat-top reads (sources → rows and machine figures), orders and
//! selects (no terminal) and switches BPF probes on and off; here `draw` renders with
//! ratatui, `term` owns the terminal and gives it back on every way out, `keys` maps keys
//! and the mouse to actions, `report` measures each refresh (`--report`). This module
//! runs the loop.
#![deny(missing_docs)]

mod diff;
mod draw;
mod keys;
mod report;
mod term;

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use crossterm::event::{self};

use kernstat_os::signals::Signals;
use kernstat_sources::TempSource;
use kernstat_top::probes::{DiskPanel, RunqPanel, TcpInterval, WritesPanel};
use kernstat_top::replay::Replay;
use kernstat_top::sample::{Machine, Sampler};
use kernstat_top::view::{SortKey, View};
use keys::{handle, toggle_disks, toggle_retrans, toggle_runq, toggle_writes};
use report::{pending_signals, Pending, Report};

/// What `kernstat top` was asked for.
pub struct TopOptions {
    /// The table's sort column at start.
    pub sort: SortKey,
    /// Largest first.
    pub descending: bool,
    /// Between refreshes.
    pub delay: Duration,
    /// The `/` filter at start.
    pub filter: Option<String>,
    /// Start as a tree.
    pub tree: bool,
    /// /proc only.
    pub no_bpf: bool,
    /// Where a pinned task iterator may be.
    pub pin_dir: std::path::PathBuf,
    /// Which sensor is the CPU temperature.
    pub temp: TempSource,
    /// Open the run-queue latency panel at start.
    pub runqlat: bool,
    /// Open the write-size panel at start.
    pub writes: bool,
    /// Open the disk-latency panel at start.
    pub disks: bool,
    /// Show TCP retransmits per process (RETR/s) from the start.
    pub retrans: bool,
    /// Stop after this many refreshes.
    pub iterations: Option<u64>,
    /// Print each refresh's cost split on stderr at the end (`--report`).
    pub report: bool,
    /// A recorded moment instead of the live machine (`--at`).
    pub replay: Option<Replay>,
}

/// Refresh intervals `+` and `-` step through.
const DELAYS: [f64; 9] = [0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 30.0];

/// Signals the confirmation dialog offers: (key, number, name).
pub(crate) const SIGNALS: [(char, i32, &str); 7] = [
    ('t', libc::SIGTERM, "TERM"),
    ('k', libc::SIGKILL, "KILL"),
    ('i', libc::SIGINT, "INT"),
    ('h', libc::SIGHUP, "HUP"),
    ('s', libc::SIGSTOP, "STOP"),
    ('c', libc::SIGCONT, "CONT"),
    ('u', libc::SIGUSR1, "USR1"),
];

/// What the keyboard is talking to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// The table.
    Normal,
    /// Typing the `/` filter.
    Filter,
    /// The help screen.
    Help,
    /// Confirming a signal to a process: (pid, command name, signal index in SIGNALS).
    Signal(u32, String, usize),
    /// The cgroup view in place of the table.
    Cgroups,
    /// Typing the cgroup view's path filter.
    CgroupFilter,
    /// Typing a time to jump to (replay, key b).
    Jump(String),
}

/// Everything the screen shows.
pub(crate) struct App {
    pub view: View,
    pub machine: Machine,
    pub mode: Mode,
    pub delay: Duration,
    pub threads: bool,
    pub runq: Option<RunqPanel>,
    pub writes: Option<WritesPanel>,
    pub disks: Option<DiskPanel>,
    /// The TCP hooks behind the RETR/s column, while it is shown.
    pub retrans: Option<TcpInterval>,
    /// `--no-bpf`: the probe keys load nothing.
    pub no_bpf: bool,
    pub cgroups: Option<kernstat_top::cgroups::CgroupPanel>,
    /// Why the run-queue panel could not open, or the last action's result.
    pub message: Option<String>,
    /// kernstat's own CPU over the last interval, percent of one core (this process,
    /// including the iterator program that runs inside its read).
    pub cost_percent: Option<f64>,
    /// Screen rows of the table's header and first row (for the mouse), set by draw.
    pub table_top: u16,
    /// Column start positions and their sort keys (for header clicks), set by draw.
    pub header_hits: Vec<(u16, u16, SortKey)>,
    /// Lines of the table that fit (for paging), set by draw.
    pub page: usize,
    pub color: bool,
    /// Refreshes so far (shown, so that one can tell a live view from a stuck one).
    pub refreshes: u64,
    /// A recorded sample on screen instead of the live machine (--at).
    pub replay: Option<Replay>,
    quit: bool,
    refresh_now: bool,
}

/// Runs `kernstat top`; returns the exit status.
pub fn run(mut args: TopOptions) -> anyhow::Result<i32> {
    let (sort, descending) = (args.sort, args.descending);
    // SIGWINCH too: a resized terminal is drawn at once, not at the next key or refresh.
    let signals = Signals::block_with_resize();
    let sigfd = signals.signalfd()?;
    let replayed = args.replay.take();
    // A replay reads nothing live: the sampler stays on /proc and is never refreshed.
    let no_bpf = args.no_bpf || replayed.is_some();
    let mut sampler = Sampler::open(no_bpf, &args.pin_dir, &args.temp)?;
    let mut app = App {
        view: View::new(sort, descending),
        machine: Machine::default(),
        mode: Mode::Normal,
        delay: args.delay,
        threads: false,
        runq: None,
        writes: None,
        disks: None,
        retrans: None,
        no_bpf: args.no_bpf,
        cgroups: None,
        message: None,
        cost_percent: None,
        table_top: 0,
        header_hits: Vec::new(),
        page: 10,
        color: std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()),
        refreshes: 0,
        replay: replayed,
        quit: false,
        refresh_now: false,
    };
    app.view.tree = args.tree;
    if let Some(f) = &args.filter {
        app.view.filter = f.clone();
    }
    // The probes are live only: not over a recorded moment, nor with --no-bpf.
    let probes = app.replay.is_none() && !app.no_bpf;
    if probes && args.runqlat {
        toggle_runq(&mut app);
    }
    if probes && args.writes {
        toggle_writes(&mut app);
    }
    if probes && args.disks {
        toggle_disks(&mut app);
    }
    if probes && args.retrans {
        toggle_retrans(&mut app);
    }
    let mut screen = term::Screen::enter()?;
    let mut refreshes = 0u64;
    let mut cpu_before = kernstat_os::process_cpu_ns();
    let mut wall_before = Instant::now();
    let mut report = Report::default();
    // The split of a refresh's cost is measured for `--report` only: each mark is a
    // clock_gettime(CLOCK_PROCESS_CPUTIME_ID) system call (four a refresh were ~2.7 %
    // of top's CPU in `perf record`), and the report keeps a figure per refresh.
    let mark = || {
        if args.report {
            kernstat_os::process_cpu_ns()
        } else {
            0
        }
    };
    loop {
        let allocs_before = kernstat_os::alloc::allocations();
        let cpu_at_start = mark();
        let cgroups = !app.view.filter.is_empty() || app.view.cgroup.is_some();
        // Straight into the view's rows (one table in memory, not two: 2 MB at 10,000).
        app.machine = match app.replay.as_mut() {
            Some(r) => r.show(&mut app.view.procs),
            None => sampler.refresh(&mut app.view.procs, app.threads, cgroups)?,
        };
        let cpu_sampled = mark();
        if let (Some(panel), Some(r)) = (app.cgroups.as_mut(), app.replay.as_ref()) {
            panel.set_rows(r.groups());
        } else if let Some(panel) = app.cgroups.as_mut() {
            if let Err(e) = panel.refresh() {
                app.message = Some(format!("cgroups: {e:#}; view closed"));
                app.cgroups = None;
                app.mode = Mode::Normal;
            }
        }
        if let Some(panel) = app.runq.as_mut() {
            if let Err(e) = panel.refresh() {
                app.message = Some(format!("run-queue latency: {e:#}; panel off"));
                app.runq = None;
            }
        }
        if let Some(panel) = &app.runq {
            for p in app.view.procs.iter_mut() {
                p.runq_p99_us = panel.p99.get(&p.tgid).copied();
            }
        }
        if let Some(panel) = app.disks.as_mut() {
            if let Err(e) = panel.refresh() {
                app.message = Some(format!("disk latency: {e:#}; panel off"));
                app.disks = None;
            }
        }
        if let Some(panel) = app.writes.as_mut() {
            let alive: std::collections::HashSet<u32> =
                app.view.procs.iter().map(|p| p.tgid).collect();
            if let Err(e) = panel.refresh(|pid| alive.contains(&pid)) {
                app.message = Some(format!("write sizes: {e:#}; panel off"));
                app.writes = None;
            }
        }
        if let Some(panel) = &app.writes {
            let by_pid: std::collections::HashMap<u32, &kernstat_model::writes::Verdict> =
                panel.verdicts.iter().map(|v| (v.pid, v)).collect();
            for p in app.view.procs.iter_mut() {
                let v = by_pid.get(&p.tgid);
                p.write_calls_per_s = Some(v.map_or(0.0, |v| v.calls_per_s));
                p.small_write_share = v.map(|v| v.small_share);
            }
        }
        if let Some(t) = app.retrans.as_mut() {
            t.refresh();
            // Per process: a thread's row shows none (as the network columns).
            for p in app.view.procs.iter_mut() {
                p.tcp_retrans_per_s = (!app.threads).then(|| t.rate(p.tgid));
            }
        }
        app.view.rebuild();
        refreshes += 1;
        app.refreshes = refreshes;
        let cpu_viewed = mark();
        screen.draw(|f| draw::draw(f, &mut app))?;
        let cpu_drawn = mark();
        if args.report {
            report.add(
                kernstat_os::alloc::allocations() - allocs_before,
                [
                    cpu_drawn - cpu_at_start,
                    cpu_sampled - cpu_at_start,
                    cpu_viewed - cpu_sampled,
                    cpu_drawn - cpu_viewed,
                ],
            );
        }
        let now = Instant::now();
        let cpu_now = kernstat_os::process_cpu_ns();
        let wall = now.duration_since(wall_before).as_nanos() as f64;
        if wall > 0.0 && refreshes > 1 {
            app.cost_percent = Some((cpu_now - cpu_before) as f64 / wall * 100.0);
        }
        cpu_before = cpu_now;
        wall_before = now;
        if args.iterations.is_some_and(|n| refreshes >= n) {
            break;
        }
        // A replay changes only on a key.
        let wait = match app.replay {
            Some(_) => Duration::from_secs(3600),
            None => app.delay,
        };
        let deadline = Instant::now() + wait;
        while !app.quit && !app.refresh_now {
            match pending_signals(&signals) {
                Pending::Stop => {
                    app.quit = true;
                    break;
                }
                Pending::Resized => {
                    screen.resize()?;
                    screen.draw(|f| draw::draw(f, &mut app))?;
                }
                Pending::Nothing => {}
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            match term::wait_input(left, sigfd.as_fd())? {
                term::Input::Signal => {}
                term::Input::HungUp => {
                    app.quit = true;
                    break;
                }
                term::Input::Quiet => {}
                term::Input::Ready => {
                    // Keys come in bursts (pastes, escape sequences): take all of them.
                    while event::poll(Duration::ZERO)? {
                        handle(&mut app, &mut sampler, event::read()?);
                    }
                    screen.draw(|f| draw::draw(f, &mut app))?;
                }
            }
        }
        app.refresh_now = false;
        if app.quit {
            break;
        }
    }
    drop(screen);
    if args.report {
        eprintln!("{}", report.json(refreshes));
    }
    Ok(0)
}
