//! The network workloads: `net-recv`, `net-send`, `net-fill` and `net-exec-thread` (see
//! the binary's header).

use super::*;

pub fn net_recv(args: &[String]) {
    let kind = args.get(2).map(String::as_str).unwrap_or("");
    let n = arg(args, 3, "N");
    let mut buf = vec![0u8; 64 * 1024];
    let (mut got, mut calls) = (0u64, 0u64);
    let say = |line: String| {
        let mut out = std::io::stdout();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    };
    match kind {
        "tcp" => {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            say(format!("ready {}", l.local_addr().unwrap().port()));
            let (mut c, _) = l.accept().unwrap();
            (got, calls) = read_stream(&mut c, n, &mut buf);
        }
        "udp" => {
            let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            say(format!("ready {}", u.local_addr().unwrap().port()));
            u.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            while got < n {
                match u.recv(&mut buf) {
                    Ok(k) => {
                        got += k as u64;
                        calls += 1;
                    }
                    Err(_) => break,
                }
            }
        }
        "unix" => {
            let path = args.get(4).expect("net-recv unix N PATH");
            let _ = std::fs::remove_file(path);
            let l = std::os::unix::net::UnixListener::bind(path).unwrap();
            say("ready 0".to_string());
            let (mut c, _) = l.accept().unwrap();
            (got, calls) = read_stream(&mut c, n, &mut buf);
        }
        other => panic!("ks-workload net-recv: unknown kind {other:?}"),
    }
    let line = format!("got {got} {calls}");
    if args.iter().any(|a| a == "stay") {
        wait_after(&line);
    }
    say(line);
}

/// Reads until `n` bytes came or the peer closed: (bytes, reads that returned some).
fn read_stream(c: &mut impl std::io::Read, n: u64, buf: &mut [u8]) -> (u64, u64) {
    let (mut got, mut calls) = (0u64, 0u64);
    while got < n {
        let k = c.read(buf).unwrap();
        if k == 0 {
            break;
        }
        got += k as u64;
        calls += 1;
    }
    (got, calls)
}

pub fn net_fill(args: &[String]) -> ! {
    let n = arg(args, 2, "N");
    let size = arg(args, 3, "SIZE") as usize;
    let exit = args.get(4).is_some_and(|a| a == "exit");
    let data = vec![b'f'; size];
    let (mut fds, mut go) = ([0; 2], [0; 2]);
    // SAFETY: fds and go have room for the two descriptors each.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    assert_eq!(unsafe { libc::pipe(go.as_mut_ptr()) }, 0);
    for _ in 0..n {
        // SAFETY: this process has one thread; the child uses only async-signal-safe
        // calls (prctl, socket, sendto, write, read, pause, _exit).
        match unsafe { libc::fork() } {
            0 => unsafe {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                libc::close(go[1]);
                let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM, 0);
                let to = libc::sockaddr_in {
                    sin_family: libc::AF_INET as libc::sa_family_t,
                    sin_port: 9u16.to_be(),
                    sin_addr: libc::in_addr {
                        s_addr: u32::from_be_bytes([127, 0, 0, 1]).to_be(),
                    },
                    sin_zero: [0; 8],
                };
                let sent = libc::sendto(
                    s,
                    data.as_ptr().cast(),
                    data.len(),
                    0,
                    (&to as *const libc::sockaddr_in).cast(),
                    std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
                );
                let ok = [u8::from(sent == size as isize)];
                libc::write(fds[1], ok.as_ptr().cast(), 1);
                if exit {
                    // All at once, when the parent closes `go`.
                    let mut b = [0u8];
                    libc::read(go[0], b.as_mut_ptr().cast(), 1);
                    libc::_exit(0);
                }
                loop {
                    libc::pause();
                }
            },
            -1 => panic!("fork: {}", std::io::Error::last_os_error()),
            _ => {}
        }
    }
    let (mut sent, mut byte) = (0u64, [0u8]);
    for _ in 0..n {
        // SAFETY: one byte into a one-byte buffer.
        assert_eq!(
            unsafe { libc::read(fds[0], byte.as_mut_ptr().cast(), 1) },
            1
        );
        sent += u64::from(byte[0]);
    }
    if exit {
        // When told (a line on stdin), they exit, and stay zombies (not reaped) until
        // we die.
        println!("sent {sent}");
        let _ = std::io::stdout().flush();
        let _ = std::io::stdin().read_line(&mut String::new());
        // SAFETY: closing our own descriptor.
        unsafe { libc::close(go[1]) };
    }
    wait_after(&format!("ready {sent}"))
}

pub fn net_send(args: &[String]) {
    let kind = args.get(2).map(String::as_str).unwrap_or("");
    let to = args
        .get(3)
        .expect("net-send KIND PORT|PATH N CHUNK")
        .clone();
    let n = arg(args, 4, "N");
    let chunk = arg(args, 5, "CHUNK").max(1) as usize;
    let data = vec![b'k'; chunk];
    let (mut sent, mut calls) = (0u64, 0u64);
    let mut send = |f: &mut dyn FnMut(&[u8]) -> usize| {
        while sent < n {
            let want = chunk.min((n - sent) as usize);
            sent += f(&data[..want]) as u64;
            calls += 1;
        }
    };
    match kind {
        "tcp" => {
            let mut c =
                std::net::TcpStream::connect(("127.0.0.1", to.parse::<u16>().unwrap())).unwrap();
            // With `after=PATH`: connected, it waits for PATH to exist before sending (a
            // test changes the network between the handshake and the data).
            if let Some(path) = args.iter().find_map(|a| a.strip_prefix("after=")) {
                println!("connected");
                let _ = std::io::stdout().flush();
                while !std::path::Path::new(path).exists() {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
            send(&mut |b| std::io::Write::write(&mut c, b).unwrap());
        }
        "udp" => {
            let u = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            u.connect(("127.0.0.1", to.parse::<u16>().unwrap()))
                .unwrap();
            // Paced a little, so that the receiver's buffer never overflows on loopback.
            send(&mut |b| {
                let k = u.send(b).unwrap();
                std::thread::sleep(Duration::from_micros(50));
                k
            });
        }
        "unix" => {
            let mut c = std::os::unix::net::UnixStream::connect(&to).unwrap();
            send(&mut |b| std::io::Write::write(&mut c, b).unwrap());
        }
        other => panic!("ks-workload net-send: unknown kind {other:?}"),
    }
    let line = format!("sent {sent} {calls}");
    if args.iter().skip(6).any(|a| a == "stay") {
        wait_after(&line);
    }
    println!("{line}");
}

/// Sends N bytes of UDP to 127.0.0.1:PORT in 1,000-byte datagrams, then a second thread
/// execs `net-send udp PORT N 1000 stay` (de_thread makes it the leader, same pid).
pub fn net_exec_thread(args: &[String]) -> ! {
    let port = args.get(2).expect("net-exec-thread PORT N").clone();
    let n = arg(args, 3, "N");
    let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut sent = 0;
    while sent < n {
        let want = 1000.min(n - sent) as usize;
        sent += sock
            .send_to(
                &vec![b'e'; want],
                ("127.0.0.1", port.parse::<u16>().unwrap()),
            )
            .unwrap() as u64;
    }
    let me = std::env::current_exe().unwrap();
    let t = std::thread::spawn(move || {
        let e = std::os::unix::process::CommandExt::exec(std::process::Command::new(me).args([
            "net-send",
            "udp",
            &port,
            &n.to_string(),
            "1000",
            "stay",
        ]));
        panic!("exec: {e}");
    });
    let _ = t.join();
    unreachable!("the exec replaces the process")
}
