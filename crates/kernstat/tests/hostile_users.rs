//! The reproductions of shared/security/findings-2026-11-25.md, each turned into a test:
//! a hostile local user against the system daemon and against another user's prompt.
//! Each failed on the main of that day and passes now.
//!
//! Root forks the users with setpriv: `VICTIM` and `ATTACKER` are uids with no passwd
//! entry, used by these tests only; the system daemon runs as `nobody`. Every test makes
//! its own directories (in /tmp, reachable by those users) and removes them; the only
//! fixed names are /tmp/kernstat-VICTIM and /tmp/kernstat-ZSH_VICTIM (a victim's
//! default runtime directory, which the test that needs it removes before and after). Needs root (CI=true: must run).

mod common;
use common::{command, daemon_answers, kernstat};

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use kernstat_testkit::{hostile_bin, tool_gate};
use serde_json::Value;

#[path = "common/users.rs"]
mod users;
use users::*;

/// H1: `.git/HEAD` (and packed-refs, a ref, the stash log, msgnum, config) linked to
/// /dev/zero took the system daemon from 28 MB to 8.5 GB in 30 s; FIFOs there parked
/// its threads until nobody else was answered. Now each is refused as not a regular
/// file, the daemon stays small, and another user is answered throughout.
#[test]
fn a_hostile_repository_neither_grows_nor_hangs_the_system_daemon() {
    if !gate() {
        return;
    }
    let mut d = SysDaemon::start(&[]);
    let t = open_dir();
    let mut requests = Vec::new();
    for (i, f) in [
        "HEAD",
        "packed-refs",
        "logs/refs/stash",
        "refs/heads/main",
        "rebase-merge/msgnum",
        "config",
    ]
    .iter()
    .enumerate()
    {
        let r = t.path().join(format!("zero{i}"));
        fake_repo(&r);
        let p = r.join(".git").join(f);
        let _ = std::fs::remove_file(&p);
        std::os::unix::fs::symlink("/dev/zero", &p).unwrap();
        requests.push(get("git", Some(&r)));
    }
    for i in 0..8 {
        let r = t.path().join(format!("fifo{i}"));
        fake_repo(&r);
        std::fs::remove_file(r.join(".git/HEAD")).unwrap();
        mkfifo(&r.join(".git/HEAD"));
        requests.push(get("git.branch", Some(&r)));
    }
    chown_r(t.path(), ATTACKER);
    let before = rss_kib(d.pid());
    let replies = ask(ATTACKER, &d.sock, &requests, 10_000);
    assert_eq!(replies.len(), requests.len(), "{replies:?}");
    for (req, rep) in requests.iter().zip(&replies) {
        assert_ne!(rep, "TIMEOUT", "{req}");
        let v: Value = serde_json::from_str(rep).unwrap_or_else(|e| panic!("{req}: {rep}: {e}"));
        assert!(v["ok"].is_boolean(), "{req}: {rep}");
    }
    // HEAD itself unusable: no branch, and the reason.
    for (i, why) in [
        (0, "HEAD is a symbolic link outside refs/"),
        (requests.len() - 1, "not a regular file"),
    ] {
        let v: Value = serde_json::from_str(&replies[i]).unwrap();
        assert!(
            v["error"].as_str().unwrap_or("").contains(why),
            "{}",
            replies[i]
        );
    }
    // Another user is answered, machine keys, git and context keys alike.
    let own = open_dir();
    let repo = own.path().join("repo");
    fake_repo(&repo);
    chown_r(own.path(), VICTIM);
    let victim = ask(
        VICTIM,
        &d.sock,
        &[
            get("load.one", None),
            get("git.branch", Some(&repo)),
            serde_json::json!({"op":"get","key":"kubecontext","env":{"KUBECONFIG":"/nonexistent"}})
                .to_string(),
        ],
        5_000,
    );
    assert_eq!(victim.len(), 3, "{victim:?}");
    assert!(victim[0].contains("\"ok\":true"), "{victim:?}");
    assert_eq!(
        serde_json::from_str::<Value>(&victim[1]).unwrap()["data"],
        "main",
        "{victim:?}"
    );
    assert!(!victim.iter().any(|l| l == "TIMEOUT"), "{victim:?}");
    let after = rss_kib(d.pid());
    eprintln!(
        "system daemon VmRSS: {before} KiB before, {after} KiB after the hostile repositories"
    );
    assert!(after < 64 * 1024, "VmRSS {after} KiB");
    assert!(d.alive());
}

/// M1: `daemon --system --socket DIR/sock` gave an existing DIR to the daemon's user and
/// left it so; now nothing is handed over, while it runs or after.
#[test]
fn the_system_daemon_changes_no_directory_it_did_not_make() {
    if !gate() {
        return;
    }
    let t = open_dir();
    let existing = t.path().join("existing");
    std::fs::create_dir(&existing).unwrap();
    std::fs::set_permissions(&existing, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(existing.join("important.conf"), "secret\n").unwrap();
    let mut child = Guard(
        command()
            .args([
                "daemon", "--system", "--user", "nobody", "--no-bpf", "--socket",
            ])
            .arg(existing.join("sock"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let t0 = Instant::now();
    while !daemon_answers(&existing.join("sock"), "cpu.percent") {
        assert!(t0.elapsed() < Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(20));
    }
    let check = |when: &str| {
        let m = std::fs::metadata(&existing).unwrap();
        assert_eq!((m.uid(), m.mode() & 0o7777), (0, 0o755), "{when}");
        let o = as_uid(NOBODY, Path::new("/bin/sh"))
            .arg("-c")
            .arg(format!(
                "echo OWNED > {0}/.x && mv -f {0}/.x {0}/important.conf",
                existing.display()
            ))
            .output()
            .unwrap();
        assert!(!o.status.success(), "{when}: nobody replaced a file");
        assert_eq!(
            std::fs::read_to_string(existing.join("important.conf")).unwrap(),
            "secret\n"
        );
    };
    check("while it runs");
    // SAFETY: kill with a valid signal.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    assert!(child.wait().unwrap().success());
    check("after it stopped");
}

/// M2 (a, b): a snapshot is read only when it is the reader's own or root's: not beside
/// another user's socket named with --socket, and a system daemon's stays root's, so
/// that nobody running as its user can rewrite or cut it.
#[test]
fn snapshots_are_trusted_from_yourself_or_root_only() {
    if !gate() {
        return;
    }
    // (a) The attacker's own daemon, its files made readable to all.
    let t = open_dir();
    let att = t.path().join("att");
    std::fs::create_dir(&att).unwrap();
    std::fs::set_permissions(&att, std::fs::Permissions::from_mode(0o755)).unwrap();
    chown_r(&att, ATTACKER);
    let sock = att.join("run/sock");
    let mut daemon = Guard(
        as_uid(ATTACKER, kernstat())
            .args(["daemon", "--no-bpf", "--socket"])
            .arg(&sock)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let t0 = Instant::now();
    while !att.join("run/snapshot").exists() {
        assert!(t0.elapsed() < Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = as_uid(ATTACKER, kernstat())
        .args(["put", "var.x", "HACKED", "--socket"])
        .arg(&sock)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    let o = as_uid(ATTACKER, Path::new("/bin/chmod"))
        .arg("a+rx")
        .arg(att.join("run"))
        .output()
        .unwrap();
    assert!(o.status.success());
    let o = as_uid(ATTACKER, Path::new("/bin/chmod"))
        .arg("a+rw")
        .arg(&sock)
        .arg(att.join("run/snapshot"))
        .output()
        .unwrap();
    assert!(o.status.success());
    for args in [
        vec!["get", "var.x"],
        vec!["get", "--json", "var.x"],
        vec!["eval", "{var.x}"],
        vec!["get", "var.x", "load.one"],
    ] {
        let o = as_uid(VICTIM, kernstat())
            .args(&args)
            .arg("--socket")
            .arg(&sock)
            .output()
            .unwrap();
        let (out, err) = text(&o);
        assert!(!out.contains("HACKED"), "{args:?}: {out} {err}");
    }
    let _ = daemon.kill();
    let _ = daemon.wait();

    // (b) The system daemon's snapshot: root's, and not writable by its user.
    let d = SysDaemon::start(&[]);
    let snap = d.sock.with_file_name("snapshot");
    let m = std::fs::metadata(&snap).unwrap();
    assert_eq!((m.uid(), m.mode() & 0o777), (0, 0o644));
    let dir = std::fs::metadata(snap.parent().unwrap()).unwrap();
    assert_eq!(dir.uid(), 0, "its directory stays root's");
    for cmd in [
        format!("echo x >> {}", snap.display()),
        format!("truncate -s 0 {}", snap.display()),
        format!("mv {0} {0}.old", snap.display()),
    ] {
        let o = as_uid(NOBODY, Path::new("/bin/sh"))
            .args(["-c", &cmd])
            .output()
            .unwrap();
        assert!(!o.status.success(), "nobody could: {cmd}");
    }
    assert!(daemon_answers(&d.sock, "load.one"));
}

/// M2 (c): the victim's runtime directory did not exist; the attacker renamed a prepared
/// one (with a live daemon of theirs) in and out of its name. 368 of 3,005 `eval` runs
/// printed the attacker's value; now none does.
#[test]
fn a_directory_renamed_in_and_out_never_feeds_a_prompt() {
    if !gate() {
        return;
    }
    let victim_dir = PathBuf::from(format!("/tmp/kernstat-{VICTIM}"));
    let _ = std::fs::remove_dir_all(&victim_dir);
    let t = open_dir();
    let stage = t.path().join("stage");
    std::fs::create_dir(&stage).unwrap();
    chown_r(t.path(), ATTACKER);
    let sock = stage.join("sock");
    let mut daemon = Guard(
        as_uid(ATTACKER, kernstat())
            .args(["daemon", "--no-bpf", "--socket"])
            .arg(&sock)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let t0 = Instant::now();
    while !stage.join("snapshot").exists() {
        assert!(t0.elapsed() < Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(20));
    }
    let put = as_uid(ATTACKER, kernstat())
        .args(["put", "var.x", "PWNED", "--socket"])
        .arg(&sock)
        .output()
        .unwrap();
    assert!(put.status.success(), "{put:?}");
    for (p, mode) in [
        (&stage, "a+rx"),
        (&sock, "a+rw"),
        (&stage.join("snapshot"), "a+r"),
    ] {
        let o = as_uid(ATTACKER, Path::new("/bin/chmod"))
            .arg(mode)
            .arg(p)
            .output()
            .unwrap();
        assert!(o.status.success());
    }
    let mut toggler = Guard(
        as_uid(ATTACKER, &hostile_bin())
            .arg("toggle")
            .arg(&stage)
            .arg(&victim_dir)
            .arg("60")
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let o = as_uid(VICTIM, Path::new("/bin/sh"))
        .arg("-c")
        .arg(format!(
            "i=0; while [ $i -lt 3000 ]; do {} eval '{{var.x}}' 2>/dev/null; i=$((i+1)); done",
            kernstat().display()
        ))
        .output()
        .unwrap();
    let _ = toggler.kill();
    let _ = toggler.wait();
    let _ = daemon.kill();
    let _ = daemon.wait();
    let _ = std::fs::remove_dir_all(&victim_dir);
    let out = String::from_utf8_lossy(&o.stdout);
    assert_eq!(out.lines().count(), 3000, "every run printed its line");
    let foreign = out.lines().filter(|l| l.contains("PWNED")).count();
    assert_eq!(
        foreign, 0,
        "{foreign} of 3,000 runs printed the attacker's value"
    );
}

/// M3: truncating the snapshot killed the daemon and every reader with SIGBUS. Now
/// a hundred cuts later the daemon, a `watch` and a `bar --daemon` still run and still
/// print, and no "Bus error" was seen.
#[test]
fn cutting_the_snapshot_kills_no_reader() {
    if !gate() {
        return;
    }
    let mut d = common::DaemonProc::start(&["--no-bpf"]);
    let snap = d.sock.with_file_name("snapshot");
    let start = |args: &[&str]| -> Guard {
        Guard(
            command()
                .args(args)
                .arg("--socket")
                .arg(&d.sock)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap(),
        )
    };
    let mut watch = start(&["watch", "load.one"]);
    let mut bar = start(&["bar", "--daemon", "--format", "text"]);
    let mut lines = BufReader::new(watch.stdout.take().unwrap()).lines();
    assert!(lines.next().is_some(), "watch printed");
    for _ in 0..100 {
        if let Ok(f) = std::fs::OpenOptions::new().write(true).open(&snap) {
            let _ = f.set_len(0);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(1500));
    for (name, c) in [("watch", &mut watch), ("bar --daemon", &mut bar)] {
        assert!(c.0.try_wait().unwrap().is_none(), "{name} died");
    }
    assert!(d.child.try_wait().unwrap().is_none(), "the daemon died");
    // Still following the daemon: a new value arrives (the daemon samples every 0.3 s).
    assert!(lines.next().is_some(), "watch goes on");
    assert!(daemon_answers(&d.sock, "load.one"));
    for c in [&mut watch, &mut bar] {
        let _ = c.0.kill();
        let _ = c.0.wait();
    }
    let mut err = String::new();
    use std::io::Read;
    if let Some(mut e) = bar.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    assert!(!err.contains("Bus error"), "{err}");
}

/// M5 (a): a repository the asking user may not read gave its branch and commit through
/// the system daemon; a HEAD linked to a file only the daemon's user may read gave its
/// contents. (b): a KUBECONFIG link swapped between a public file and one only the
/// daemon's user may read leaked the latter in 105 of 4,639 requests. Now nothing the
/// asker could not read reaches them.
#[test]
fn the_system_daemon_reads_nothing_the_asker_may_not() {
    if !gate() {
        return;
    }
    let d = SysDaemon::start(&[]);
    let t = open_dir();
    // (a) A private repository of the victim's, and a HEAD linked to nobody's file.
    let private = t.path().join("private");
    fake_repo(&private);
    std::fs::write(
        private.join(".git/HEAD"),
        "ref: refs/heads/fresh-private-branch\n",
    )
    .unwrap();
    chown_r(&private, VICTIM);
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o700)).unwrap();
    let nob = t.path().join("nob");
    std::fs::create_dir(&nob).unwrap();
    std::fs::write(nob.join("head"), "ref: refs/heads/TOP-SECRET-OF-NOBODY\n").unwrap();
    std::fs::set_permissions(nob.join("head"), std::fs::Permissions::from_mode(0o600)).unwrap();
    chown_r(&nob, NOBODY);
    let linked = t.path().join("linked");
    fake_repo(&linked);
    std::fs::remove_file(linked.join(".git/HEAD")).unwrap();
    std::os::unix::fs::symlink(nob.join("head"), linked.join(".git/HEAD")).unwrap();
    chown_r(&linked, ATTACKER);
    let replies = ask(
        ATTACKER,
        &d.sock,
        &[
            get("git", Some(&private)),
            get("git.branch", Some(&private)),
            get("git.commit", Some(&private)),
            get("git", Some(&linked)),
            get("git.branch", Some(&linked)),
        ],
        5_000,
    );
    assert_eq!(replies.len(), 5, "{replies:?}");
    for r in &replies {
        assert!(
            !r.contains("fresh-private-branch")
                && !r.contains("TOP-SECRET")
                && !r.contains("1111111111"),
            "{r}"
        );
    }

    // (b) The swapped link.
    let kc = "contexts:\n- context:\n    namespace: n\n  name: CTX\ncurrent-context: CTX\n";
    let public = t.path().join("kc-public");
    std::fs::write(&public, kc.replace("CTX", "public")).unwrap();
    std::fs::set_permissions(&public, std::fs::Permissions::from_mode(0o644)).unwrap();
    std::fs::write(nob.join("kc"), kc.replace("CTX", "NOBODY-SECRET-CTX")).unwrap();
    std::fs::set_permissions(nob.join("kc"), std::fs::Permissions::from_mode(0o600)).unwrap();
    chown_r(&nob, NOBODY);
    let swapdir = t.path().join("swap");
    std::fs::create_dir(&swapdir).unwrap();
    chown_r(&swapdir, ATTACKER);
    let link = swapdir.join("kc");
    let mut swapper = Guard(
        as_uid(ATTACKER, &hostile_bin())
            .arg("swap")
            .arg(&link)
            .arg(&public)
            .arg(nob.join("kc"))
            .arg("30")
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // A new HOME each time: every request is a new context, read afresh.
    let requests: Vec<String> = (0..2000)
        .map(|i| {
            serde_json::json!({"op":"get","key":"kubecontext.context",
                "env":{"KUBECONFIG": link.to_str().unwrap(), "HOME": format!("/h{i}")}})
            .to_string()
        })
        .collect();
    let replies = ask(ATTACKER, &d.sock, &requests, 5_000);
    let _ = swapper.kill();
    let _ = swapper.wait();
    assert_eq!(replies.len(), 2000, "{:?}", replies.last());
    let leaked = replies
        .iter()
        .filter(|r| r.contains("NOBODY-SECRET"))
        .count();
    let public_seen = replies.iter().filter(|r| r.contains("\"public\"")).count();
    assert_eq!(leaked, 0, "{leaked} of 2,000 requests read nobody's file");
    assert!(public_seen > 0, "the public file was read at all");
}

/// M6: 3,400 contexts took the system daemon from 15 to 623 MB (604 MB after they
/// expired); a user may also not take every connection. Now each user keeps at most 64
/// contexts and 128 git paths, and the daemon stays small.
#[test]
fn no_user_grows_the_system_daemon_without_bound() {
    if !gate() {
        return;
    }
    let mut d = SysDaemon::start(&["--max-connections-per-user", "8"]);
    let big = "v".repeat(4000);
    let requests: Vec<String> = (0..3400)
        .map(|i| {
            let env: serde_json::Map<String, Value> = [
                "AWS_PROFILE",
                "AWS_VAULT",
                "AWS_DEFAULT_PROFILE",
                "AWS_REGION",
                "AWS_DEFAULT_REGION",
                "AWS_CONFIG_FILE",
                "HOME",
            ]
            .iter()
            .map(|k| (k.to_string(), Value::String(format!("{big}{i}"))))
            .collect();
            serde_json::json!({"op":"get","key":"aws","env":env}).to_string()
        })
        .collect();
    let replies = ask(ATTACKER, &d.sock, &requests, 10_000);
    assert_eq!(replies.len(), 3400, "{:?}", replies.last());
    let t = open_dir();
    let paths: Vec<String> = (0..300)
        .map(|i| get("git.branch", Some(&t.path().join(format!("none{i}")))))
        .collect();
    let replies = ask(ATTACKER, &d.sock, &paths, 10_000);
    assert_eq!(replies.len(), 300);
    let status = ask(
        ATTACKER,
        &d.sock,
        &[r#"{"op":"status"}"#.to_string()],
        5_000,
    );
    let s: Value = serde_json::from_str(&status[0]).unwrap();
    assert!(s["data"]["contexts"].as_u64().unwrap() <= 64, "{s}");
    assert!(s["data"]["git_paths"].as_u64().unwrap() <= 128, "{s}");
    let rss = rss_kib(d.pid());
    eprintln!("system daemon VmRSS after 3,400 contexts and 300 paths: {rss} KiB");
    assert!(rss < 64 * 1024, "VmRSS {rss} KiB");
    // Connections: the attacker's ninth is refused, the victim still gets in.
    let mut held = Vec::new();
    for _ in 0..8 {
        let c = as_uid(ATTACKER, &hostile_bin())
            .arg("ask")
            .arg(&d.sock)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        held.push(c);
    }
    // Each holds its connection once it was answered on it.
    let mut open_ends = Vec::new();
    for c in &mut held {
        let mut input = c.stdin.take().unwrap();
        writeln!(input, "{}", get("load.one", None)).unwrap();
        let mut out = std::io::BufReader::new(c.stdout.take().unwrap());
        let mut reply = String::new();
        std::io::BufRead::read_line(&mut out, &mut reply).unwrap();
        assert!(reply.contains("\"ok\":true"), "a holder: {reply}");
        open_ends.push((input, out));
    }
    let ninth = ask(ATTACKER, &d.sock, &[get("load.one", None)], 5_000);
    assert!(
        ninth
            .first()
            .is_some_and(|l| l.contains("too many connections from uid")),
        "{ninth:?}"
    );
    let victim = ask(VICTIM, &d.sock, &[get("load.one", None)], 5_000);
    assert!(victim[0].contains("\"ok\":true"), "{victim:?}");
    drop(open_ends);
    for mut c in held {
        let _ = c.kill();
        let _ = c.wait();
    }
    assert!(d.alive());
}

/// M4: with no runtime directory at `init` (no XDG_RUNTIME_DIR, /tmp/kernstat-UID not
/// there), another user made it later with a socket of theirs and received every
/// prompt's variables and directory, and drew the prompt. Now the hook checks the
/// directory and socket before each connect and sends nothing there.
#[test]
fn the_zsh_hook_sends_nothing_to_a_planted_socket() {
    if !gate() || !tool_gate("zsh") || !tool_gate("tmux") {
        return;
    }
    let victim_dir = PathBuf::from(format!("/tmp/kernstat-{ZSH_VICTIM}"));
    let _ = std::fs::remove_dir_all(&victim_dir);
    let t = open_dir();
    let home = t.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::write(
        home.join(".zshrc"),
        format!(
            "eval \"$({} init zsh --keys aws.profile,var.x)\"\nsetopt prompt_subst\nPS1='<${{KS_AWS_PROFILE}}|${{KS_VAR_X}}>%# '\n",
            kernstat().display()
        ),
    )
    .unwrap();
    chown_r(&home, ZSH_VICTIM);
    let log = t.path().join("evil.log");
    let tmux_dir = t.path().join("tmux");
    std::fs::create_dir(&tmux_dir).unwrap();
    let pane = common::Pane::start(
        &tmux_dir,
        &home,
        &[],
        &[
            "setpriv",
            &format!("--reuid={ZSH_VICTIM}"),
            &format!("--regid={ZSH_VICTIM}"),
            "--clear-groups",
            "env",
            "-u",
            "XDG_RUNTIME_DIR",
            "KERNSTAT_NO_AUTOSTART=1",
            &format!("HOME={}", home.display()),
            "AWS_PROFILE=victim-prod-admin",
            "zsh",
            "-i",
        ],
    );
    pane.wait_prompt("%");
    // The attacker plants a directory and a socket where the victim's belong.
    let mut evil = Guard(
        as_uid(ATTACKER, &hostile_bin())
            .arg("listen")
            .arg(victim_dir.join("sock"))
            .arg(&log)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut ready = String::new();
    BufReader::new(evil.stdout.take().unwrap())
        .read_line(&mut ready)
        .unwrap();
    assert_eq!(ready.trim(), "ready");
    std::fs::write(&log, "").unwrap();
    std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o666)).unwrap();
    for _ in 0..5 {
        pane.send("export AWS_PROFILE=victim-prod-admin");
        std::thread::sleep(Duration::from_millis(200));
    }
    let screen = pane.screen();
    let _ = evil.kill();
    let _ = evil.wait();
    drop(pane);
    let _ = std::fs::remove_dir_all(&victim_dir);
    let logged = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(logged.is_empty(), "the planted socket received: {logged}");
    assert!(!screen.contains("ATTACKER"), "{screen}");
}

/// L1: values from a hostile repository or a put — ESC, BEL, C1 — reached the terminal
/// raw through get, eval, tsv and csv. Now they arrive as spaces (JSON escapes them).
#[test]
fn values_never_drive_the_terminal() {
    let d = common::DaemonProc::start(&["--no-bpf"]);
    let evil = "x\u{1b}]0;PWNED\u{7}\u{9b}2Jy";
    let o = command()
        .args(["put", "var.evil", evil, "--socket"])
        .arg(&d.sock)
        .output()
        .unwrap();
    assert!(o.status.success(), "{o:?}");
    for args in [
        vec!["get", "var.evil"],
        vec!["eval", "<{var.evil}>"],
        vec!["get", "var.evil", "load.one", "--format", "tsv"],
        vec!["get", "var.evil", "--format", "csv"],
        vec!["get", "var.evil", "--format", "shell"],
        vec!["get", "var.evil", "--format", "fish"],
    ] {
        let o = command()
            .args(&args)
            .arg("--socket")
            .arg(&d.sock)
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&o.stdout);
        assert!(out.contains("PWNED"), "{args:?}: {out:?}");
        assert!(
            !out.chars()
                .any(|c| c.is_control() && c != '\n' && c != '\t'),
            "{args:?}: {out:?}"
        );
    }
}

/// L3: root's user daemon started with another user's HOME loaded that user's config
/// and ran its script as root. Now a config that is not root's own is refused with a
/// sentence and its scripts never run.
#[test]
fn a_config_of_another_user_runs_nothing_as_root() {
    if !gate() {
        return;
    }
    let t = open_dir();
    let home = t.path().join("home");
    let cfg = home.join(".config/kernstat");
    std::fs::create_dir_all(&cfg).unwrap();
    let marker = t.path().join("ran-as-root");
    std::fs::write(
        cfg.join("config.toml"),
        format!(
            "[[script]]\nname = \"weather\"\ncommand = [\"touch\", \"{}\"]\n",
            marker.display()
        ),
    )
    .unwrap();
    chown_r(&home, ATTACKER);
    let sock = t.path().join("run/sock");
    let mut child = Guard(
        Command::new(kernstat())
            .args(["daemon", "--no-bpf", "--socket"])
            .arg(&sock)
            .env("HOME", &home)
            .env_remove("XDG_CONFIG_HOME")
            .env("XDG_RUNTIME_DIR", t.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let t0 = Instant::now();
    while !daemon_answers(&sock, "cpu.percent") {
        assert!(t0.elapsed() < Duration::from_secs(20));
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = command()
        .args(["get", "weather", "--socket"])
        .arg(&sock)
        .output()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: kill with a valid signal.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let mut err = String::new();
    use std::io::Read;
    child
        .0
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let _ = child.0.wait();
    assert!(!marker.exists(), "the script ran as root");
    assert!(
        err.contains(&format!("belongs to uid {ATTACKER}")) && err.contains("refusing"),
        "{err}"
    );
}

/// L4: 300 connections sending part of a request and reconnecting kept all 256 metrics
/// slots busy; 0 of 26 real scrapes got through. Now every one does.
#[test]
fn real_scrapes_get_through_clients_that_hold_slots() {
    if !gate() {
        return;
    }
    let d = common::MetricsDaemon::start("1", &["--no-bpf"]);
    let mut holders = Guard(
        as_uid(ATTACKER, &hostile_bin())
            .arg("hold")
            .arg(d.addr.to_string())
            .arg("300")
            .arg("12")
            .spawn()
            .unwrap(),
    );
    std::thread::sleep(Duration::from_secs(2));
    let (mut ok, mut failed) = (0, 0);
    for _ in 0..20 {
        let got = (|| -> std::io::Result<bool> {
            use std::io::Read;
            let mut s = std::net::TcpStream::connect(d.addr)?;
            s.set_read_timeout(Some(Duration::from_secs(5)))?;
            s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")?;
            let mut head = [0u8; 12];
            s.read_exact(&mut head)?;
            Ok(&head == b"HTTP/1.1 200")
        })();
        if got.unwrap_or(false) {
            ok += 1;
        } else {
            failed += 1;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let _ = holders.kill();
    let _ = holders.wait();
    assert_eq!((ok, failed), (20, 0), "real scrapes beside 300 holders");
}

/// L5: in the system daemon anyone could overwrite or delete anyone's `var.*`; now each
/// user has their own, and what root puts everyone sees.
#[test]
fn users_have_values_of_their_own_in_the_system_daemon() {
    if !gate() {
        return;
    }
    let d = SysDaemon::start(&[]);
    let put = |uid: u32, v: &str| {
        ask(
            uid,
            &d.sock,
            &[serde_json::json!({"op":"put","key":"var.deploy","data":v}).to_string()],
            5_000,
        )
    };
    put(VICTIM, "victim-v1");
    let del = ask(
        ATTACKER,
        &d.sock,
        &[r#"{"op":"put","key":"var.deploy","data":null}"#.to_string()],
        5_000,
    );
    assert!(del[0].contains("\"ok\":true"), "{del:?}");
    put(ATTACKER, "attacker");
    let v = ask(VICTIM, &d.sock, &[get("var.deploy", None)], 5_000);
    assert!(v[0].contains("victim-v1"), "{v:?}");
    let o = command()
        .args(["put", "var.motd", "from-root", "--socket"])
        .arg(&d.sock)
        .output()
        .unwrap();
    assert!(o.status.success());
    let v = ask(
        ATTACKER,
        &d.sock,
        &[get("var.motd", None), r#"{"op":"list"}"#.into()],
        5_000,
    );
    assert!(v[0].contains("from-root"), "{v:?}");
    assert!(!v[1].contains("victim"), "{v:?}");
}

/// L5 (hidepid): the world-readable system snapshot and the socket listed every
/// process to every user where /proc hides them. With /proc mounted hidepid=2 (in a
/// mount namespace of the test's own) the snapshot holds no per-process key and the
/// socket answers them to root only.
#[test]
fn hidden_processes_stay_hidden() {
    if !gate() || !tool_gate("unshare") {
        return;
    }
    let t = open_dir();
    let sock = t.path().join("sys/sock");
    let mut child = Guard(Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c"])
        .arg(format!(
            "mount -t proc -o hidepid=2 proc /proc && exec {} daemon --system --user nobody --no-bpf --interval 0.5 --socket {}",
            kernstat().display(),
            sock.display()
        ))
        .env("XDG_RUNTIME_DIR", common::private_runtime_dir())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap());
    let t0 = Instant::now();
    while !daemon_answers(&sock, "cpu.percent") {
        assert!(t0.elapsed() < Duration::from_secs(20), "no daemon");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(1200));
    let snap = std::fs::read(sock.with_file_name("snapshot")).unwrap();
    let snap = String::from_utf8_lossy(&snap);
    assert!(snap.contains("load.one"), "the machine's keys are there");
    for k in ["top.cpu", "top.mem", "summary"] {
        assert!(!snap.contains(k), "{k} in the world-readable snapshot");
    }
    let other = ask(
        VICTIM,
        &sock,
        &[get("top.cpu", None), get("load.one", None)],
        5_000,
    );
    assert!(other[0].contains("hidepid"), "{other:?}");
    assert!(other[1].contains("\"ok\":true"), "{other:?}");
    let root = ask(0, &sock, &[get("top.cpu", None)], 5_000);
    assert!(root[0].contains("\"ok\":true"), "{root:?}");
    let _ = child.kill();
    let _ = child.wait();
}
