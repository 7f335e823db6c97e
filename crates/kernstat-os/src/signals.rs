//! Signals for long-running commands, without handlers: the signals are blocked and
//! collected with sigtimedwait(2), which doubles as the sleep between ticks. A signal
//! therefore wakes the loop at once, and nothing runs in signal context.
//!
//! SIGINT, SIGTERM and SIGHUP stop the loop; SIGRTMIN and SIGRTMIN+1 are the bar's
//! controls (cycle the interval, toggle kernel threads).

use std::time::Duration;

/// What woke the loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wake {
    /// The timeout passed.
    Timeout,
    /// Stop: SIGINT, SIGTERM or SIGHUP.
    Stop,
    /// SIGRTMIN.
    RtMin,
    /// SIGRTMIN+1.
    RtMin1,
    /// SIGWINCH: the terminal changed size (only with [`Signals::block_with_resize`]).
    Resize,
}

/// The set of signals the loop waits for.
pub struct Signals {
    set: libc::sigset_t,
}

impl Signals {
    /// Blocks the stop and control signals for this thread (call before spawning any
    /// thread, so that they inherit the mask).
    pub fn block() -> Self {
        Self::block_these(&[])
    }

    /// [`Signals::block`], and SIGWINCH too, for a full-screen program that redraws
    /// when its terminal changes size (`top`). Nobody else takes SIGWINCH: crossterm
    /// installs its own handler only for its event loop, which `top` does not sleep in.
    pub fn block_with_resize() -> Self {
        Self::block_these(&[libc::SIGWINCH])
    }

    fn block_these(extra: &[libc::c_int]) -> Self {
        // SAFETY: sigset operations on a local set; sigprocmask on the calling thread.
        unsafe {
            let mut set: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut set);
            for &s in [
                libc::SIGINT,
                libc::SIGTERM,
                libc::SIGHUP,
                libc::SIGRTMIN(),
                libc::SIGRTMIN() + 1,
            ]
            .iter()
            .chain(extra)
            {
                libc::sigaddset(&mut set, s);
            }
            libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
            Signals { set }
        }
    }

    /// Sleeps up to `timeout`, returning early when one of our signals arrives.
    pub fn wait(&self, timeout: Duration) -> Wake {
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: the set and timespec are valid; info may be null.
        let sig = unsafe { libc::sigtimedwait(&self.set, std::ptr::null_mut(), &ts) };
        match sig {
            s if s == libc::SIGRTMIN() => Wake::RtMin,
            s if s == libc::SIGRTMIN() + 1 => Wake::RtMin1,
            libc::SIGINT | libc::SIGTERM | libc::SIGHUP => Wake::Stop,
            libc::SIGWINCH => Wake::Resize,
            // EAGAIN (timeout) or EINTR (another signal): treat both as a timeout tick;
            // the caller re-computes how long is left.
            _ => Wake::Timeout,
        }
    }

    /// A descriptor that polls readable while one of the signals is pending (signalfd),
    /// for loops that also wait on other descriptors; [`Signals::poll`] then takes it.
    pub fn signalfd(&self) -> std::io::Result<std::os::fd::OwnedFd> {
        use std::os::fd::FromRawFd;
        // SAFETY: the set is valid; a new descriptor or -1 is returned.
        let fd = unsafe { libc::signalfd(-1, &self.set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: the descriptor was just created and is owned by nobody else.
        Ok(unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) })
    }

    /// Returns a pending stop signal without waiting.
    pub fn poll(&self) -> Wake {
        self.wait(Duration::ZERO)
    }
}
