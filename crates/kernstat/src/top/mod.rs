//! `kernstat top`: the live view. A header with the machine (per-core bars, memory,
//! load, pressure, hardware where present, the view's own cost), an optional run-queue
//! latency panel, and a process table that sorts, filters, shows a tree, follows the
//! selected process and signals or renices it.
//!
//! Split by job: `sample` reads (sources → rows and machine figures), `view` orders and
//! selects (no terminal), `probes` switches BPF probes on and off, `draw` renders with
//! ratatui, `term` owns the terminal and gives it back on every way out. This module
//! only runs the loop and maps keys to actions.

mod cgroups;
mod draw;
mod probes;
mod replay;
mod sample;
mod term;
mod view;

use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use crossterm::event::{
    self, Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEvent,
    MouseEventKind,
};

use crate::cli::TopArgs;
use crate::signals::{Signals, Wake};
use probes::{RunqPanel, WritesPanel};
use sample::{Machine, Sampler};
use view::{SortKey, View};

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
    pub cgroups: Option<cgroups::CgroupPanel>,
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
    pub replay: Option<replay::Replay>,
    quit: bool,
    refresh_now: bool,
}

/// Runs `kernstat top`; returns the exit status.
pub fn run(args: &TopArgs) -> anyhow::Result<i32> {
    let (sort, descending) = parse_sort(&args.sort)?;
    // SIGWINCH too: a resized terminal is drawn at once, not at the next key or refresh.
    let signals = Signals::block_with_resize();
    let sigfd = signals.signalfd()?;
    let replayed = match &args.replay.at {
        Some(at) => match replay::Replay::open(&args.replay, at)? {
            Ok(r) => Some(r),
            Err(code) => return Ok(code),
        },
        None => None,
    };
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
    if args.runqlat {
        toggle_runq(&mut app);
    }
    if args.writes {
        toggle_writes(&mut app);
    }
    let mut screen = term::Screen::enter()?;
    let mut refreshes = 0u64;
    let mut cpu_before = kernstat_os::process_cpu_ns();
    let mut wall_before = Instant::now();
    let mut report = Report::default();
    loop {
        let allocs_before = crate::alloc::allocations();
        let cpu_at_start = kernstat_os::process_cpu_ns();
        let cgroups = !app.view.filter.is_empty() || app.view.cgroup.is_some();
        // Straight into the view's rows (one table in memory, not two: 2 MB at 10,000).
        app.machine = match app.replay.as_mut() {
            Some(r) => r.show(&mut app.view.procs),
            None => sampler.refresh(&mut app.view.procs, app.threads, cgroups)?,
        };
        let cpu_sampled = kernstat_os::process_cpu_ns();
        if let Some(panel) = app.cgroups.as_mut() {
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
        app.view.rebuild();
        refreshes += 1;
        app.refreshes = refreshes;
        let cpu_viewed = kernstat_os::process_cpu_ns();
        screen.terminal.draw(|f| draw::draw(f, &mut app))?;
        let cpu_drawn = kernstat_os::process_cpu_ns();
        report.add(
            crate::alloc::allocations() - allocs_before,
            [
                cpu_drawn - cpu_at_start,
                cpu_sampled - cpu_at_start,
                cpu_viewed - cpu_sampled,
                cpu_drawn - cpu_viewed,
            ],
        );
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
                    screen.terminal.draw(|f| draw::draw(f, &mut app))?;
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
                    screen.terminal.draw(|f| draw::draw(f, &mut app))?;
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

/// What the signals waiting on the signalfd ask for, all of them taken.
enum Pending {
    Nothing,
    Stop,
    Resized,
}

fn pending_signals(signals: &Signals) -> Pending {
    let mut pending = Pending::Nothing;
    loop {
        match signals.poll() {
            Wake::Stop => return Pending::Stop,
            Wake::Resize => pending = Pending::Resized,
            Wake::Timeout => return pending,
            Wake::RtMin | Wake::RtMin1 => {}
        }
    }
}

/// Per-refresh counts for `--report` (benchmarks and the allocation test): allocations,
/// and CPU time in all and split into sampling (the iterator's read, /proc), the view
/// (panels, sort, filter, tree) and drawing (widgets, diff, the terminal write).
#[derive(Default)]
struct Report {
    allocs: Vec<u64>,
    cpu_ns: Vec<u64>,
    sample_ns: Vec<u64>,
    view_ns: Vec<u64>,
    draw_ns: Vec<u64>,
}

impl Report {
    fn add(&mut self, allocs: u64, [all, sample, view, draw]: [u64; 4]) {
        self.allocs.push(allocs);
        self.cpu_ns.push(all);
        self.sample_ns.push(sample);
        self.view_ns.push(view);
        self.draw_ns.push(draw);
    }

    fn json(&self, refreshes: u64) -> serde_json::Value {
        fn median(v: &[u64]) -> u64 {
            let mut v = v.to_vec();
            v.sort_unstable();
            v.get(v.len() / 2).copied().unwrap_or(0)
        }
        // The first refreshes fill caches (names, command lines): steady state after.
        let steady = |v: &[u64]| {
            if v.len() > 2 {
                median(&v[2..])
            } else {
                median(v)
            }
        };
        serde_json::json!({
            "refreshes": refreshes,
            "allocations_per_refresh_median": steady(&self.allocs),
            "allocations_per_refresh": self.allocs,
            "cpu_us_per_refresh_median": steady(&self.cpu_ns) / 1000,
            "sample_us_median": steady(&self.sample_ns) / 1000,
            "view_us_median": steady(&self.view_ns) / 1000,
            "draw_us_median": steady(&self.draw_ns) / 1000,
            "max_rss_kib": max_rss_kib(),
        })
    }
}

fn max_rss_kib() -> i64 {
    // SAFETY: getrusage writes into the struct we pass.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        ru.ru_maxrss
    }
}

fn parse_sort(s: &str) -> anyhow::Result<(SortKey, bool)> {
    let (name, flip) = match s.strip_prefix('-') {
        Some(n) => (n, true),
        None => (s, false),
    };
    let Some(key) = SortKey::parse(name) else {
        let names: Vec<&str> = SortKey::ALL.iter().map(|k| k.name()).collect();
        crate::cli::usage!("--sort {s:?}: no such column (one of {})", names.join(", "));
    };
    Ok((key, key.descending_by_default() != flip))
}

fn toggle_runq(app: &mut App) {
    if app.runq.take().is_some() {
        if app.view.sort == SortKey::RunqP99 {
            app.view.sort_by(SortKey::Cpu);
        }
        app.message = Some("run-queue latency off: probe detached".into());
        return;
    }
    match RunqPanel::open() {
        Ok(p) => {
            app.message = Some(format!(
                "run-queue latency on ({}: {})",
                p.attach,
                p.program_names().join(", ")
            ));
            app.runq = Some(p);
        }
        Err(e) => app.message = Some(format!("run-queue latency needs BPF: {e:#}")),
    }
}

fn toggle_writes(app: &mut App) {
    if app.writes.take().is_some() {
        if matches!(app.view.sort, SortKey::WriteCalls | SortKey::SmallShare) {
            app.view.sort_by(SortKey::Cpu);
        }
        app.message = Some("write sizes off: probe detached".into());
        return;
    }
    match WritesPanel::open() {
        Ok(p) => {
            app.message = Some(format!(
                "write sizes on ({}: {} programs)",
                p.attach,
                p.program_count()
            ));
            app.writes = Some(p);
        }
        Err(e) => app.message = Some(format!("write sizes need BPF: {e:#}")),
    }
}

/// Which columns are on screen (the probes' columns are there only with their panel).
fn shown_columns(app: &App) -> impl Fn(SortKey) -> bool {
    let (runq, writes) = (app.runq.is_some(), app.writes.is_some());
    let net = app.machine.net.is_some();
    move |k| match k {
        SortKey::RunqP99 => runq,
        SortKey::WriteCalls | SortKey::SmallShare => writes,
        SortKey::NetRx | SortKey::NetTx => net,
        _ => true,
    }
}

fn step_delay(app: &mut App, up: bool) {
    let now = app.delay.as_secs_f64();
    let next = if up {
        DELAYS.iter().copied().find(|&d| d > now + 1e-9)
    } else {
        DELAYS.iter().rev().copied().find(|&d| d < now - 1e-9)
    };
    if let Some(d) = next {
        app.delay = Duration::from_secs_f64(d);
    }
    app.message = Some(format!("refresh every {:.2} s", app.delay.as_secs_f64()));
}

fn handle(app: &mut App, sampler: &mut Sampler, ev: Event) {
    match ev {
        Event::Key(k) if k.kind != KeyEventKind::Release => {
            // No key of ours uses Alt: an Alt+key is an Esc that arrived together with
            // the next key (the terminal cannot tell them apart; seen on a loaded
            // machine, where Esc then / came as Alt+/ and the filter was not cleared).
            if k.modifiers.contains(KeyModifiers::ALT) {
                key(app, sampler, KeyEvent::from(KeyCode::Esc));
                let mut k = k;
                k.modifiers.remove(KeyModifiers::ALT);
                key(app, sampler, k);
            } else {
                key(app, sampler, k);
            }
        }
        Event::Mouse(m) => mouse(app, m),
        Event::Resize(..) => {}
        _ => {}
    }
}

fn key(app: &mut App, sampler: &mut Sampler, k: KeyEvent) {
    if k.modifiers.contains(KeyModifiers::CONTROL) && k.code == KeyCode::Char('c') {
        app.quit = true;
        return;
    }
    match app.mode.clone() {
        Mode::Help => app.mode = Mode::Normal,
        Mode::Filter => match k.code {
            KeyCode::Esc => {
                app.view.filter.clear();
                app.mode = Mode::Normal;
                app.view.rebuild();
            }
            KeyCode::Enter => app.mode = Mode::Normal,
            KeyCode::Backspace => {
                app.view.filter.pop();
                app.view.rebuild();
            }
            KeyCode::Char(c) => {
                app.view.filter.push(c);
                // cgroup paths are read only while a filter is set: fetch them now.
                app.refresh_now = app.view.filter.len() == 1;
                app.view.rebuild();
            }
            KeyCode::Up => app.view.move_by(-1),
            KeyCode::Down => app.view.move_by(1),
            _ => {}
        },
        Mode::Signal(pid, comm, sig) => match k.code {
            KeyCode::Char('y') | KeyCode::Enter => {
                let (_, num, name) = SIGNALS[sig];
                app.message = Some(send_signal(pid, &comm, num, name));
                app.mode = Mode::Normal;
                app.refresh_now = true;
            }
            KeyCode::Char('n') | KeyCode::Esc | KeyCode::Char('q') => {
                app.mode = Mode::Normal;
                app.message = Some("no signal sent".into());
            }
            KeyCode::Char(c) => {
                if let Some(i) = SIGNALS.iter().position(|s| s.0 == c) {
                    app.mode = Mode::Signal(pid, comm, i);
                }
            }
            _ => {}
        },
        Mode::Jump(mut typed) => match k.code {
            KeyCode::Esc => {
                app.mode = Mode::Normal;
                app.message = None;
            }
            KeyCode::Enter => {
                app.mode = Mode::Normal;
                if let Some(r) = app.replay.as_mut() {
                    app.message = match r.jump(&typed) {
                        Ok(()) => Some(format!("at {}", r.stamp())),
                        Err(e) => Some(e),
                    };
                    app.refresh_now = true;
                }
            }
            KeyCode::Backspace => {
                typed.pop();
                app.mode = Mode::Jump(typed);
            }
            KeyCode::Char(c) => {
                typed.push(c);
                app.mode = Mode::Jump(typed);
            }
            _ => {}
        },
        Mode::Normal if app.replay.is_some() => replay_key(app, sampler, k),
        Mode::Normal => normal_key(app, sampler, k),
        Mode::Cgroups => cgroup_key(app, k),
        Mode::CgroupFilter => {
            let Some(panel) = app.cgroups.as_mut() else {
                app.mode = Mode::Normal;
                return;
            };
            match k.code {
                KeyCode::Esc => {
                    panel.filter.clear();
                    app.mode = Mode::Cgroups;
                }
                KeyCode::Enter => app.mode = Mode::Cgroups,
                KeyCode::Backspace => {
                    panel.filter.pop();
                }
                KeyCode::Char(c) => panel.filter.push(c),
                _ => {}
            }
            panel.rebuild();
        }
    }
}

/// Keys of the cgroup view.
fn cgroup_key(app: &mut App, k: KeyEvent) {
    let page = app.page.max(1) as isize;
    let Some(panel) = app.cgroups.as_mut() else {
        app.mode = Mode::Normal;
        return;
    };
    match k.code {
        KeyCode::Char('C') | KeyCode::Esc | KeyCode::Char('q') => {
            app.cgroups = None;
            app.mode = Mode::Normal;
        }
        KeyCode::Up => panel.move_by(-1),
        KeyCode::Down => panel.move_by(1),
        KeyCode::PageUp => panel.move_by(-page),
        KeyCode::PageDown => panel.move_by(page),
        KeyCode::Home => panel.move_by(isize::MIN / 2),
        KeyCode::End => panel.move_by(isize::MAX / 2),
        KeyCode::Left => panel.fold(Some(true)),
        KeyCode::Right => panel.fold(Some(false)),
        KeyCode::Char(' ') => panel.fold(None),
        KeyCode::Char('<') | KeyCode::Char(',') => panel.cycle_sort(false),
        KeyCode::Char('>') | KeyCode::Char('.') | KeyCode::F(6) => panel.cycle_sort(true),
        KeyCode::Char('I') => {
            panel.descending = !panel.descending;
            panel.rebuild();
        }
        KeyCode::Char('/') | KeyCode::F(3) => app.mode = Mode::CgroupFilter,
        KeyCode::Enter => {
            if let Some(g) = panel.selected.clone() {
                app.message = Some(format!("processes in {g} and below (Esc: all)"));
                app.view.cgroup = Some(g);
                app.cgroups = None;
                app.mode = Mode::Normal;
                app.refresh_now = true;
                app.view.rebuild();
            }
        }
        _ => {}
    }
}

fn normal_key(app: &mut App, sampler: &mut Sampler, k: KeyEvent) {
    let page = app.page.max(1) as isize;
    match k.code {
        KeyCode::Char('q') | KeyCode::F(10) => app.quit = true,
        KeyCode::Char('?') | KeyCode::Char('h') | KeyCode::F(1) => app.mode = Mode::Help,
        KeyCode::Char('/') | KeyCode::F(3) | KeyCode::F(4) => app.mode = Mode::Filter,
        KeyCode::Esc if !app.view.filter.is_empty() || app.view.cgroup.is_some() => {
            app.view.filter.clear();
            app.view.cgroup = None;
            app.message = None;
            app.view.rebuild();
        }
        KeyCode::Char('C') => match cgroups::CgroupPanel::open() {
            Ok(p) => {
                app.cgroups = Some(p);
                app.mode = Mode::Cgroups;
                app.message = Some(
                    "cgroups: Left/Right fold, < > sort, / filter, Enter: its processes, C: back"
                        .into(),
                );
            }
            Err(e) => app.message = Some(format!("cgroups: {e:#}")),
        },
        KeyCode::Up => app.view.move_by(-1),
        KeyCode::Down => app.view.move_by(1),
        KeyCode::PageUp => app.view.move_by(-page),
        KeyCode::PageDown => app.view.move_by(page),
        KeyCode::Home => app.view.select_line(0),
        KeyCode::End => app.view.select_line(usize::MAX),
        KeyCode::Char('P') => app.view.sort_by(SortKey::Cpu),
        KeyCode::Char('M') => app.view.sort_by(SortKey::Mem),
        KeyCode::Char('T') => app.view.sort_by(SortKey::Time),
        KeyCode::Char('N') => app.view.sort_by(SortKey::Pid),
        KeyCode::Char('I') => {
            app.view.descending = !app.view.descending;
            app.view.rebuild();
        }
        KeyCode::Char('<') | KeyCode::Char(',') => {
            let shown = shown_columns(app);
            app.view.cycle_sort(false, shown)
        }
        KeyCode::Char('>') | KeyCode::Char('.') | KeyCode::F(6) => {
            let shown = shown_columns(app);
            app.view.cycle_sort(true, shown)
        }
        KeyCode::Char('t') | KeyCode::F(5) => {
            app.view.tree = !app.view.tree;
            app.view.rebuild();
        }
        KeyCode::Char('H') => {
            app.threads = !app.threads;
            sampler.reset_rates();
            app.refresh_now = true;
            app.message = Some(if app.threads {
                "threads shown (rates from the next refresh)".into()
            } else {
                "threads hidden".into()
            });
        }
        KeyCode::Char('K') => {
            app.view.kthreads = !app.view.kthreads;
            app.view.rebuild();
        }
        KeyCode::Char('r') => toggle_runq(app),
        KeyCode::Char('w') => toggle_writes(app),
        KeyCode::Char('+') | KeyCode::Char('=') => step_delay(app, true),
        KeyCode::Char('-') => step_delay(app, false),
        KeyCode::Char('k') | KeyCode::F(9) => {
            if let Some(p) = app.view.selected_proc() {
                app.mode = Mode::Signal(p.pid, p.comm.to_string(), 0);
            }
        }
        KeyCode::Char(']') | KeyCode::F(8) => renice(app, 1),
        KeyCode::Char('[') | KeyCode::F(7) => renice(app, -1),
        _ => {}
    }
}

/// Keys over a recorded sample: atop's t/T/b step and jump; what acts on live
/// processes or reads live sources says so; the rest is the table's as usual.
fn replay_key(app: &mut App, sampler: &mut Sampler, k: KeyEvent) {
    let Some(r) = app.replay.as_mut() else {
        return;
    };
    match k.code {
        KeyCode::Char('t') | KeyCode::Char('T') => {
            let forward = k.code == KeyCode::Char('t');
            app.message = if r.step(forward) {
                app.refresh_now = true;
                None
            } else if forward {
                Some("the newest recorded sample".into())
            } else {
                Some("the oldest recorded sample".into())
            };
        }
        KeyCode::Char('b') => app.mode = Mode::Jump(String::new()),
        KeyCode::Char('k')
        | KeyCode::F(9)
        | KeyCode::Char(']')
        | KeyCode::F(8)
        | KeyCode::Char('[')
        | KeyCode::F(7) => {
            app.message = Some("a recorded moment: nothing to signal or renice".into());
        }
        KeyCode::Char('C')
        | KeyCode::Char('r')
        | KeyCode::Char('w')
        | KeyCode::Char('H')
        | KeyCode::Char('+')
        | KeyCode::Char('=')
        | KeyCode::Char('-') => {
            app.message =
                Some("not in the record: cgroups, probes and threads are live only".into());
        }
        _ => normal_key(app, sampler, k),
    }
}

fn mouse(app: &mut App, m: MouseEvent) {
    match m.kind {
        MouseEventKind::Down(MouseButton::Left) => {
            if m.row == app.table_top {
                if let Some(&(_, _, key)) = app
                    .header_hits
                    .iter()
                    .find(|(x0, x1, _)| (*x0..*x1).contains(&m.column))
                {
                    app.view.sort_by(key);
                }
            } else if m.row > app.table_top {
                let line = app.view.offset + (m.row - app.table_top - 1) as usize;
                if line < app.view.lines().len() {
                    app.view.select_line(line);
                }
            }
        }
        MouseEventKind::ScrollDown => app.view.move_by(3),
        MouseEventKind::ScrollUp => app.view.move_by(-3),
        _ => {}
    }
}

fn errno_text(e: std::io::Error, what: &str) -> String {
    match e.raw_os_error() {
        Some(libc::EPERM) => {
            format!("{what}: not permitted (only root, or the process's owner, may do this)")
        }
        Some(libc::ESRCH) => format!("{what}: no such process (it has exited)"),
        Some(libc::EACCES) => {
            format!("{what}: permission denied (lowering nice needs root or CAP_SYS_NICE)")
        }
        _ => format!("{what}: {e}"),
    }
}

fn send_signal(pid: u32, comm: &str, sig: i32, name: &str) -> String {
    let what = format!("SIG{name} to {pid} ({comm})");
    // SAFETY: kill(2) with a pid and signal number; no memory involved.
    if unsafe { libc::kill(pid as libc::pid_t, sig) } == 0 {
        format!("sent {what}")
    } else {
        errno_text(std::io::Error::last_os_error(), &what)
    }
}

fn renice(app: &mut App, delta: i32) {
    let Some(p) = app.view.selected_proc() else {
        return;
    };
    let (pid, nice) = (p.pid, (p.nice + delta).clamp(-20, 19));
    let what = format!("nice {nice} for {pid} ({})", p.comm);
    // SAFETY: setpriority(2) with scalar arguments.
    let rc = unsafe { libc::setpriority(libc::PRIO_PROCESS, pid as libc::id_t, nice) };
    app.message = Some(if rc == 0 {
        app.refresh_now = true;
        format!("set {what}")
    } else {
        errno_text(std::io::Error::last_os_error(), &what)
    });
}
