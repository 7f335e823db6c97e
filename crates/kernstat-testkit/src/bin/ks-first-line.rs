//! ks-first-line CMD [ARGS...]: starts CMD, waits for the first complete line on its
//! stdout, kills it, and prints the time from spawn to that line in microseconds.
//! (`time cmd | head -1` would also wait for CMD to notice the closed pipe.)
use std::io::BufRead;
use std::process::{Command, Stdio};
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((cmd, rest)) = args.split_first() else {
        eprintln!("usage: ks-first-line CMD [ARGS...]");
        std::process::exit(2);
    };
    let t0 = Instant::now();
    let mut child = Command::new(cmd)
        .args(rest)
        .stdout(Stdio::piped())
        .stdin(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("start {cmd}: {e}"));
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .expect("read");
    let us = t0.elapsed().as_micros();
    let _ = child.kill();
    let _ = child.wait();
    if line.is_empty() {
        eprintln!("{cmd} printed nothing");
        std::process::exit(1);
    }
    println!("{us}");
}
