//! Blocking work done on a client's behalf — reading a repository, a kubeconfig, a
//! script's output — kept where it can only slow that client down.
//!
//! Such work touches file systems the client chose, and a FUSE or NFS mount can hang any
//! `open` or `stat` for good (a FIFO could too, before client_files refused them). So:
//! it never runs on the async threads that answer everyone (tokio's blocking pool
//! instead); each user has a few jobs at a time (more of theirs wait, nobody else's);
//! and a request waits for its job a bounded time, then answers without it while the job
//! goes on holding its user's slot. One hostile path costs its user a slot and delays
//! only the answers that need that path.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Semaphore;

/// Jobs one user may have running at once.
pub const PER_USER: usize = 4;

/// Why a job gave no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobError {
    /// It did not finish in time (it goes on; its result is used when it comes).
    #[error("timed out after {0:?} (a slow or hung file system?)")]
    TimedOut(Duration),
    /// It panicked.
    #[error("failed unexpectedly")]
    Panicked,
}

/// Per-user slots for blocking jobs.
#[derive(Debug, Default)]
pub struct Jobs {
    slots: Mutex<HashMap<u32, Arc<Semaphore>>>,
}

impl Jobs {
    fn slots_of(&self, uid: u32) -> Arc<Semaphore> {
        let mut g = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        // Users with every slot free are forgotten (a system daemon sees users come
        // and go).
        if g.len() > 64 {
            g.retain(|_, s| s.available_permits() < PER_USER);
        }
        g.entry(uid)
            .or_insert_with(|| Arc::new(Semaphore::new(PER_USER)))
            .clone()
    }

    /// Runs `f` on the blocking pool in one of `uid`'s slots, waiting at most `wait`
    /// (for the slot and the work together). After a time-out the job still runs to its
    /// end, holding the slot, and its result is dropped.
    pub async fn run<T, F>(&self, uid: u32, wait: Duration, f: F) -> Result<T, JobError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let slots = self.slots_of(uid);
        let job = async move {
            let permit = slots
                .acquire_owned()
                .await
                .map_err(|_| JobError::Panicked)?;
            let handle = tokio::task::spawn_blocking(move || {
                let out = f();
                drop(permit);
                out
            });
            handle.await.map_err(|_| JobError::Panicked)
        };
        match tokio::time::timeout(wait, job).await {
            Ok(r) => r,
            Err(_) => Err(JobError::TimedOut(wait)),
        }
    }

    /// As [`Jobs::run`] for work that continues in the background either way: returns
    /// at once with a future of its result (for refreshes nobody waits for).
    pub fn spawn<T, F>(self: &Arc<Self>, uid: u32, f: F) -> impl Future<Output = Option<T>>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let slots = self.slots_of(uid);
        async move {
            let permit = slots.acquire_owned().await.ok()?;
            tokio::task::spawn_blocking(move || {
                let out = f();
                drop(permit);
                out
            })
            .await
            .ok()
        }
    }

    /// Slots in use by `uid` now.
    pub fn busy(&self, uid: u32) -> usize {
        let g = self.slots.lock().unwrap_or_else(|e| e.into_inner());
        g.get(&uid).map_or(0, |s| PER_USER - s.available_permits())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_hung_job_delays_only_its_own_user() {
        let jobs = Arc::new(Jobs::default());
        let release = Arc::new(AtomicBool::new(false));
        // User 1 fills every slot with work that hangs.
        let mut waiting = Vec::new();
        for _ in 0..PER_USER {
            let r = release.clone();
            let j = jobs.clone();
            waiting.push(tokio::spawn(async move {
                j.run(1, Duration::from_millis(50), move || {
                    while !r.load(Ordering::Relaxed) {
                        std::thread::sleep(Duration::from_millis(5));
                    }
                })
                .await
            }));
        }
        for w in waiting {
            assert_eq!(
                w.await.unwrap(),
                Err(JobError::TimedOut(Duration::from_millis(50)))
            );
        }
        assert_eq!(jobs.busy(1), PER_USER, "the hung jobs keep their slots");
        // User 1's next job cannot start; user 2's runs at once.
        assert!(jobs.run(1, Duration::from_millis(50), || 1).await.is_err());
        assert_eq!(jobs.run(2, Duration::from_secs(60), || 2).await, Ok(2));
        release.store(true, Ordering::Relaxed);
        assert_eq!(jobs.run(1, Duration::from_secs(60), || 3).await, Ok(3));
    }
}
