//! The terminal as `top` found it, given back on every way out: normal exit, error,
//! panic (a hook restores before the message prints) and SIGTERM/SIGHUP/SIGINT (blocked
//! and polled by the loop, so they end it like `q`) — and a terminal that went away (a
//! closed ssh connection or tmux pane): crossterm's reader retries a read that returns
//! end-of-file for ever, burning a core, so the loop waits for input itself with poll(2)
//! and leaves on a hang-up before asking crossterm for events. Frames are drawn by
//! ratatui and written as `crate::diff` finds them changed (`Screen::draw`).

use std::io;
use std::os::fd::BorrowedFd;

use crossterm::event::{DisableMouseCapture, EnableMouseCapture};
use crossterm::execute;
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, EnterAlternateScreen, LeaveAlternateScreen,
};
use ratatui::backend::{Backend, CrosstermBackend};
use ratatui::buffer::Buffer;
use ratatui::{Frame, Terminal};

/// What waiting on the terminal found.
pub enum Input {
    /// Bytes to read: keys, mouse, or a resize report.
    Ready,
    /// Nothing within the timeout.
    Quiet,
    /// The terminal is gone.
    HungUp,
    /// A stop signal is pending (take it with `Signals::poll`).
    Signal,
}

/// Waits up to `timeout` for the terminal (stdin) to have input or hang up, or for a
/// signal on `signals` (a signalfd): one sleep per refresh, no periodic wake-ups.
pub fn wait_input(timeout: std::time::Duration, signals: BorrowedFd<'_>) -> io::Result<Input> {
    use rustix::event::{poll, PollFd, PollFlags, Timespec};
    let stdin = rustix::stdio::stdin();
    let mut fds = [
        PollFd::new(&stdin, PollFlags::IN),
        PollFd::new(&signals, PollFlags::IN),
    ];
    let ts = Timespec {
        tv_sec: timeout.as_secs() as _,
        tv_nsec: timeout.subsec_nanos() as _,
    };
    match poll(&mut fds, Some(&ts)) {
        Ok(0) => Ok(Input::Quiet),
        Ok(_) => {
            if !fds[1].revents().is_empty() {
                return Ok(Input::Signal);
            }
            let r = fds[0].revents();
            if r.intersects(PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL) {
                return Ok(Input::HungUp);
            }
            // Readable: make sure it is not end-of-file (a hung-up tty may say IN only).
            let mut n: libc::c_int = 0;
            // SAFETY: FIONREAD writes one int.
            let rc = unsafe { libc::ioctl(0, libc::FIONREAD, &mut n) };
            Ok(if rc == 0 && n == 0 {
                Input::HungUp
            } else {
                Input::Ready
            })
        }
        Err(rustix::io::Errno::INTR) => Ok(Input::Quiet),
        Err(e) => Err(e.into()),
    }
}

/// Where frames are written: one buffer a frame, written out when ratatui flushes at
/// the end of a draw. Straight to `Stdout` (a LineWriter of 1 KiB, locked at each of
/// crossterm's small writes) a refresh of `top` was four write(2) calls and a lock per
/// escape sequence (strace; `write_all` and crossterm's fmt adapter ~7 % of a `perf
/// record` of top). Not std's BufWriter: what a panic leaves in the buffer must be
/// dropped, not written (the panic hook has restored the terminal by then).
pub struct ScreenOut {
    frame: Vec<u8>,
}

/// Set while unwinding from a panic: the frame being built is not written.
static DROP_FRAME: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

impl ScreenOut {
    fn new() -> Self {
        ScreenOut {
            frame: Vec::with_capacity(64 * 1024),
        }
    }
}

impl io::Write for ScreenOut {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        self.frame.extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        if DROP_FRAME.load(std::sync::atomic::Ordering::Relaxed) {
            self.frame.clear();
            return Ok(());
        }
        let mut out = io::stdout().lock();
        let written = out.write_all(&self.frame);
        self.frame.clear();
        written?;
        out.flush()
    }
}

impl Drop for ScreenOut {
    fn drop(&mut self) {
        let _ = io::Write::flush(self);
    }
}

/// A terminal in raw mode on the alternate screen, with the mouse reported.
pub struct Screen {
    /// The ratatui terminal: its frames and backend (the diff is `crate::diff`'s).
    terminal: Terminal<CrosstermBackend<ScreenOut>>,
    /// The frame on screen now, which the next one is compared with.
    shown: Buffer,
    /// The frame just drawn, taken out of the terminal to be compared.
    drawn: Buffer,
    /// Indices of the drawn frame's cells to write (kept between frames).
    changed: Vec<usize>,
}

fn restore() {
    let _ = disable_raw_mode();
    let _ = execute!(
        io::stdout(),
        DisableMouseCapture,
        LeaveAlternateScreen,
        crossterm::cursor::Show
    );
}

impl Screen {
    /// Takes over the terminal; fails clearly when stdout is not one.
    pub fn enter() -> anyhow::Result<Self> {
        if !rustix::termios::isatty(rustix::stdio::stdout()) {
            anyhow::bail!(
                "top needs a terminal (stdout is not one); for a table, use `kernstat ps`"
            );
        }
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
        enable_raw_mode()?;
        if let Err(e) = execute!(
            io::stdout(),
            EnterAlternateScreen,
            EnableMouseCapture,
            crossterm::cursor::Hide
        ) {
            restore();
            return Err(e.into());
        }
        // A fixed viewport, resized on SIGWINCH (`resize`): a fullscreen one asks the
        // terminal's size at every draw, and crossterm opens /dev/tty for that — an
        // open, an ioctl and a close per refresh (strace), for a size that only a
        // resize changes.
        let make = || -> io::Result<Terminal<CrosstermBackend<ScreenOut>>> {
            let (w, h) = crossterm::terminal::size()?;
            Terminal::with_options(
                CrosstermBackend::new(ScreenOut::new()),
                ratatui::TerminalOptions {
                    viewport: ratatui::Viewport::Fixed(ratatui::layout::Rect::new(0, 0, w, h)),
                },
            )
        };
        let mut terminal = match make() {
            Ok(t) => t,
            Err(e) => {
                restore();
                return Err(e.into());
            }
        };
        let area = terminal.get_frame().area();
        Ok(Screen {
            terminal,
            shown: Buffer::empty(area),
            drawn: Buffer::empty(area),
            changed: Vec::new(),
        })
    }

    /// Draws a frame with `render` and writes the cells that changed since the last one
    /// (ratatui's `Terminal::draw`, with `crate::diff` finding the cells). Unlike it, the
    /// cursor stays as `enter` left it, hidden (a frame's `set_cursor_position` is not
    /// applied: top sets none), and frames are not counted (`Frame::count` is 0).
    pub fn draw(&mut self, render: impl FnOnce(&mut Frame)) -> io::Result<()> {
        render(&mut self.terminal.get_frame());
        // The drawn frame out of the terminal, a blank one in for the next draw.
        std::mem::swap(self.terminal.current_buffer_mut(), &mut self.drawn);
        let area = self.drawn.area;
        let blank = self.terminal.current_buffer_mut();
        if blank.area != area {
            blank.resize(area);
        }
        blank.reset();
        if self.shown.area != area {
            self.shown = Buffer::empty(area);
        }
        self.changed.clear();
        crate::diff::changed_cells(&self.shown, &self.drawn, &mut self.changed);
        let drawn = &self.drawn;
        let backend = self.terminal.backend_mut();
        backend.draw(self.changed.iter().map(|&i| {
            let (x, y) = drawn.pos_of(i);
            (x, y, &drawn.content[i])
        }))?;
        Backend::flush(backend)?;
        std::mem::swap(&mut self.shown, &mut self.drawn);
        Ok(())
    }

    /// Fits the viewport to the terminal's size now (after SIGWINCH).
    pub fn resize(&mut self) -> anyhow::Result<()> {
        let (w, h) = crossterm::terminal::size()?;
        let area = ratatui::layout::Rect::new(0, 0, w, h);
        // ratatui clears the screen here: every cell of the next frame is written.
        self.terminal.resize(area)?;
        self.shown = Buffer::empty(area);
        Ok(())
    }
}

impl Drop for Screen {
    fn drop(&mut self) {
        if std::thread::panicking() {
            // The panic hook restored the terminal already: a frame's bytes left in the
            // buffer (cursor moves, colours) would land on the main screen.
            DROP_FRAME.store(true, std::sync::atomic::Ordering::Relaxed);
        } else {
            // What a failed draw left in the buffer goes before the terminal is restored.
            let _ = std::io::Write::flush(self.terminal.backend_mut());
        }
        restore();
    }
}
