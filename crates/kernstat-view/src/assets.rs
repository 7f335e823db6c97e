//! The page and its assets, built into the binary: `kernstat view` fetches nothing from
//! the network, and the page may load nothing but these (its Content-Security-Policy).
//! uPlot 1.6.31 (MIT, assets/vendor/LICENSE-uPlot) draws the charts: 50 KB, and fast
//! enough for 100,000 points.

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_SECURITY_POLICY};
use hyper::{Response, StatusCode};
use kernstat_daemon::metrics::http::reply;

const PAGE: &str = include_str!("../assets/index.html");
const FILES: [(&str, &str, &str); 5] = [
    (
        "/assets/app.js",
        "text/javascript; charset=utf-8",
        include_str!("../assets/app.js"),
    ),
    (
        "/assets/app.css",
        "text/css; charset=utf-8",
        include_str!("../assets/app.css"),
    ),
    (
        "/assets/uPlot.iife.min.js",
        "text/javascript; charset=utf-8",
        include_str!("../assets/vendor/uPlot.iife.min.js"),
    ),
    (
        "/assets/uPlot.min.css",
        "text/css; charset=utf-8",
        include_str!("../assets/vendor/uPlot.min.css"),
    ),
    (
        "/assets/LICENSE-uPlot",
        "text/plain; charset=utf-8",
        include_str!("../assets/vendor/LICENSE-uPlot"),
    ),
];

/// Only this origin's scripts, styles, images and requests; no frames.
const POLICY: &str =
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'";

fn secured(mut r: Response<Full<Bytes>>) -> Response<Full<Bytes>> {
    r.headers_mut()
        .insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(POLICY));
    r
}

/// A static asset (no token needed: they hold no data).
pub fn get(path: &str) -> Option<Response<Full<Bytes>>> {
    let (_, kind, body) = FILES.iter().find(|(p, _, _)| *p == path)?;
    let mut r = secured(reply(StatusCode::OK, kind, *body));
    r.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("max-age=3600"));
    Some(r)
}

/// The page.
pub fn page() -> Response<Full<Bytes>> {
    let mut r = secured(reply(StatusCode::OK, "text/html; charset=utf-8", PAGE));
    r.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}
