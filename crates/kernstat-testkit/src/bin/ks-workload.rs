//! ks-workload: processes whose answers are known, for kernstat's accuracy tests.
//!
//! Each mode does its work, prints "ready" on stdout, and then sleeps until killed, so a
//! test can sample it at rest and compare kernstat's numbers with /proc's.
//!
//!   ks-workload burn THREADS MS [EXITED_THREADS EXITED_MS]
//!       first EXITED_THREADS threads burn EXITED_MS each and exit; then THREADS threads
//!       burn MS each and stay alive (parked)
//!   ks-workload named NAME           names itself NAME with prctl, "ready", then sleeps
//!   ks-workload rusage CMD ARGS...   run CMD, reap it with wait4, print "rusage PID CPU_NS
//!                                    MAXRSS_BYTES" (what the kernel charged it)
//!   ks-workload spin                 print "ready", then burn one CPU until killed
//!   ks-workload trickle RATE SIZE PATH  print "ready", then write SIZE bytes RATE times a second
//!   ks-workload bursty BUSY_MS IDLE_MS LOG
//!                                    "ready", then burn BUSY_MS, sleep IDLE_MS, forever;
//!                                    a second thread appends "BOOTTIME_NS CPU_NS" (the
//!                                    process's CPU time) to LOG every 10 ms: the answer
//!                                    for any interval
//!   ks-workload reaper MS PERIOD_MS  print "ready", then every PERIOD_MS fork a child that
//!                                    burns MS of CPU and exits, and reap it
//!   ks-workload write BYTES PATH     write BYTES to PATH in 64 KiB writes, fsync
//!   ks-workload alloc MIB            allocate and touch MIB MiB
//!   ks-workload idle N               N idle child processes (killed with us)
//!   ks-workload zombie               a child that exits and is never reaped ("ready PID")
//!   ks-workload writes MODE N SIZE PATH
//!                                    after "ready", waits for a line on stdin, then writes
//!                                    N records of SIZE bytes to PATH ("-": stdout) and
//!                                    prints "done": MODE unbuffered (one write(2) each),
//!                                    flushed (a BufWriter flushed after each record),
//!                                    buffered (an 8 KiB stdio-style buffer, flushed at the end),
//!                                    writev (one writev(2) of three buffers, N times),
//!                                    kinds (one write each to a file, a pipe and a UDP
//!                                    socket, and one sendto and one sendmsg), forked (N
//!                                    child processes write one record each, then stay
//!                                    until this process ends)
//!   ks-workload syscall-cost N       time N 1-byte writes to /dev/null and N getppid
//!                                    calls; print "write NS getppid NS" (per call) and exit
//!   ks-workload pingpong N [SPREAD_US]
//!                                    after "ready", waits for a line on stdin; then two
//!                                    threads pass one byte back and forth over two pipes N
//!                                    times and it prints "done". Pinned to one CPU, every
//!                                    pass is one wake-up of a blocked reader: 2 N run-queue
//!                                    events of a process that does nothing else. With
//!                                    SPREAD_US, each side spins a pseudo-random 0..SPREAD_US
//!                                    µs after waking its partner, which then waits that
//!                                    long: latencies spread evenly instead of in peaks.
//!                                    Both threads are SCHED_BATCH: a wake-up never
//!                                    preempts the waker
//!   ks-workload net-recv KIND N [PATH] [stay]
//!                                    KIND tcp, udp or unix (a stream socket at PATH):
//!                                    binds (127.0.0.1, port 0), prints "ready PORT" (or
//!                                    "ready 0" for unix), receives until N bytes came
//!                                    (udp: or 2 s pass without a datagram), prints
//!                                    "got BYTES RECEIVES" and exits (with "stay": sleeps
//!                                    until killed instead, so that a sample sees it)
//!   ks-workload net-send KIND PORT|PATH N CHUNK [stay] [after=FILE]
//!                                    sends N bytes to it in sends of CHUNK bytes (udp:
//!                                    datagrams), prints "sent BYTES SENDS" and exits (or
//!                                    stays); tcp with after=FILE: prints "connected" and
//!                                    sends once FILE exists
//!   ks-workload net-exec-thread PORT N
//!                                    sends N bytes of UDP to 127.0.0.1:PORT, then a thread
//!                                    other than the main one execs `net-send udp PORT N
//!                                    1000 stay` (the same pid, the counters carried over)
//!   ks-workload net-fill N SIZE [exit]
//!                                    N child processes that each send one UDP datagram of
//!                                    SIZE bytes to 127.0.0.1:9 and then sleep (or, with
//!                                    `exit`: "sent N" once all have sent, then at a line
//!                                    on stdin they exit together, each taking an entry of
//!                                    the exited processes' network table, and stay
//!                                    zombies); "ready N" once all have sent (and were told
//!                                    to exit); the children die (are reaped) with us
//!   ks-workload dstate               block in uninterruptible sleep (D): a vfork-style
//!                                    clone whose child never execs ("ready CHILD_PID";
//!                                    kill the child to release us)
use std::io::Write;
use std::time::Duration;

#[path = "ks-workload/net.rs"]
mod net;
use net::{net_exec_thread, net_fill, net_recv, net_send};

fn ready_and_wait() -> ! {
    wait_after("ready")
}

fn wait_after(line: &str) -> ! {
    // The reader may be gone (tests read one line and close): not an error.
    let mut out = std::io::stdout();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn arg(args: &[String], i: usize, what: &str) -> u64 {
    args.get(i)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("ks-workload: argument {i} ({what}) must be a number"))
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("spin") => {
            let mut out = std::io::stdout();
            let _ = writeln!(out, "ready");
            let _ = out.flush();
            let mut x = 0u64;
            loop {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        }
        Some("duty") => {
            // PERCENT of one CPU, steadily: every 20 ms, exactly PERCENT % of 20 ms of this
            // thread's CPU time, then a sleep to the next 20 ms (absolute deadlines). At
            // nice -20 it gets that share beside any nice-0 load, so its CPU % over any
            // window of a few periods is known, wherever the window falls.
            let percent = arg(&args, 2, "PERCENT").min(100) as u32;
            let period = Duration::from_millis(20);
            let busy = period * percent / 100;
            let mut out = std::io::stdout();
            let _ = writeln!(out, "ready");
            let _ = out.flush();
            let mut next = std::time::Instant::now();
            loop {
                kernstat_testkit::burn(busy);
                next += period;
                match next.checked_duration_since(std::time::Instant::now()) {
                    Some(d) => std::thread::sleep(d),
                    // Fell behind (descheduled): start the next period now.
                    None => next = std::time::Instant::now(),
                }
            }
        }
        Some("trickle") => {
            // RATE writes of SIZE bytes per second to PATH, forever: a steady small
            // writer (absolute deadlines, so the rate does not drift with timer slack).
            let rate = arg(&args, 2, "RATE").max(1);
            let size = arg(&args, 3, "SIZE") as usize;
            let path = args.get(4).expect("ks-workload trickle RATE SIZE PATH");
            let mut f = std::fs::File::create(path).expect("create");
            let record = vec![b'x'; size];
            let step = std::time::Duration::from_nanos(1_000_000_000 / rate);
            let mut out = std::io::stdout();
            let _ = writeln!(out, "ready");
            let _ = out.flush();
            let mut next = std::time::Instant::now();
            loop {
                f.write_all(&record).expect("write");
                next += step;
                if let Some(d) = next.checked_duration_since(std::time::Instant::now()) {
                    std::thread::sleep(d);
                }
            }
        }
        Some("bursty") => {
            let busy = Duration::from_millis(arg(&args, 2, "BUSY_MS"));
            let idle = Duration::from_millis(arg(&args, 3, "IDLE_MS"));
            let path = args
                .get(4)
                .expect("ks-workload bursty BUSY_MS IDLE_MS LOG")
                .clone();
            let mut log = std::fs::File::create(&path).expect("create the log");
            std::thread::spawn(move || loop {
                let clock = |id| {
                    let mut ts = libc::timespec {
                        tv_sec: 0,
                        tv_nsec: 0,
                    };
                    // SAFETY: clock_gettime writes into the timespec we pass.
                    unsafe { libc::clock_gettime(id, &mut ts) };
                    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
                };
                let line = format!(
                    "{} {}\n",
                    clock(libc::CLOCK_BOOTTIME),
                    clock(libc::CLOCK_PROCESS_CPUTIME_ID)
                );
                let _ = log.write_all(line.as_bytes());
                std::thread::sleep(Duration::from_millis(10));
            });
            let mut out = std::io::stdout();
            let _ = writeln!(out, "ready");
            let _ = out.flush();
            loop {
                kernstat_testkit::burn(busy);
                std::thread::sleep(idle);
            }
        }
        Some("reaper") => {
            // Every PERIOD_MS, a child that burns MS of CPU, exits and is reaped: a parent
            // whose own CPU is nil and whose children live shorter than a refresh.
            let ms = arg(&args, 2, "MS");
            let period = Duration::from_millis(arg(&args, 3, "PERIOD_MS").max(1));
            let mut out = std::io::stdout();
            let _ = writeln!(out, "ready");
            let _ = out.flush();
            let mut next = std::time::Instant::now();
            loop {
                // SAFETY: single-threaded here; the child only burns CPU and _exits.
                match unsafe { libc::fork() } {
                    0 => {
                        kernstat_testkit::burn(Duration::from_millis(ms));
                        // SAFETY: leaving the child without running the parent's destructors.
                        unsafe { libc::_exit(0) }
                    }
                    pid if pid > 0 => {
                        // SAFETY: waiting for our own child.
                        unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
                    }
                    _ => panic!("fork: {}", std::io::Error::last_os_error()),
                }
                next += period;
                if let Some(d) = next.checked_duration_since(std::time::Instant::now()) {
                    std::thread::sleep(d);
                }
            }
        }
        Some("named") => {
            // Names itself NAME (prctl PR_SET_NAME: any bytes, control characters
            // included), prints "ready" and sleeps: a hostile process name.
            let name =
                std::ffi::CString::new(args.get(2).expect("ks-workload named NAME").as_bytes())
                    .expect("no NUL in NAME");
            // SAFETY: PR_SET_NAME with a NUL-terminated string (the kernel copies 15 bytes).
            unsafe { libc::prctl(libc::PR_SET_NAME, name.as_ptr()) };
            ready_and_wait();
        }
        Some("rusage") => {
            // Runs the rest of the arguments as a child, reaps it with wait4 and prints
            // "rusage PID CPU_NS MAXRSS_BYTES": what the kernel charged it over its whole
            // life (a guest without a Rust test harness compares the exits hook with it);
            // exits with the command's status.
            let child = std::process::Command::new(&args[2])
                .args(&args[3..])
                .spawn()
                .expect("ks-workload rusage: start the command");
            let pid = child.id() as i32;
            // SAFETY: wait4 on our own child with valid out-pointers.
            let (usage, status) = unsafe {
                let mut status = 0;
                let mut usage: libc::rusage = std::mem::zeroed();
                assert_eq!(libc::wait4(pid, &mut status, 0, &mut usage), pid);
                (usage, status)
            };
            std::mem::forget(child);
            let tv = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
            println!(
                "rusage {pid} {} {}",
                tv(usage.ru_utime) + tv(usage.ru_stime),
                usage.ru_maxrss as u64 * 1024
            );
            let _ = std::io::stdout().flush();
            std::process::exit(if libc::WIFEXITED(status) {
                libc::WEXITSTATUS(status)
            } else {
                128 + libc::WTERMSIG(status)
            });
        }
        Some("burn-exit") => {
            // THREADS threads each burn MS of their own CPU time and end, then the process
            // exits: a short-lived process whose whole CPU time is known (the exits hook
            // and the recorder's tests).
            let threads = arg(&args, 2, "THREADS");
            let ms = arg(&args, 3, "MS");
            let hs: Vec<_> = (0..threads)
                .map(|_| {
                    std::thread::spawn(move || kernstat_testkit::burn(Duration::from_millis(ms)))
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            std::process::exit(0);
        }
        Some("burn") => {
            let threads = arg(&args, 2, "THREADS");
            let ms = arg(&args, 3, "MS");
            let exited = args
                .get(4)
                .map(|_| arg(&args, 4, "EXITED_THREADS"))
                .unwrap_or(0);
            let exited_ms = args.get(5).map(|_| arg(&args, 5, "EXITED_MS")).unwrap_or(0);
            let hs: Vec<_> = (0..exited)
                .map(|_| {
                    std::thread::spawn(move || {
                        kernstat_testkit::burn(Duration::from_millis(exited_ms))
                    })
                })
                .collect();
            for h in hs {
                h.join().unwrap();
            }
            let (tx, rx) = std::sync::mpsc::channel();
            for _ in 0..threads {
                let tx = tx.clone();
                std::thread::spawn(move || {
                    kernstat_testkit::burn(Duration::from_millis(ms));
                    tx.send(()).unwrap();
                    loop {
                        std::thread::park();
                    }
                });
            }
            for _ in 0..threads {
                rx.recv().unwrap();
            }
            ready_and_wait();
        }
        Some("write") => {
            let bytes = arg(&args, 2, "BYTES");
            let path = args.get(3).expect("ks-workload write BYTES PATH");
            let mut f = std::fs::File::create(path).expect("create");
            let chunk = vec![0x5au8; 64 * 1024];
            let mut left = bytes;
            while left > 0 {
                let n = left.min(chunk.len() as u64) as usize;
                f.write_all(&chunk[..n]).expect("write");
                left -= n as u64;
            }
            f.sync_all().expect("fsync");
            ready_and_wait();
        }
        Some("alloc") => {
            let mib = arg(&args, 2, "MIB") as usize;
            let mut v = vec![0u8; mib << 20];
            for i in (0..v.len()).step_by(4096) {
                v[i] = 1;
            }
            std::hint::black_box(&v);
            ready_and_wait();
        }
        Some("idle") => {
            let n = arg(&args, 2, "N") as usize;
            let procs = kernstat_testkit::IdleProcs::spawn(n).expect("spawn idle processes");
            std::hint::black_box(&procs);
            ready_and_wait();
        }
        Some("zombie") => {
            // SAFETY: the child only calls _exit.
            let pid = unsafe { libc::fork() };
            match pid {
                0 => unsafe { libc::_exit(0) },
                p if p > 0 => {
                    // Give it time to exit; never wait for it.
                    std::thread::sleep(Duration::from_millis(100));
                    wait_after(&format!("ready {p}"));
                }
                _ => panic!("fork failed"),
            }
        }
        Some("dstate") => dstate(),
        Some("pingpong") => pingpong(
            arg(&args, 2, "N"),
            args.get(3).map(|_| arg(&args, 3, "SPREAD_US")).unwrap_or(0),
        ),
        Some("writes") => gated_writes(&args),
        Some("net-recv") => net_recv(&args),
        Some("net-send") => net_send(&args),
        Some("net-fill") => net_fill(&args),
        Some("net-exec-thread") => net_exec_thread(&args),
        Some("syscall-cost") => {
            use std::os::fd::AsRawFd;
            let n = arg(&args, 2, "N");
            let null = std::fs::OpenOptions::new()
                .write(true)
                .open("/dev/null")
                .unwrap();
            let fd = null.as_raw_fd();
            let t = std::time::Instant::now();
            for _ in 0..n {
                // SAFETY: a valid fd and a one-byte buffer.
                unsafe { libc::write(fd, b"x".as_ptr().cast(), 1) };
            }
            let w = t.elapsed().as_nanos() as f64 / n as f64;
            let t = std::time::Instant::now();
            for _ in 0..n {
                // SAFETY: getppid has no preconditions.
                unsafe { libc::getppid() };
            }
            let g = t.elapsed().as_nanos() as f64 / n as f64;
            println!("write {w:.0} getppid {g:.0}");
        }
        _ => {
            eprintln!("usage: ks-workload burn|write|alloc|idle ... (see the source header)");
            std::process::exit(2);
        }
    }
}

extern "C" fn vfork_child(_: *mut libc::c_void) -> libc::c_int {
    // Runs on its own stack, sharing our memory. Only async-signal-safe calls: the
    // parent is blocked until this child exits or execs, which it never does.
    let mut buf = [0u8; 32];
    // SAFETY: getpid has no preconditions.
    let pid = unsafe { libc::getpid() };
    let mut n = 0;
    let mut digits = [0u8; 12];
    let mut v = pid as u32;
    loop {
        digits[n] = b'0' + (v % 10) as u8;
        n += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    buf[..6].copy_from_slice(b"ready ");
    for i in 0..n {
        buf[6 + i] = digits[n - 1 - i];
    }
    buf[6 + n] = b'\n';
    // SAFETY: write and pause are async-signal-safe.
    unsafe {
        libc::write(1, buf.as_ptr().cast(), 7 + n);
        loop {
            libc::pause();
        }
    }
}

fn dstate() -> ! {
    let mut stack = vec![0u8; 64 * 1024];
    // SAFETY: the stack is ours and outlives the child (we are blocked until it is gone).
    let top = unsafe { stack.as_mut_ptr().add(stack.len()) };
    let pid = unsafe {
        libc::clone(
            vfork_child,
            top.cast(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            std::ptr::null_mut(),
        )
    };
    assert!(pid > 0, "clone failed");
    // Only reached after the child is killed.
    std::hint::black_box(&stack);
    ready_and_wait();
}

fn wait_for_go() {
    use std::io::BufRead;
    let mut out = std::io::stdout();
    let _ = writeln!(out, "ready");
    let _ = out.flush();
    let mut line = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut line)
        .expect("wait for go");
}

/// Spins for `us` microseconds (a busy wait: the CPU stays with this thread).
fn spin_us(us: u64) {
    let until = std::time::Instant::now() + Duration::from_micros(us);
    while std::time::Instant::now() < until {
        std::hint::spin_loop();
    }
}

/// A small deterministic generator (xorshift64) for the spin lengths.
struct Spread(u64, u64);

impl Spread {
    fn next_us(&mut self) -> u64 {
        if self.1 == 0 {
            return 0;
        }
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % self.1
    }
}

/// SCHED_BATCH for the calling thread: a woken batch task never preempts the running
/// one, so each wake-up waits for its waker to block (no preemption switches).
fn batch_policy() {
    let param = libc::sched_param { sched_priority: 0 };
    // SAFETY: 0 is the calling thread; a valid policy and parameter.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_BATCH, &param) };
    assert_eq!(rc, 0, "sched_setscheduler(SCHED_BATCH)");
}

fn pingpong(n: u64, spread_us: u64) -> ! {
    use std::io::Read;
    let (mut to_pong_r, mut to_pong_w) = std::io::pipe().expect("pipe");
    let (mut to_ping_r, mut to_ping_w) = std::io::pipe().expect("pipe");
    // Both threads exist before "go" and after "done" (the partner parks instead of
    // exiting), so a test can read every thread's /proc schedstat on both sides.
    std::thread::spawn(move || {
        batch_policy();
        let mut spread = Spread(0x9e37_79b9_7f4a_7c15, spread_us);
        let mut b = [0u8; 1];
        for _ in 0..n {
            to_pong_r.read_exact(&mut b).unwrap();
            to_ping_w.write_all(&b).unwrap();
            spin_us(spread.next_us());
        }
        loop {
            std::thread::park();
        }
    });
    batch_policy();
    wait_for_go();
    let mut spread = Spread(0x2545_f491_4f6c_dd1d, spread_us);
    let mut b = [0u8; 1];
    for _ in 0..n {
        to_pong_w.write_all(&b).unwrap();
        spin_us(spread.next_us());
        to_ping_r.read_exact(&mut b).unwrap();
    }
    wait_after("done")
}

/// `n` child processes that write `record` once each to `fd` and then wait to be killed
/// (they die with this process): as many writers, each its own process, as asked. Returns
/// once every child has written.
fn forked_writers(n: usize, record: &[u8], fd: std::os::fd::RawFd) {
    let (mut written_r, written_w) = std::io::pipe().expect("pipe");
    let written_w = std::os::fd::OwnedFd::from(written_w);
    for _ in 0..n {
        // SAFETY: this process has one thread; the child calls only prctl, write, pause
        // and _exit.
        match unsafe { libc::fork() } {
            0 => unsafe {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                if libc::getppid() == 1 {
                    libc::_exit(0);
                }
                let ok =
                    libc::write(fd, record.as_ptr().cast(), record.len()) as usize == record.len();
                libc::write(
                    std::os::fd::AsRawFd::as_raw_fd(&written_w),
                    [u8::from(ok)].as_ptr().cast(),
                    1,
                );
                loop {
                    libc::pause();
                }
            },
            p if p > 0 => {}
            _ => panic!("fork: {}", std::io::Error::last_os_error()),
        }
    }
    drop(written_w);
    let mut oks = vec![0u8; n];
    std::io::Read::read_exact(&mut written_r, &mut oks).expect("every child wrote");
    assert!(oks.iter().all(|&b| b == 1), "a child's write failed");
}

fn gated_writes(args: &[String]) -> ! {
    use std::os::fd::AsRawFd;
    let mode = args
        .get(2)
        .expect("ks-workload writes MODE N SIZE PATH")
        .clone();
    let n = arg(args, 3, "N") as usize;
    let size = arg(args, 4, "SIZE") as usize;
    let path = args.get(5).expect("PATH").clone();
    wait_for_go();
    let record = vec![b'x'; size];
    let file = std::fs::File::create(&path).expect("create PATH");
    match mode.as_str() {
        "unbuffered" => {
            let mut f = &file;
            for _ in 0..n {
                f.write_all(&record).unwrap();
            }
        }
        "flushed" => {
            let mut w = std::io::BufWriter::with_capacity(8192, &file);
            for _ in 0..n {
                w.write_all(&record).unwrap();
                w.flush().unwrap();
            }
        }
        "buffered" => {
            // A stdio-style 8 KiB buffer: filled to the brim (records split across
            // flushes), so every write but the last is exactly 8,192 bytes. (Rust's
            // BufWriter flushes before a record that does not fit: 8,175-byte writes.)
            let mut f = &file;
            let mut buf = Vec::with_capacity(8192);
            for _ in 0..n {
                let mut rest = &record[..];
                while !rest.is_empty() {
                    let take = rest.len().min(8192 - buf.len());
                    buf.extend_from_slice(&rest[..take]);
                    rest = &rest[take..];
                    if buf.len() == 8192 {
                        f.write_all(&buf).unwrap();
                        buf.clear();
                    }
                }
            }
            f.write_all(&buf).unwrap();
        }
        "writev" => {
            let bufs = [
                std::io::IoSlice::new(&record),
                std::io::IoSlice::new(&record),
                std::io::IoSlice::new(&record),
            ];
            for _ in 0..n {
                let mut f = &file;
                let _ = f.write_vectored(&bufs).unwrap();
            }
        }
        "kinds" => {
            let mut f = &file;
            f.write_all(&record).unwrap();
            let (mut r, mut w) = std::io::pipe().expect("pipe");
            w.write_all(&record).unwrap();
            let mut back = vec![0u8; size];
            std::io::Read::read_exact(&mut r, &mut back).unwrap();
            let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
            tx.connect(rx.local_addr().unwrap()).unwrap();
            // write(2) on a connected socket, then sendto(2) and sendmsg(2).
            // SAFETY: plain syscalls on valid buffers and fds.
            unsafe {
                libc::write(tx.as_raw_fd(), record.as_ptr().cast(), size);
            }
            tx.send(&record).unwrap();
            let iov = libc::iovec {
                iov_base: record.as_ptr() as *mut _,
                iov_len: size,
            };
            // SAFETY: msghdr points at one valid iovec; no name, no control data.
            unsafe {
                let mut msg: libc::msghdr = std::mem::zeroed();
                msg.msg_iov = &iov as *const _ as *mut _;
                msg.msg_iovlen = 1;
                libc::sendmsg(tx.as_raw_fd(), &msg, 0);
            }
        }
        "forked" => forked_writers(n, &record, file.as_raw_fd()),
        other => panic!("ks-workload writes: unknown mode {other}"),
    }
    drop(file);
    wait_after("done")
}
