//! The wire protocol (docs/protocol.md): newline-delimited JSON, one request per line,
//! one response per request (and a stream of them for `watch`).
//!
//! Requests are parsed with borrowed strings (no allocation for the key or path) and
//! bounded in size by the connection before they get here.

use std::collections::BTreeMap;

use serde::Deserialize;

/// Protocol version, reported by `hello`.
pub const PROTOCOL_VERSION: u32 = 1;
/// Longest request line accepted, in bytes (a longer one is refused and the
/// connection closed).
pub const MAX_REQUEST: usize = 64 * 1024;

/// One request.
#[derive(Debug, Deserialize, PartialEq)]
#[serde(tag = "op", rename_all = "lowercase", deny_unknown_fields)]
pub enum Request<'a> {
    /// The current value of a key.
    Get {
        /// The key, e.g. "load.one", or a provider's name for all its fields ("git").
        #[serde(borrow)]
        key: &'a str,
        /// For path-scoped keys (git.*, python.* ...): the directory.
        #[serde(borrow, default)]
        path: Option<&'a str>,
        /// For context keys: the asking shell's variables that the provider reads
        /// (docs/protocol.md lists them); absent, the daemon's own environment.
        #[serde(default)]
        env: Option<BTreeMap<String, String>>,
        /// Reply with the value as one line of text instead of JSON (for shells, which
        /// cannot parse JSON cheaply): strings bare, other values as JSON, control
        /// characters as spaces; an empty line when there is no value or an error.
        #[serde(default)]
        text: bool,
    },
    /// Every update of a key, as it happens.
    Watch {
        /// The key.
        #[serde(borrow)]
        key: &'a str,
        /// For path-scoped keys.
        #[serde(borrow, default)]
        path: Option<&'a str>,
        /// As for `get`.
        #[serde(default)]
        env: Option<BTreeMap<String, String>>,
    },
    /// The keys the daemon has values for.
    List,
    /// The daemon's own state.
    Status,
    /// Recompute now: one key (and path), or everything.
    Refresh {
        /// The key (all when absent).
        #[serde(borrow, default)]
        key: Option<&'a str>,
        /// For path-scoped keys.
        #[serde(borrow, default)]
        path: Option<&'a str>,
    },
    /// Versions.
    Hello,
    /// Sets a `var.` key that others `get` and `watch`.
    Put {
        /// The key, `var.NAME`.
        #[serde(borrow)]
        key: &'a str,
        /// The value (JSON; `null` removes the key). Parsed, not borrowed raw: the
        /// request's `op` tag makes serde buffer the fields, which raw values refuse.
        data: serde_json::Value,
        /// Seconds until it expires (none: until the daemon stops).
        #[serde(default)]
        ttl_s: Option<f64>,
    },
}

/// Why a request line was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BadRequest {
    /// Not JSON, or not a known request.
    #[error("bad request: {0}")]
    Parse(String),
}

/// Parses one request line (without its newline).
pub fn parse(line: &[u8]) -> Result<Request<'_>, BadRequest> {
    serde_json::from_slice(line).map_err(|e| {
        let msg = e.to_string();
        // serde reports an unknown op as an unknown variant: say which ops exist.
        if msg.contains("unknown variant") {
            BadRequest::Parse(format!(
                "{msg}; ops: get, watch, list, status, refresh, hello, put"
            ))
        } else {
            BadRequest::Parse(msg)
        }
    })
}

/// Machine-readable error codes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// The key exists but has no value (yet, or on this machine).
    NoData,
    /// No such key.
    UnknownKey,
    /// The request could not be parsed.
    BadRequest,
    /// The request line was too long.
    TooLong,
    /// Refused: too many connections, or a peer not allowed.
    Refused,
    /// The provider failed.
    Failed,
    /// A limit was reached (the `put` store is full).
    Full,
}

impl Code {
    /// The code as sent.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::NoData => "no_data",
            Code::UnknownKey => "unknown_key",
            Code::BadRequest => "bad_request",
            Code::TooLong => "too_long",
            Code::Refused => "refused",
            Code::Failed => "failed",
            Code::Full => "full",
        }
    }
}

/// Appends `{"ok":false,"code":CODE,"error":MSG}\n`.
pub fn write_error(out: &mut Vec<u8>, code: Code, msg: &str) {
    out.extend_from_slice(b"{\"ok\":false,\"code\":\"");
    out.extend_from_slice(code.as_str().as_bytes());
    out.extend_from_slice(b"\",\"error\":");
    let _ = serde_json::to_writer(&mut *out, msg);
    out.extend_from_slice(b"}\n");
}

/// Appends `{"ok":true,"data":DATA,"age_ms":AGE,"stale":STALE}\n`, DATA already JSON.
pub fn write_value(out: &mut Vec<u8>, data: &[u8], age_ms: u64, stale: bool) {
    out.extend_from_slice(b"{\"ok\":true,\"data\":");
    out.extend_from_slice(data);
    out.extend_from_slice(b",\"age_ms\":");
    out.extend_from_slice(itoa::Buffer::new().format(age_ms).as_bytes());
    out.extend_from_slice(if stale {
        b",\"stale\":true}\n"
    } else {
        b",\"stale\":false}\n"
    });
}

/// Appends a value (`data`, JSON) as the `text` form of a `get`: strings bare (JSON
/// escapes decoded), anything else as its JSON, control characters as spaces, and a
/// newline. Only a string is parsed; a number or an object is copied as it is.
pub fn write_text(out: &mut Vec<u8>, data: &[u8]) {
    let text = match data.first() {
        Some(b'"') => match serde_json::from_slice::<String>(data) {
            Ok(s) => s,
            Err(_) => String::from_utf8_lossy(data).into_owned(),
        },
        _ => String::from_utf8_lossy(data).into_owned(),
    };
    // C0, DEL and C1 controls as spaces (a value must not drive the terminal).
    out.extend_from_slice(crate::session::printable(text).as_bytes());
    out.push(b'\n');
}

/// Appends `{"ok":true,"data":DATA}\n`, DATA already JSON.
pub fn write_data(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(b"{\"ok\":true,\"data\":");
    out.extend_from_slice(data);
    out.extend_from_slice(b"}\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests() {
        assert_eq!(
            parse(br#"{"op":"get","key":"load.one"}"#).unwrap(),
            Request::Get {
                key: "load.one",
                path: None,
                env: None,
                text: false
            }
        );
        assert_eq!(
            parse(br#"{"op":"get","key":"git.branch","path":"/repo","text":true}"#).unwrap(),
            Request::Get {
                key: "git.branch",
                path: Some("/repo"),
                env: None,
                text: true
            }
        );
        assert_eq!(parse(br#"{"op":"hello"}"#).unwrap(), Request::Hello);
        let mut out = Vec::new();
        write_text(&mut out, br#""a\nb \"c\" \u00e9""#);
        write_text(&mut out, br#"0.5"#);
        write_text(&mut out, br#"{"x":[1]}"#);
        assert_eq!(out, "a b \"c\" \u{e9}\n0.5\n{\"x\":[1]}\n".as_bytes());
        assert_eq!(
            parse(br#"{"op":"refresh"}"#).unwrap(),
            Request::Refresh {
                key: None,
                path: None
            }
        );
        assert!(parse(b"nonsense").is_err());
        let e = parse(br#"{"op":"frobnicate"}"#).unwrap_err();
        assert!(e.to_string().contains("ops: get"), "{e}");
        assert!(parse(br#"{"op":"get"}"#).is_err(), "a get needs a key");
        assert!(parse(br#"{"op":"get","key":"a","bogus":1}"#).is_err());
    }

    #[test]
    fn responses() {
        let mut out = Vec::new();
        write_value(&mut out, b"0.5", 12, false);
        write_error(&mut out, Code::UnknownKey, "no \"such\" key");
        let s = String::from_utf8(out).unwrap();
        let mut l = s.lines();
        let v: serde_json::Value = serde_json::from_str(l.next().unwrap()).unwrap();
        assert_eq!(v["data"], 0.5);
        assert_eq!(v["age_ms"], 12);
        assert_eq!(v["stale"], false);
        let e: serde_json::Value = serde_json::from_str(l.next().unwrap()).unwrap();
        assert_eq!(e["ok"], false);
        assert_eq!(e["error"], "no \"such\" key");
        assert_eq!(e["code"], "unknown_key");
    }
}
