//! Keys and the mouse: what each does to the view, the panels, the selected process
//! (signals, renice) and a replay (step, jump).

use std::time::Duration;

use crossterm::event::{
    Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseButton, MouseEvent, MouseEventKind,
};
use kernstat_top::probes::{DiskPanel, RunqPanel, TcpInterval, WritesPanel};
use kernstat_top::sample::Sampler;
use kernstat_top::view::SortKey;

use crate::{App, Mode, DELAYS, SIGNALS};

pub(crate) fn toggle_runq(app: &mut App) {
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

pub(crate) fn toggle_disks(app: &mut App) {
    if app.disks.take().is_some() {
        app.message = Some("disk latency off: probe detached".into());
        return;
    }
    match DiskPanel::open() {
        Ok(p) => {
            app.message = Some(format!(
                "disk latency on ({}: {} program{})",
                p.attach,
                p.program_count(),
                if p.program_count() == 1 { "" } else { "s" }
            ));
            app.disks = Some(p);
        }
        Err(e) => app.message = Some(format!("disk latency needs BPF: {e:#}")),
    }
}

pub(crate) fn toggle_writes(app: &mut App) {
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

/// Retransmits per process (the RETR/s column): the TCP hooks attached, or detached.
pub(crate) fn toggle_retrans(app: &mut App) {
    if app.retrans.take().is_some() {
        if app.view.sort == SortKey::Retrans {
            app.view.sort_by(SortKey::Cpu);
        }
        app.message = Some("TCP retransmits off: probe detached".into());
        return;
    }
    match TcpInterval::load() {
        Ok(mut t) => {
            t.read_first();
            app.message = Some("TCP retransmits on: RETR/s per process".into());
            app.retrans = Some(t);
        }
        Err(e) => app.message = Some(format!("TCP retransmits need BPF: {e}")),
    }
}

/// Which columns are on screen (the probes' columns are there only with their panel).
pub(crate) fn shown_columns(app: &App) -> impl Fn(SortKey) -> bool {
    let (runq, writes) = (app.runq.is_some(), app.writes.is_some());
    let retrans = app.retrans.is_some();
    let net = app.machine.net.is_some();
    move |k| match k {
        SortKey::RunqP99 => runq,
        SortKey::WriteCalls | SortKey::SmallShare => writes,
        SortKey::Retrans => retrans,
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

pub(crate) fn handle(app: &mut App, sampler: &mut Sampler, ev: Event) {
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
        KeyCode::Char('C') => match kernstat_top::cgroups::CgroupPanel::open() {
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
        KeyCode::Char('r' | 'w' | 'D' | 'R') if app.no_bpf => {
            app.message = Some("--no-bpf: no probes".into());
        }
        KeyCode::Char('r') => toggle_runq(app),
        KeyCode::Char('w') => toggle_writes(app),
        KeyCode::Char('D') => toggle_disks(app),
        KeyCode::Char('R') => toggle_retrans(app),
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
        KeyCode::Char('C') => {
            app.cgroups = Some(kernstat_top::cgroups::CgroupPanel::recorded(r.groups()));
            app.mode = Mode::Cgroups;
            app.message = Some(
                "recorded cgroups: Left/Right fold, < > sort, / filter, Enter: its processes, C: back"
                    .into(),
            );
        }
        KeyCode::Char('r')
        | KeyCode::Char('w')
        | KeyCode::Char('D')
        | KeyCode::Char('R')
        | KeyCode::Char('H')
        | KeyCode::Char('+')
        | KeyCode::Char('=')
        | KeyCode::Char('-') => {
            app.message = Some("not in the record: probes and threads are live only".into());
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
