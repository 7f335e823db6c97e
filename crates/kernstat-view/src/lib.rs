//! `kernstat view`: the flight recorder's archive as a page. One HTTP server (the
//! metrics endpoint's, with its limits on connections, header time and size) answers:
//!
//! - `/?token=T`: the page (its script and uPlot, vendored, are built into the binary:
//!   nothing is fetched from the network);
//! - `/api/span`, `/api/series`, `/api/heatmap`, `/api/moment`, `/api/why`,
//!   `/api/compare` (JSON, each with `token=T`): the archive's span, downsampled
//!   timelines, histogram heatmaps, the process table and groups at a frame, the ranked
//!   findings of a window and two windows side by side. `/api/span?after=T` waits (up
//!   to 10 s, holding no worker) for a frame newer than T: a page following a recorder
//!   (`kernstat view --live`) asks it again and again. With `--compare DIR` a second
//!   archive is served beside the first: `archive=b` on any request reads it, and
//!   `/api/compare` takes each window from either (`a_archive`, `b_archive`).
//!
//! Access: the token is 128 random bits printed in the URL (as Jupyter does) or read
//! from `--token-file`; without it every request but the static assets gets 403. The
//! server reads the archive as the user running it, so it shows only what that user can
//! read. At most [`WORKERS`] archive reads run at once and [`QUEUE`] wait; more get 503
//! at once, so a flood costs the machine two cores' worth of decoding at most.

mod assets;
pub mod series;

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::{Method, Request, Response, StatusCode};
use kernstat_daemon::metrics::http::{reply, serve_with};
use kernstat_record::archive::{Archive, Cursor};
use serde_json::json;
use tokio::sync::Semaphore;

/// Archive reads running at once.
pub const WORKERS: usize = 2;
/// Archive reads waiting; more are refused with 503.
pub const QUEUE: usize = 32;
/// How long `/api/span?after=T` waits for a newer frame.
const LONG_POLL: std::time::Duration = std::time::Duration::from_secs(10);
/// The longest window `why` and `compare` read (a week).
const MAX_WINDOW_NS: u64 = 7 * 86_400 * 1_000_000_000;

/// What `kernstat view` serves.
#[derive(Clone, Debug)]
pub struct ViewOptions {
    /// The archive directory.
    pub archive: PathBuf,
    /// Where to listen.
    pub listen: SocketAddr,
    /// The token every request must carry.
    pub token: String,
    /// A second archive to compare with (`archive=b`).
    pub compare: Option<PathBuf>,
}

/// 128 random bits as hex, from the kernel's random source.
pub fn new_token() -> std::io::Result<String> {
    use std::io::Read;
    let mut b = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut b)?;
    Ok(b.iter().map(|x| format!("{x:02x}")).collect())
}

/// Equal without saying where they differ (the time taken does not depend on it).
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

fn query(req: &Request<Incoming>) -> HashMap<String, String> {
    req.uri()
        .query()
        .unwrap_or("")
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .take(16)
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn json_reply(status: StatusCode, v: &serde_json::Value) -> Response<Full<Bytes>> {
    let mut r = reply(
        status,
        "application/json",
        serde_json::to_vec(v).unwrap_or_default(),
    );
    r.headers_mut().insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-store"),
    );
    r
}

fn error(status: StatusCode, what: &str) -> Response<Full<Bytes>> {
    json_reply(status, &json!({ "error": what }))
}

/// One archive served, and its decoded intervals (shared by every request).
#[derive(Clone)]
struct Source {
    dir: PathBuf,
    store: Arc<std::sync::Mutex<series::Store>>,
}

/// The server's state shared by every request.
struct State {
    opts: ViewOptions,
    /// The archive (`a`), then the one compared with (`b`), if any.
    sources: Vec<Source>,
    workers: Semaphore,
    waiting: std::sync::atomic::AtomicUsize,
}

/// Serves until `shutdown` resolves. Must run on a tokio runtime.
pub async fn serve(
    listener: std::net::TcpListener,
    opts: ViewOptions,
    shutdown: impl std::future::Future<Output = ()>,
) -> std::io::Result<()> {
    let sources = std::iter::once(&opts.archive)
        .chain(opts.compare.as_ref())
        .map(|dir| Source {
            dir: dir.clone(),
            store: Arc::default(),
        })
        .collect();
    let state = Arc::new(State {
        opts,
        sources,
        workers: Semaphore::new(WORKERS),
        waiting: std::sync::atomic::AtomicUsize::new(0),
    });
    let handler = move |req: Request<Incoming>| {
        let state = state.clone();
        async move { handle(state, req).await }
    };
    serve_with(listener, handler, shutdown).await
}

async fn handle(state: Arc<State>, req: Request<Incoming>) -> Response<Full<Bytes>> {
    if req.method() != Method::GET {
        return error(StatusCode::METHOD_NOT_ALLOWED, "only GET");
    }
    let path = req.uri().path().to_string();
    if let Some(a) = assets::get(&path) {
        return a;
    }
    let q = query(&req);
    if !q.get("token").is_some_and(|t| same(t, &state.opts.token)) {
        return error(
            StatusCode::FORBIDDEN,
            "the token is missing or wrong (use the URL kernstat view printed)",
        );
    }
    if path == "/" {
        return assets::page();
    }
    if !path.starts_with("/api/") {
        return error(StatusCode::NOT_FOUND, "not found");
    }
    // Counted until this future ends, however it ends (a connection closed while its
    // request waits drops the future here).
    let Some(_queued) = Queued::enter(&state) else {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy: too many requests at once",
        );
    };
    let which = match source_of(&state.sources, q.get("archive")) {
        Ok(w) => w,
        Err((status, what)) => return error(status, &what),
    };
    // `/api/span?after=T` (the page following a recorder, `--live`): held until the
    // archive has a frame newer than T, or LONG_POLL passed, before it takes a worker.
    if path == "/api/span" {
        if let Some(after) = q.get("after").and_then(|a| a.parse::<f64>().ok()) {
            let after_ns = (after.clamp(0.0, 1e11) * 1e9) as u64;
            let deadline = tokio::time::Instant::now() + LONG_POLL;
            loop {
                let dir = state.sources[which].dir.clone();
                let newest = tokio::task::spawn_blocking(move || {
                    Archive::open(&dir).ok()?.span().ok()?.map(|s| s.1)
                })
                .await
                .ok()
                .flatten();
                // Newer by more than a millisecond: T comes as seconds in a double,
                // which rounds a frame's nanoseconds (frames are 100 ms apart at least).
                if newest.is_some_and(|n| n > after_ns.saturating_add(1_000_000))
                    || tokio::time::Instant::now() >= deadline
                {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(250)).await;
            }
        }
    }
    let permit = state.workers.acquire().await;
    let sources = state.sources.clone();
    let answer = tokio::task::spawn_blocking(move || api(&sources, which, &path, &q)).await;
    drop(permit);
    match answer {
        Ok(Ok(v)) => json_reply(StatusCode::OK, &v),
        Ok(Err((status, what))) => error(status, &what),
        Err(_) => error(StatusCode::INTERNAL_SERVER_ERROR, "the request failed"),
    }
}

/// A request counted as running or waiting for the archive.
struct Queued<'a>(&'a State);

impl<'a> Queued<'a> {
    fn enter(state: &'a State) -> Option<Queued<'a>> {
        use std::sync::atomic::Ordering;
        if state.waiting.fetch_add(1, Ordering::AcqRel) >= QUEUE + WORKERS {
            state.waiting.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Queued(state))
    }
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        self.0
            .waiting
            .fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

type ApiResult = Result<serde_json::Value, (StatusCode, String)>;

/// Which archive a request names (`a`, the default, or `b`, the one `--compare` gave).
fn source_of(sources: &[Source], name: Option<&String>) -> Result<usize, (StatusCode, String)> {
    match name.map(String::as_str) {
        None | Some("a") => Ok(0),
        Some("b") if sources.len() > 1 => Ok(1),
        Some("b") => Err((
            StatusCode::NOT_FOUND,
            "no second archive (kernstat view --compare DIR serves one)".into(),
        )),
        Some(_) => Err(bad("archive: a or b")),
    }
}

fn bad(what: impl Into<String>) -> (StatusCode, String) {
    (StatusCode::BAD_REQUEST, what.into())
}

/// A time parameter: ns since the Unix epoch (a plain number of seconds, fractions
/// allowed, as the page sends).
fn time_of(q: &HashMap<String, String>, name: &str) -> Result<u64, (StatusCode, String)> {
    let v = q
        .get(name)
        .ok_or_else(|| bad(format!("{name} is missing")))?;
    let s: f64 = v
        .parse()
        .map_err(|_| bad(format!("{name}: seconds since 1970")))?;
    if !(s.is_finite() && (0.0..1e11).contains(&s)) {
        return Err(bad(format!("{name}: seconds since 1970")));
    }
    Ok((s * 1e9) as u64)
}

fn cursor(archive: &Archive) -> Result<Cursor, (StatusCode, String)> {
    archive
        .cursor()
        .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))
}

/// A window [from, to] within the archive's span.
fn window(
    q: &HashMap<String, String>,
    span: (u64, u64),
    a: &str,
    b: &str,
) -> Result<(u64, u64), (StatusCode, String)> {
    let from = time_of(q, a)?.max(span.0);
    let to = time_of(q, b)?.min(span.1);
    if to <= from {
        return Err(bad(format!("{a}..{b} is empty or outside the archive")));
    }
    Ok((from, to))
}

fn points(q: &HashMap<String, String>) -> usize {
    q.get("points")
        .and_then(|p| p.parse().ok())
        .unwrap_or(1000)
        .clamp(1, series::MAX_POINTS)
}

/// An archive opened for one request, and its span.
fn open(dir: &std::path::Path) -> Result<(Archive, (u64, u64)), (StatusCode, String)> {
    let archive = Archive::open(dir).map_err(|e| (StatusCode::NOT_FOUND, e.to_string()))?;
    let span = archive
        .span()
        .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
        .ok_or_else(|| {
            (
                StatusCode::NOT_FOUND,
                format!("{}: the archive holds no frame", dir.display()),
            )
        })?;
    Ok((archive, span))
}

/// The intervals of [from, to] of an archive, for timelines and heatmaps: the machine's
/// part of each frame only.
fn lights(
    archive: &Archive,
    src: &Source,
    from: u64,
    to: u64,
) -> Result<Vec<series::Light>, (StatusCode, String)> {
    let mut c = cursor(archive)?.machine_only();
    Ok(src
        .store
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .range(&mut c, from, to))
}

/// Answers one API request from archive `which` (on a blocking thread).
fn api(sources: &[Source], which: usize, path: &str, q: &HashMap<String, String>) -> ApiResult {
    let src = &sources[which];
    let dir = src.dir.as_path();
    if path == "/api/compare" {
        return compare(sources, q);
    }
    let (archive, span) = open(dir)?;
    let lights = |from: u64, to: u64| lights(&archive, src, from, to);
    let mut c = cursor(&archive)?;
    let v = match path {
        "/api/span" => json!({
            "first_unix_ns": span.0,
            "last_unix_ns": span.1,
            "archive": dir.display().to_string(),
            "archives": sources.iter().map(|s| s.dir.display().to_string()).collect::<Vec<_>>(),
            "hists": series::HISTS,
        }),
        "/api/series" => {
            let (from, to) = window(q, span, "from", "to")?;
            serde_json::to_value(series::timelines(&lights(from, to)?, from, to, points(q)))
                .unwrap_or_default()
        }
        "/api/heatmap" => {
            let (from, to) = window(q, span, "from", "to")?;
            let hist = q.get("hist").map_or("runqlat", String::as_str);
            if !series::HISTS.contains(&hist) {
                return Err(bad(format!("hist: one of {}", series::HISTS.join(", "))));
            }
            serde_json::to_value(series::heatmap(
                &lights(from, to)?,
                hist,
                from,
                to,
                points(q),
            ))
            .unwrap_or_default()
        }
        "/api/moment" => moment(&mut c, dir, time_of(q, "t")?)?,
        "/api/why" => {
            let (from, to) = window(q, span, "from", "to")?;
            if to - from > MAX_WINDOW_NS {
                return Err(bad("a window of a week at most"));
            }
            c.seek_nearest(to);
            let report =
                kernstat_why::recorded(&mut c, to - from, &kernstat_why::Thresholds::default())
                    .ok_or_else(|| (StatusCode::NOT_FOUND, "no frame there".to_string()))?;
            serde_json::to_value(report).unwrap_or_default()
        }
        _ => return Err((StatusCode::NOT_FOUND, "no such request".into())),
    };
    Ok(v)
}

/// Two windows side by side, each of either archive (`a_archive`, `b_archive`: `a` or
/// `b`): the mean of every timeline over each, and B − A.
fn compare(sources: &[Source], q: &HashMap<String, String>) -> ApiResult {
    let mut means = Vec::new();
    let mut windows = Vec::new();
    for side in ["a", "b"] {
        let src = &sources[source_of(sources, q.get(&format!("{side}_archive")))?];
        let (archive, span) = open(&src.dir)?;
        let w = window(q, span, &format!("{side}_from"), &format!("{side}_to"))?;
        if w.1 - w.0 > MAX_WINDOW_NS {
            return Err(bad("windows of a week at most"));
        }
        means.push(series::means(&lights(&archive, src, w.0, w.1)?));
        windows.push(json!({ "from": w.0, "to": w.1, "archive": src.dir.display().to_string() }));
    }
    let rows: Vec<serde_json::Value> = means[0]
        .iter()
        .zip(&means[1])
        .map(|((name, x), (_, y))| {
            json!({
                "name": name,
                "a": x,
                "b": y,
                "difference": x.zip(*y).map(|(x, y)| y - x),
            })
        })
        .collect();
    Ok(json!({ "a": windows[0], "b": windows[1], "means": rows }))
}

/// The process table and the groups of the interval holding `t`, as `ps --at` and
/// `cgroups --at` show them, with the command line that shows the same.
fn moment(c: &mut Cursor, dir: &std::path::Path, t: u64) -> ApiResult {
    // The frame whose interval holds t (the first at or after it): what ran then and
    // what ended in it. After the last frame, the last.
    if !c.seek_from(t) {
        c.seek_nearest(t)
            .ok_or_else(|| (StatusCode::NOT_FOUND, "no frame there".to_string()))?;
    }
    let f = c.current().expect("standing").clone();
    let rows: Vec<serde_json::Value> = kernstat_record::replay::rows(c.before(), &f)
        .into_iter()
        .map(|(r, rates)| {
            let mut v = serde_json::to_value(r).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.insert("read_bps".into(), json!(rates.read_bps));
                o.insert("write_bps".into(), json!(rates.write_bps));
            }
            v
        })
        .collect();
    let groups = kernstat_record::replay::model(c.before(), &f).cgroups;
    let at = format!("@{:.3}", f.time_unix_ns as f64 / 1e9);
    Ok(json!({
        "time_unix_ns": f.time_unix_ns,
        "interval_s": kernstat_record::replay::interval_s(c.before(), &f),
        "rows": rows,
        "groups": groups,
        "command": format!("kernstat ps --at {at} --archive {}", dir.display()),
        "groups_command": format!("kernstat cgroups --at {at} --archive {}", dir.display()),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_compare_whole() {
        assert!(same("abc", "abc"));
        assert!(!same("abc", "abd"));
        assert!(!same("abc", "ab"));
        assert!(!same("", "a"));
        let t = new_token().unwrap();
        assert_eq!(t.len(), 32);
        assert_ne!(t, new_token().unwrap());
    }
}
