//! Writing ticks to stdout with write(2) directly: no line buffering between us and the
//! bar, no allocation, and a closed pipe (the bar exited) is an answer, not an error.

use rustix::io::Errno;

/// What happened to a write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteOutcome {
    /// Everything was written.
    Written,
    /// The reader is gone (EPIPE, or another error that means nobody is listening).
    Closed,
}

/// Standard output.
#[derive(Default)]
pub struct Stdout {
    _private: (),
}

impl Stdout {
    /// Standard output (fd 1).
    pub fn new() -> Self {
        Stdout { _private: () }
    }

    /// Writes all of `buf`, retrying short writes and EINTR.
    pub fn write(&mut self, mut buf: &[u8]) -> WriteOutcome {
        let fd = rustix::stdio::stdout();
        while !buf.is_empty() {
            match rustix::io::write(fd, buf) {
                Ok(0) => return WriteOutcome::Closed,
                Ok(n) => buf = &buf[n..],
                Err(Errno::INTR) | Err(Errno::AGAIN) => continue,
                Err(_) => return WriteOutcome::Closed,
            }
        }
        WriteOutcome::Written
    }
}

/// The terminal's width in columns when standard output is one (`$COLUMNS` when the
/// terminal does not say); None for a pipe or a file.
pub fn terminal_width() -> Option<usize> {
    let fd = rustix::stdio::stdout();
    if !rustix::termios::isatty(fd) {
        return None;
    }
    match rustix::termios::tcgetwinsize(fd) {
        Ok(ws) if ws.ws_col > 0 => Some(ws.ws_col as usize),
        _ => std::env::var("COLUMNS").ok().and_then(|c| c.parse().ok()),
    }
}
