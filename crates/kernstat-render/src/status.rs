//! `kernstat status`: the daemon's status reply as the lines people read. Here rather
//! than in the command so that any front end (a service manager's check, a bar's
//! tooltip) words it the same way. Strings from the reply (the recording directory, the
//! version) pass through `printable`: the daemon may belong to another user.

use std::fmt::Write;
use std::path::Path;

use kernstat_model::text::printable;
use serde_json::Value;

use crate::human::bytes_string;

/// The status `d` of the daemon at `socket`, as text lines; `stamp` writes a Unix time
/// in ns as a local date and time.
pub fn status_text(d: &Value, socket: &Path, stamp: &dyn Fn(u64) -> String) -> String {
    let text = |v: &Value| printable(v.as_str().unwrap_or("?")).into_owned();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "kernstat daemon {} (protocol {}), pid {}, up {:.0} s\nsocket {}\nsource {}, sampling every {} s\n{} keys, {} clients, {} requests served, {} git paths watched",
        text(&d["version"]),
        d["protocol"],
        d["pid"],
        d["uptime_s"].as_f64().unwrap_or(0.0),
        printable(&socket.to_string_lossy()),
        text(&d["source"]),
        d["interval_s"],
        d["keys"],
        d["clients"],
        d["requests"],
        d["git_paths"],
    );
    let _ = match d.get("recorder").filter(|r| !r.is_null()) {
        Some(r) => writeln!(
            out,
            "recording to {} ({}, every {} s): {} to {}, {}",
            text(&r["dir"]),
            text(&r["state"]),
            r["interval_s"],
            r["first_unix_ns"].as_u64().map_or("-".to_string(), stamp),
            r["last_unix_ns"].as_u64().map_or("-".to_string(), stamp),
            bytes_string(r["bytes"].as_u64().unwrap_or(0) as f64),
        ),
        None => writeln!(
            out,
            "not recording (kernstat daemon --record DIR keeps history)"
        ),
    };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_reads_as_lines_and_no_control_byte_gets_through() {
        let d = serde_json::json!({
            "version": "0.1.0", "protocol": 3, "pid": 42, "uptime_s": 61.4,
            "source": "bpf", "interval_s": 2, "keys": 90, "clients": 1,
            "requests": 7, "git_paths": 0,
            "recorder": {
                "dir": "/var/lib/kernstat/\u{1b}]0;owned\u{7}", "state": "recording",
                "interval_s": 5, "first_unix_ns": 1, "last_unix_ns": 2, "bytes": 2048
            }
        });
        let stamp = |ns: u64| format!("t{ns}");
        let text = status_text(&d, Path::new("/run/kernstat.sock"), &stamp);
        assert!(text.starts_with(
            "kernstat daemon 0.1.0 (protocol 3), pid 42, up 61 s\nsocket /run/kernstat.sock\nsource bpf, sampling every 2 s\n90 keys, 1 clients, 7 requests served, 0 git paths watched\nrecording to /var/lib/kernstat/"
        ), "{text}");
        assert!(
            text.contains("(recording, every 5 s): t1 to t2, "),
            "{text}"
        );
        assert!(
            !text.chars().any(|c| c.is_control() && c != '\n'),
            "{text:?}"
        );
        let idle = status_text(&serde_json::json!({}), Path::new("s"), &stamp);
        assert!(idle.ends_with("not recording (kernstat daemon --record DIR keeps history)\n"));
    }
}
