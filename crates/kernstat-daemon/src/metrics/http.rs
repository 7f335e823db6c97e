//! The HTTP side of the Prometheus endpoint (hyper, HTTP/1.1), built to survive the
//! clients of an open port: `GET /metrics` (and `HEAD`) and a short page at `/`;
//! other paths get 404, other methods 405.
//!
//! Limits, each with the attack it answers:
//! - at most [`MAX_CONNECTIONS`] connections (a flood of connections cannot exhaust the
//!   daemon's file descriptors, which the socket clients need); when all are taken, a new
//!   one closes the connection that was least recently active — the one oldest in
//!   waiting for its request, or idle longest since its last — so that clients holding
//!   slots with partial requests cannot shut real scrapes out (shared/security L4: 300
//!   such clients kept all 256 slots and 0 of 26 scrapes got through);
//! - request headers within [`HEADER_TIMEOUT`] (slowloris), at most 16 KiB of buffer
//!   (huge headers);
//! - a connection lives at most [`CONNECTION_LIFETIME`], then is closed gracefully (an
//!   idle keep-alive connection cannot hold a slot forever);
//! - a request body is never read.
//!
//! The endpoint runs on the daemon's runtime but shares nothing with the socket server
//! but the latest sample, which it reads without waiting for the sampler.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{HeaderValue, ACCEPT, ALLOW, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::Notify;

use super::Exporter;

/// Most connections served at once.
pub const MAX_CONNECTIONS: usize = 256;
/// A client must send its request headers within this time.
pub const HEADER_TIMEOUT: Duration = Duration::from_secs(5);
/// A connection is closed (gracefully) after this long.
pub const CONNECTION_LIFETIME: Duration = Duration::from_secs(120);

/// What a scraper that wants protobuf (native histograms) sends in Accept.
const PROTOBUF: &str = "application/vnd.google.protobuf";
const PROTOBUF_TYPE: &str =
    "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited";
const OPENMETRICS_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
const TEXT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

const INDEX: &str = "<html><head><title>kernstat</title></head><body>\
<h1>kernstat</h1><p><a href=\"/metrics\">Metrics</a></p></body></html>\n";

/// A response with `status`, its content type and body.
pub fn reply(
    status: StatusCode,
    content_type: &str,
    body: impl Into<Bytes>,
) -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    if let Ok(v) = HeaderValue::from_str(content_type) {
        r.headers_mut().insert(CONTENT_TYPE, v);
    }
    r
}

/// Whether the Accept header asks for Prometheus' delimited protobuf.
pub fn wants_protobuf(accept: &str) -> bool {
    accept.split(',').any(|part| {
        let p = part.trim();
        p.starts_with(PROTOBUF)
            && p.contains("io.prometheus.client.MetricFamily")
            && p.contains("encoding=delimited")
    })
}

/// Whether the Accept header takes OpenMetrics text (Prometheus does; curl and
/// promtool get the classic text format).
pub fn wants_openmetrics(accept: &str) -> bool {
    accept.contains("application/openmetrics-text")
}

/// The classic text format (0.0.4) from OpenMetrics text: a counter family is named
/// after its samples (`x_total`, where OpenMetrics names it `x`), and there is no EOF
/// marker. Everything else is the same in both formats for the series served here
/// (no units, no info or stateset types, no exemplars, no created timestamps).
pub fn openmetrics_to_text(om: &str) -> String {
    // Exactly sized (the cached bytes keep any spare room): `_total` twice in every
    // counter family (a help text ending in " counter" only adds 12 bytes more).
    let mut out = String::with_capacity(om.len() + 12 * om.matches(" counter\n").count());
    let mut lines = om.lines().peekable();
    while let Some(line) = lines.next() {
        if line == "# EOF" {
            continue;
        }
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let name = rest.split(' ').next().unwrap_or("");
            let counter = lines.peek().is_some_and(|next| {
                next.strip_prefix("# TYPE ")
                    .and_then(|t| t.strip_prefix(name))
                    == Some(" counter")
            });
            if counter {
                for part in ["# HELP ", name, "_total", &rest[name.len()..], "\n"] {
                    out.push_str(part);
                }
                for part in ["# TYPE ", name, "_total counter\n"] {
                    out.push_str(part);
                }
                lines.next();
                continue;
            }
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Answers one request.
pub fn respond<B>(exporter: &Arc<Exporter>, req: &Request<B>) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    let known = path == "/metrics" || path == "/";
    if !known {
        return reply(
            StatusCode::NOT_FOUND,
            "text/plain",
            "not found; try /metrics\n",
        );
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = reply(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "only GET and HEAD\n",
        );
        r.headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    if path == "/" {
        return reply(StatusCode::OK, "text/html; charset=utf-8", INDEX);
    }
    let accept = req
        .headers()
        .get(ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let encoded = if wants_protobuf(accept) {
        exporter
            .encode_protobuf()
            .map(|b| reply(StatusCode::OK, PROTOBUF_TYPE, b))
    } else if wants_openmetrics(accept) {
        exporter
            .encode_text()
            .map(|t| reply(StatusCode::OK, OPENMETRICS_TYPE, t))
    } else {
        exporter
            .encode_classic_text()
            .map(|t| reply(StatusCode::OK, TEXT_TYPE, t))
    };
    encoded.unwrap_or_else(|_| {
        reply(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain",
            "encoding failed\n",
        )
    })
}

/// Serves `listener` until `shutdown` resolves. Must run on a tokio runtime.
pub async fn serve(
    listener: std::net::TcpListener,
    exporter: Arc<Exporter>,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let handler = move |req: Request<Incoming>| {
        let r = respond(&exporter, &req);
        async move { r }
    };
    serve_with(listener, handler, shutdown).await
}

/// Serves `listener` with `handler` under this module's limits (connections, header
/// time and size, lifetime) until `shutdown` resolves: the metrics endpoint's, and any
/// other HTTP endpoint kernstat opens (`kernstat view`). Must run on a tokio runtime.
pub async fn serve_with<F, Fut>(
    listener: std::net::TcpListener,
    handler: F,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()>
where
    F: Fn(Request<Incoming>) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Response<Full<Bytes>>> + Send + 'static,
{
    listener.set_nonblocking(true)?;
    let listener = TcpListener::from_std(listener)?;
    let slots = Arc::new(Slots::default());
    let handler = Arc::new(handler);
    tokio::pin!(shutdown);
    loop {
        let Some(stream) = crate::accept::next(|| listener.accept(), &mut shutdown).await else {
            return Ok(());
        };
        let (id, active, evict) = slots.take();
        let _ = stream.set_nodelay(true);
        let handler = handler.clone();
        let slots = slots.clone();
        tokio::spawn(async move {
            let touched = active.clone();
            let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                touched.store(now_ns(), Ordering::Relaxed);
                let r = handler(req);
                async move { Ok::<_, Infallible>(r.await) }
            });
            // half_close: a client that shuts its sending side after the request (`nc
            // -N`, fortio -halfclose) is still answered, as RFC 9112 9.6 asks; hyper's
            // default closes on that EOF without a reply (found by tests/http_props.rs).
            let conn = hyper::server::conn::http1::Builder::new()
                .half_close(true)
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .max_buf_size(16 * 1024)
                .serve_connection(TokioIo::new(stream), service);
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = evict.notified() => {}
                _ = tokio::time::sleep(CONNECTION_LIFETIME) => {
                    conn.as_mut().graceful_shutdown();
                    let _ = tokio::time::timeout(HEADER_TIMEOUT, conn).await;
                }
            }
            slots.release(id);
        });
    }
}

fn now_ns() -> u64 {
    kernstat_shm::now_ns()
}

/// One open connection: its last activity (CLOCK_MONOTONIC ns: accepted, or a request
/// served) and how to close it.
type Slot = (Arc<AtomicU64>, Arc<Notify>);

/// The connections open now.
#[derive(Default)]
struct Slots {
    open: Mutex<HashMap<u64, Slot>>,
    next: AtomicU64,
}

impl Slots {
    /// A slot for a new connection: when all are taken, the least recently active
    /// connection is told to close first.
    fn take(&self) -> (u64, Arc<AtomicU64>, Arc<Notify>) {
        let mut g = self.open.lock().unwrap_or_else(|e| e.into_inner());
        while g.len() >= MAX_CONNECTIONS {
            let Some(oldest) = g
                .iter()
                .min_by_key(|(_, (t, _))| t.load(Ordering::Relaxed))
                .map(|(id, _)| *id)
            else {
                break;
            };
            if let Some((_, evict)) = g.remove(&oldest) {
                // A permit kept if the task is not waiting yet.
                evict.notify_one();
            }
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let entry = (Arc::new(AtomicU64::new(now_ns())), Arc::new(Notify::new()));
        g.insert(id, entry.clone());
        (id, entry.0, entry.1)
    }

    fn release(&self, id: u64) {
        self.open
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protobuf_only_when_asked_for_the_delimited_metric_families() {
        assert!(wants_protobuf("application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.6,application/openmetrics-text;version=1.0.0;q=0.5"));
        assert!(!wants_protobuf("text/plain;version=0.0.4;q=0.3,*/*;q=0.2"));
        assert!(!wants_protobuf(""));
    }

    #[test]
    fn classic_text_names_counter_families_after_their_samples() {
        let om = "# HELP a_seconds time\n# TYPE a_seconds counter\na_seconds_total 1.5\n\
                  # HELP b_bytes size\n# TYPE b_bytes gauge\nb_bytes 3\n# EOF\n";
        assert_eq!(
            openmetrics_to_text(om),
            "# HELP a_seconds_total time\n# TYPE a_seconds_total counter\na_seconds_total 1.5\n\
             # HELP b_bytes size\n# TYPE b_bytes gauge\nb_bytes 3\n"
        );
    }

    #[test]
    fn paths_and_methods() {
        let e = Exporter::new(10);
        let get = |m: Method, p: &str| {
            let req = Request::builder().method(m).uri(p).body(()).unwrap();
            respond(&e, &req).status()
        };
        assert_eq!(get(Method::GET, "/metrics"), StatusCode::OK);
        assert_eq!(get(Method::HEAD, "/metrics"), StatusCode::OK);
        assert_eq!(get(Method::GET, "/"), StatusCode::OK);
        assert_eq!(
            get(Method::POST, "/metrics"),
            StatusCode::METHOD_NOT_ALLOWED
        );
        assert_eq!(get(Method::GET, "/../etc/passwd"), StatusCode::NOT_FOUND);
        assert_eq!(get(Method::DELETE, "/nope"), StatusCode::NOT_FOUND);
    }
}
