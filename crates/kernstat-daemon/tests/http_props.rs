//! Property tests of the Prometheus endpoint's HTTP side, over real TCP connections to
//! the server the daemon runs (`metrics::http::serve`): the request line and headers are
//! the untrusted input of an open port. Whatever bytes arrive, split wherever, the
//! server answers with a status line or closes, answers well-formed requests (several
//! pipelined on one connection too) with the status and content type the endpoint
//! documents, and goes on answering a normal scrape. Cases: proptest's default (256) in
//! `make test`; `make fuzz` raises PROPTEST_CASES.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::OnceLock;
use std::time::Duration;

use kernstat_daemon::metrics::{http, Exporter};
use proptest::prelude::*;

/// One server for the whole test binary, on its own runtime thread.
fn server() -> SocketAddr {
    static ADDR: OnceLock<SocketAddr> = OnceLock::new();
    *ADDR.get_or_init(|| {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(http::serve(
                listener,
                Exporter::new(10),
                std::future::pending(),
            ))
            .unwrap();
        });
        addr
    })
}

/// Sends `pieces` one write each, closes the sending side, and returns all it reads.
fn exchange(pieces: &[Vec<u8>]) -> Vec<u8> {
    let mut s = TcpStream::connect(server()).unwrap();
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    for p in pieces {
        // The server may answer and close before everything is sent (a request it
        // refused): a failed write is part of the exchange, not of the test.
        if s.write_all(p).is_err() {
            break;
        }
    }
    let _ = s.shutdown(Shutdown::Write);
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

/// The status codes of the responses in `reply`, in order (every response starts with
/// a status line; the bodies served here never contain one).
fn statuses(reply: &[u8]) -> Vec<u16> {
    let text = String::from_utf8_lossy(reply);
    text.match_indices("HTTP/1.")
        .filter_map(|(i, _)| {
            let line = &text[i..];
            let code = line.get(9..12)?;
            (line.as_bytes().get(8) == Some(&b' ')).then(|| code.parse().ok())?
        })
        .collect()
}

fn content_type(reply: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(reply);
    let head = text.split("\r\n\r\n").next()?;
    head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("content-type")
            .then(|| value.trim().to_string())
    })
}

/// A well-formed HTTP/1.1 request and the status the endpoint must give it.
#[derive(Debug, Clone)]
struct Good {
    bytes: Vec<u8>,
    status: u16,
    accept: &'static str,
    get_metrics: bool,
}

const ACCEPTS: [&str; 5] = [
    "",
    "*/*",
    "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
    "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.6,*/*;q=0.1",
    "text/plain",
];

fn good_request() -> impl Strategy<Value = Good> {
    let method = prop_oneof![
        Just("GET"),
        Just("HEAD"),
        Just("POST"),
        Just("PUT"),
        Just("DELETE"),
        Just("OPTIONS")
    ];
    let path = prop_oneof![
        Just(("/metrics", true)),
        Just(("/", true)),
        Just(("/metrics?x=1&y=%00", true)),
        Just(("http://localhost/metrics", true)),
        Just(("/nope", false)),
        Just(("/../etc/passwd", false)),
        Just(("/metrics/", false)),
        Just(("*", false)),
    ];
    // Headers that change neither framing nor the answer.
    let header = ("[A-Za-z][A-Za-z0-9-]{0,20}", "[!-~][ -~]{0,40}").prop_filter(
        "no framing headers",
        |(name, _): &(String, String)| {
            let n = name.to_ascii_lowercase();
            ![
                "content-length",
                "transfer-encoding",
                "connection",
                "expect",
                "upgrade",
                "accept",
                "te",
                "keep-alive",
            ]
            .contains(&n.as_str())
        },
    );
    (
        method,
        path,
        0..ACCEPTS.len(),
        proptest::collection::vec(header, 0..6),
    )
        .prop_map(|(method, (path, known), accept, headers)| {
            let accept = ACCEPTS[accept];
            let mut r = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\n");
            if !accept.is_empty() {
                r.push_str(&format!("Accept: {accept}\r\n"));
            }
            for (n, v) in headers {
                r.push_str(&format!("{n}: {}\r\n", v.trim_end()));
            }
            r.push_str("\r\n");
            let status = match (known, method) {
                (false, _) => 404,
                (true, "GET" | "HEAD") => 200,
                (true, _) => 405,
            };
            Good {
                bytes: r.into_bytes(),
                status,
                accept,
                get_metrics: method == "GET" && known && path != "/",
            }
        })
}

/// Cuts `bytes` at the given points (taken modulo its length) into pieces.
fn split(bytes: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    if bytes.is_empty() {
        return vec![];
    }
    let mut at: Vec<usize> = cuts.iter().map(|c| c % bytes.len()).collect();
    at.push(0);
    at.push(bytes.len());
    at.sort_unstable();
    at.dedup();
    at.windows(2).map(|w| bytes[w[0]..w[1]].to_vec()).collect()
}

/// A normal scrape is answered (the server survived what came before).
fn still_serves() -> Result<(), TestCaseError> {
    let reply =
        exchange(&[b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".to_vec()]);
    let first = statuses(&reply).first().copied();
    prop_assert_eq!(first, Some(200));
    Ok(())
}

proptest! {
    /// Any bytes at all: a status line (hyper's 400 and the like) or a closed connection.
    #[test]
    fn any_bytes_get_a_status_line_or_a_close(
        bytes in proptest::collection::vec(any::<u8>(), 0..2048),
        cuts in proptest::collection::vec(any::<usize>(), 0..4),
    ) {
        let reply = exchange(&split(&bytes, &cuts));
        prop_assert!(
            reply.is_empty() || (reply.starts_with(b"HTTP/1.") && !statuses(&reply).is_empty()),
            "reply {:?}", String::from_utf8_lossy(&reply[..reply.len().min(200)])
        );
        still_serves()?;
    }

    /// Well-formed requests pipelined on one connection, split anywhere, then perhaps
    /// garbage: each answered in order with its documented status; a scrape gets the
    /// format its Accept asks for.
    #[test]
    fn pipelined_requests_are_answered_in_order(
        requests in proptest::collection::vec(good_request(), 1..4),
        cuts in proptest::collection::vec(any::<usize>(), 0..6),
        garbage in proptest::option::of(proptest::collection::vec(any::<u8>(), 1..256)),
    ) {
        let mut bytes: Vec<u8> = requests.iter().flat_map(|r| r.bytes.clone()).collect();
        if let Some(g) = &garbage {
            bytes.extend_from_slice(g);
        }
        let reply = exchange(&split(&bytes, &cuts));
        let got = statuses(&reply);
        let want: Vec<u16> = requests.iter().map(|r| r.status).collect();
        prop_assert!(got.len() >= want.len(), "statuses {got:?}, want {want:?} first");
        prop_assert_eq!(&got[..want.len()], &want[..]);
        if garbage.is_none() {
            prop_assert_eq!(got.len(), want.len());
        }
        if requests.len() == 1 && requests[0].get_metrics {
            let ct = content_type(&reply).unwrap_or_default();
            let accept = requests[0].accept;
            let want_ct = if http::wants_protobuf(accept) {
                "application/vnd.google.protobuf"
            } else if http::wants_openmetrics(accept) {
                "application/openmetrics-text"
            } else {
                "text/plain; version=0.0.4"
            };
            prop_assert!(ct.starts_with(want_ct), "Accept {accept:?}: Content-Type {ct:?}");
        }
        still_serves()?;
    }
}
