//! `kernstat events`: notable kernel events (OOM kills, with the victim's group, the
//! limit that fired and the biggest growers): first the recent ones the daemon saw
//! (`events.recent`), then each new one as it happens, from the OOM hook loaded here
//! (root), else from the daemon. Text lines, or NDJSON with `--json`.

use std::io::Write;
use std::time::Duration;

use kernstat_client::session::Session;
use kernstat_model::events::Event;
use kernstat_os::signals::{Signals, Wake};

use crate::cli::EventsArgs;

/// The daemon's recent events, when one answers.
fn recent(socket: Option<&std::path::Path>) -> Option<Vec<Event>> {
    let path = match socket {
        Some(p) => p.to_path_buf(),
        None => kernstat_client::default_socket().ok()?,
    };
    let mut s = Session::connect(&path).ok()?;
    s.set_timeout(Some(Duration::from_secs(2))).ok()?;
    let reply = s.get("events.recent", None).ok()?;
    serde_json::from_value(reply.data?).ok()
}

fn print(out: &mut impl Write, e: &Event, json: bool) -> std::io::Result<()> {
    if json {
        serde_json::to_writer(&mut *out, e)?;
        writeln!(out)
    } else {
        writeln!(
            out,
            "{} {}",
            kernstat_record::time::local_stamp(e.time_unix_ns()),
            e.line()
        )
    }
}

/// Runs `kernstat events`; returns the exit status.
pub fn run(args: &EventsArgs) -> anyhow::Result<i32> {
    let mut out = std::io::stdout().lock();
    let mut last_seen = 0;
    match recent(args.socket.socket.as_deref()) {
        Some(events) => {
            for e in &events {
                print(&mut out, e, args.json)?;
                last_seen = last_seen.max(e.time_unix_ns());
            }
        }
        None if args.recent => {
            eprintln!(
                "kernstat events: no daemon answers (`kernstat daemon` keeps the recent events)"
            );
            return Ok(1);
        }
        None => {}
    }
    out.flush()?;
    if args.recent {
        return Ok(0);
    }
    let signals = Signals::block();
    match kernstat_collect::events::OomWatcher::open() {
        Ok(mut w) => {
            eprintln!("kernstat: watching for OOM kills (oom:mark_victim)... Hit Ctrl-C to end.");
            loop {
                // No growers here (this process keeps no resident sets; the daemon's
                // list has them).
                if let Wake::Stop = signals.wait(Duration::from_millis(500)) {
                    return Ok(0);
                }
                for e in w.poll() {
                    print(&mut out, &e, args.json)?;
                }
                out.flush()?;
            }
        }
        Err(e) => {
            // Without BPF here: the daemon's list, asked every second.
            if recent(args.socket.socket.as_deref()).is_none() {
                eprintln!("kernstat events: {e}; and no daemon answers (`sudo kernstat events`, or run the daemon)");
                return Ok(1);
            }
            eprintln!("kernstat: following the daemon's events... Hit Ctrl-C to end.");
            loop {
                if let Wake::Stop = signals.wait(Duration::from_secs(1)) {
                    return Ok(0);
                }
                for e in recent(args.socket.socket.as_deref()).unwrap_or_default() {
                    if e.time_unix_ns() > last_seen {
                        print(&mut out, &e, args.json)?;
                        last_seen = e.time_unix_ns();
                    }
                }
                out.flush()?;
            }
        }
    }
}
