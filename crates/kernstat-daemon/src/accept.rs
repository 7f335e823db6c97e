//! The accept loop both servers share (the Unix socket and the metrics port): the next
//! connection, or None once shutdown resolves. A failed accept (EMFILE and friends)
//! backs off a moment rather than spinning on an error that will repeat.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// Waits for the next connection `accept` yields, or for `shutdown`.
pub(crate) async fn next<T, A, F>(
    mut accept: impl FnMut() -> F,
    shutdown: &mut Pin<&mut impl Future<Output = ()>>,
) -> Option<T>
where
    F: Future<Output = std::io::Result<(T, A)>>,
{
    loop {
        tokio::select! {
            r = accept() => match r {
                Ok((stream, _)) => return Some(stream),
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            _ = shutdown.as_mut() => return None,
        }
    }
}
