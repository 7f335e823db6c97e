//! The prompt hooks in real shells: zsh and bash, interactive in a tmux pane of a
//! private tmux server, with a prompt that shows `KS_GIT_BRANCH` and a `var.` key the
//! test puts. The prompt follows `git checkout -b`, survives a daemon restart, and —
//! counted by the kernel through strace attached to the shell — draws new values
//! without forking. Also `kernstat session` on its own, fish's hook, and autostart (one
//! daemon for many clients at once, none with KERNSTAT_NO_AUTOSTART).

mod common;
use common::{command, daemon_answers, kernstat, private_runtime_dir, DaemonProc, Pane};

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn git(dir: &Path, args: &[&str]) {
    let st = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .status()
        .unwrap();
    assert!(st.success(), "git {args:?}");
}

fn repo(dir: &Path) -> PathBuf {
    let r = dir.join("repo");
    std::fs::create_dir_all(&r).unwrap();
    git(&r, &["init", "-q", "-b", "main"]);
    git(&r, &["commit", "-q", "--allow-empty", "-m", "first"]);
    r
}

/// strace attached to `pid` (and what it starts), recording process creation.
struct ForkTrace {
    child: Child,
    out: PathBuf,
}

impl ForkTrace {
    /// Detaches and returns the process creations it saw.
    fn finish(mut self) -> Vec<String> {
        // SAFETY: kill with a valid signal (SIGINT: strace detaches and exits).
        unsafe { libc::kill(self.child.id() as i32, libc::SIGINT) };
        let _ = self.child.wait();
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .filter(|l| {
                ["clone", "fork", "vfork"]
                    .iter()
                    .any(|c| l.contains(&format!("{c}(")))
            })
            .map(str::to_string)
            .collect()
    }
}

/// Attaches strace to `pid` and waits for its "Process N attached" line on stderr, so
/// that nothing the test does next happens before the tracer is there.
fn attach_tracer(pid: i32, out: PathBuf) -> ForkTrace {
    let mut child = Command::new("strace")
        .args(["-f", "-e", "trace=fork,vfork,clone,clone3", "-o"])
        .arg(&out)
        .args(["-p", &pid.to_string()])
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let t = Instant::now();
    while !line.contains("attached") {
        line.clear();
        assert!(
            err.read_line(&mut line).unwrap() > 0,
            "strace ended: {line}"
        );
        assert!(t.elapsed() < Duration::from_secs(10));
    }
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    ForkTrace { child, out }
}

/// The whole scenario for one shell, whose rc file `rc` evaluates kernstat's hook and
/// sets a prompt `<${KS_GIT_BRANCH}|${KS_VAR_RENDER}>`.
fn prompt_scenario(shell: &str, rc_name: &str, rc_body: &str, argv: &[&str]) {
    if !kernstat_testkit::tool_gate(shell)
        || !kernstat_testkit::tool_gate("tmux")
        || !kernstat_testkit::tool_gate("strace")
    {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut d = DaemonProc::start(&["--no-bpf"]);
    let sock = d.sock.clone();
    let r = repo(dir.path());
    let rc = dir.path().join(rc_name);
    std::fs::write(
        &rc,
        rc_body
            .replace("@KS@", kernstat().to_str().unwrap())
            .replace("@SOCK@", sock.to_str().unwrap()),
    )
    .unwrap();
    let argv: Vec<String> = argv
        .iter()
        .map(|a| a.replace("@RC@", rc.to_str().unwrap()))
        .collect();
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let zdotdir = dir.path().to_str().unwrap().to_string();
    let pane = Pane::start(dir.path(), &r, &[("ZDOTDIR", &zdotdir)], &argv);

    pane.wait_prompt("<main|>");
    d.put("var.render", "one");
    pane.send("");
    pane.wait_prompt("<main|one>");

    // New values, drawn with no process created: the kernel's count via strace.
    let trace = attach_tracer(pane.shell_pid(), dir.path().join(format!("{shell}.trace")));
    d.put("var.render", "two");
    for _ in 0..3 {
        pane.send("");
    }
    pane.wait_prompt("<main|two>");
    for _ in 0..3 {
        pane.send("");
    }
    pane.wait_prompt("<main|two>");
    let forks = trace.finish();
    assert!(
        forks.is_empty(),
        "{shell} forked while drawing prompts: {forks:?}"
    );

    // The branch follows a checkout.
    pane.send("git checkout -q -b feature");
    pane.wait_prompt("<feature|two>");

    // The daemon restarts: the hook finds the new one.
    d = d.restart();
    d.put("var.render", "three");
    pane.send("");
    pane.wait_prompt("<feature|three>");
    pane.send("git checkout -q -b third");
    pane.wait_prompt("<third|three>");
    pane.send("exit");
    let _ = d.stop();
}

#[test]
fn zsh_prompt_follows_the_branch_survives_a_restart_and_forks_nothing() {
    prompt_scenario(
        "zsh",
        ".zshrc",
        "eval \"$('@KS@' init zsh --socket '@SOCK@' --keys git.branch,var.render)\"\n\
         setopt prompt_subst\n\
         PS1='<${KS_GIT_BRANCH}|${KS_VAR_RENDER}>%# '\n",
        &["zsh", "-d", "-i"],
    );
}

#[test]
fn bash_prompt_follows_the_branch_survives_a_restart_and_forks_nothing() {
    prompt_scenario(
        "bash",
        "bashrc",
        "eval \"$('@KS@' init bash --socket '@SOCK@' --keys git.branch,var.render)\"\n\
         PS1='<${KS_GIT_BRANCH}|${KS_VAR_RENDER}>\\$ '\n",
        &["bash", "--noprofile", "--rcfile", "@RC@", "-i"],
    );
}

#[test]
fn fish_sets_the_values_before_each_prompt() {
    if !kernstat_testkit::tool_gate("fish") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = DaemonProc::start(&["--no-bpf"]);
    let sock = d.sock.clone();
    let r = repo(dir.path());
    d.put("var.fish", "a b");
    let out = Command::new("fish")
        .args(["--no-config", "-c"])
        .arg(format!(
            "{} init fish --socket {} --keys git.branch,var.fish,load.one | source; \
             emit fish_prompt; echo \"[$KS_GIT_BRANCH][$KS_VAR_FISH]\"; \
             git checkout -q -b other; \
             for i in (seq 200); emit fish_prompt; test \"$KS_GIT_BRANCH\" = other; and break; sleep 0.05; end; \
             echo \"[$KS_GIT_BRANCH]\"",
            kernstat().display(),
            sock.display()
        ))
        .current_dir(&r)
        .env("XDG_RUNTIME_DIR", private_runtime_dir())
        .env("HOME", dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "[main][a b]\n[other]\n"
    );
    let _ = d.stop();
}

/// `kernstat session` speaks its line protocol: values for the directory sent, the
/// variables sent (a context under another KUBECONFIG), empty lines for keys without a
/// value, and it carries on across a daemon restart.
#[test]
fn session_answers_lines_follows_env_and_survives_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let mut d = DaemonProc::start(&["--no-bpf"]);
    let sock = d.sock.clone();
    let r = repo(dir.path());
    let kube = dir.path().join("kubeconfig");
    std::fs::write(
        &kube,
        "apiVersion: v1\nkind: Config\ncurrent-context: prod\ncontexts:\n- name: prod\n  context: {cluster: c, user: u}\n",
    )
    .unwrap();
    let mut s = command()
        .args(["session", "--socket"])
        .arg(&sock)
        .current_dir("/")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = s.stdin.take().unwrap();
    let mut output = BufReader::new(s.stdout.take().unwrap());
    let mut ask = |line: String, n: usize| -> Vec<String> {
        input.write_all(line.as_bytes()).unwrap();
        input.flush().unwrap();
        (0..n)
            .map(|_| {
                let mut l = String::new();
                output.read_line(&mut l).unwrap();
                l.trim_end_matches('\n').to_string()
            })
            .collect()
    };
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    let got = ask(
        format!(
            "get\t{}\tgit.branch\tuname.release\tbattery.nope\tkubecontext.context\n",
            r.display()
        ),
        4,
    );
    assert_eq!(got, ["main", release.trim(), "", ""]);
    let got = ask(
        format!(
            "env\tKUBECONFIG\t{}\nget\t/\tkubecontext.context\tgit.branch\n",
            kube.display()
        ),
        2,
    );
    assert_eq!(got, ["prod", ""], "a context under the variable sent");
    let got = ask("env\tKUBECONFIG\nget\t/\tkubecontext.context\n".into(), 1);
    assert_eq!(got, [""], "unset again");
    d = d.restart();
    d.put("var.after", "restart");
    let got = ask(format!("get\t{}\tvar.after\tgit.branch\n", r.display()), 2);
    assert_eq!(got, ["restart", "main"]);
    drop(input);
    assert!(s.wait().unwrap().success());
    let _ = d.stop();
}

/// The `kernstat daemon` processes whose runtime directory is `rt` (started by
/// autostart for this test, found through their environment).
fn daemons_in(rt: &Path) -> Vec<i32> {
    let want = format!("XDG_RUNTIME_DIR={}", rt.display());
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            let cmd = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let env = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
            cmd.split(|&b| b == 0).nth(1) == Some(b"daemon")
                && env.split(|&b| b == 0).any(|v| v == want.as_bytes())
        })
        .collect()
}

/// SIGKILLs, when dropped, every daemon started in a runtime directory.
struct Reaper(PathBuf);

impl Drop for Reaper {
    fn drop(&mut self) {
        for pid in daemons_in(&self.0) {
            // SAFETY: kill with a valid signal.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// With no daemon, many `get`s at once start exactly one (the lock), which then
/// answers; with KERNSTAT_NO_AUTOSTART=1 none is started.
#[test]
fn autostart_starts_one_user_daemon_for_many_clients() {
    let rt = tempfile::tempdir().unwrap();
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(rt.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    let sock = rt.path().join("kernstat/sock");
    // Whatever happens below, no daemon of this test outlives it.
    let _reaper = Reaper(rt.path().to_path_buf());
    let get = |off: bool| {
        let mut c = command();
        c.args(["get", "uname.release"])
            .env("XDG_RUNTIME_DIR", rt.path())
            .env("XDG_CONFIG_HOME", rt.path().join("config"))
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        if off {
            c.env("KERNSTAT_NO_AUTOSTART", "1");
        } else {
            c.env_remove("KERNSTAT_NO_AUTOSTART");
        }
        c
    };
    let out = get(true).output().unwrap();
    assert!(out.status.success());
    assert!(!sock.exists(), "KERNSTAT_NO_AUTOSTART=1 started a daemon");

    let clients: Vec<Child> = (0..8).map(|_| get(false).spawn().unwrap()).collect();
    let mut said = String::new();
    for c in clients {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success(), "{out:?}");
        said.push_str(&String::from_utf8_lossy(&out.stderr));
    }
    assert!(said.contains("started the user daemon"), "{said}");
    let daemons = || daemons_in(rt.path());
    let t = Instant::now();
    while !daemon_answers(&sock, "uname.release") {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "the started daemon never answered"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let found = daemons();
    assert_eq!(found.len(), 1, "one daemon for eight clients: {found:?}");
    // Another client now is answered by it, and starts nothing.
    let out = get(false).output().unwrap();
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(daemons(), found);
    // SAFETY: kill with a valid signal.
    unsafe { libc::kill(found[0], libc::SIGTERM) };
    let t = Instant::now();
    while !daemons().is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "the daemon did not stop"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The prompt drawn right after a command that changed the repository is never one
/// command behind: after each of ten `git checkout -b`, the very next prompt shows the
/// new branch; after `git add` the next one shows it dirty, after `git commit` clean.
/// No Enter is pressed in between: the prompt checked is the one the shell drew when
/// the command ended (the line after the command's own marker). zsh asks the daemon
/// over its socket (which compares the repository's stamps before answering from its
/// cache); bash's session reads the snapshot, whose stamps it compares itself.
fn every_prompt_current(shell: &str, rc_name: &str, rc_body: &str, argv: &[&str]) {
    if !kernstat_testkit::tool_gate(shell) || !kernstat_testkit::tool_gate("tmux") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = DaemonProc::start(&["--no-bpf"]);
    let r = repo(dir.path());
    let rc = dir.path().join(rc_name);
    std::fs::write(
        &rc,
        rc_body
            .replace("@KS@", kernstat().to_str().unwrap())
            .replace("@SOCK@", d.sock.to_str().unwrap()),
    )
    .unwrap();
    let argv: Vec<String> = argv
        .iter()
        .map(|a| a.replace("@RC@", rc.to_str().unwrap()))
        .collect();
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let zdotdir = dir.path().to_str().unwrap().to_string();
    let git_env = [
        ("ZDOTDIR", zdotdir.as_str()),
        ("GIT_AUTHOR_NAME", "t"),
        ("GIT_AUTHOR_EMAIL", "t@example.invalid"),
        ("GIT_COMMITTER_NAME", "t"),
        ("GIT_COMMITTER_EMAIL", "t@example.invalid"),
    ];
    let pane = Pane::start(dir.path(), &r, &git_env, &argv);
    pane.wait_prompt("<main|false>");
    // The prompt the shell drew after the line that says `marker` (never pressing Enter).
    let after = |marker: &str| -> String {
        let t = Instant::now();
        loop {
            let screen = pane.screen();
            let lines: Vec<&str> = screen.lines().collect();
            if let Some(i) = lines.iter().rposition(|l| l.trim() == marker) {
                if let Some(p) = lines[i + 1..].iter().find(|l| l.starts_with('<')) {
                    return p.to_string();
                }
            }
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "no prompt after {marker}:\n{screen}"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let mut right = 0;
    for i in 1..=10 {
        pane.send(&format!("clear; git checkout -q -b b{i}; echo M{i}"));
        let p = after(&format!("M{i}"));
        assert!(
            p.starts_with(&format!("<b{i}|")),
            "{shell}: after checkout {i}: {p}"
        );
        right += 1;
    }
    assert_eq!(right, 10);
    pane.send("clear; echo x > f; git add f; echo ADDED");
    let p = after("ADDED");
    assert!(p.starts_with("<b10|true>"), "{shell}: after git add: {p}");
    pane.send("clear; git commit -qm f; echo COMMITTED");
    let p = after("COMMITTED");
    assert!(
        p.starts_with("<b10|false>"),
        "{shell}: after git commit: {p}"
    );
    // An edit in the work tree alone (no git command): the index, HEAD and refs do
    // not move, the file does.
    for i in 1..=10 {
        pane.send(&format!("clear; echo x{i} >> f; echo EDITED{i}"));
        let p = after(&format!("EDITED{i}"));
        assert!(p.starts_with("<b10|true>"), "{shell}: after edit {i}: {p}");
        pane.send(&format!("clear; git checkout -q -- f; echo RESTORED{i}"));
        let p = after(&format!("RESTORED{i}"));
        assert!(
            p.starts_with("<b10|false>"),
            "{shell}: after restore {i}: {p}"
        );
    }
    pane.send("exit");
    drop(d);
}

#[test]
fn zsh_prompt_is_never_one_command_behind() {
    every_prompt_current(
        "zsh",
        ".zshrc",
        "eval \"$('@KS@' init zsh --socket '@SOCK@' --keys git.branch,git.dirty)\"\n\
         setopt prompt_subst\n\
         PS1='<${KS_GIT_BRANCH}|${KS_GIT_DIRTY}>%# '\n",
        &["zsh", "-d", "-i"],
    );
}

#[test]
fn bash_prompt_is_never_one_command_behind() {
    every_prompt_current(
        "bash",
        "bashrc",
        "eval \"$('@KS@' init bash --socket '@SOCK@' --keys git.branch,git.dirty)\"\n\
         PS1='<${KS_GIT_BRANCH}|${KS_GIT_DIRTY}>\\$ '\n",
        &["bash", "--noprofile", "--rcfile", "@RC@", "-i"],
    );
}

/// With `prompt_subst`, a `%` in a value is a prompt escape unless the prompt doubles
/// it, as the README's does (`${VAR//\%/%%}`): a value `%F{red}x` is drawn as it is.
#[test]
fn zsh_prompt_draws_percent_signs_as_they_are() {
    if !kernstat_testkit::tool_gate("zsh") || !kernstat_testkit::tool_gate("tmux") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = DaemonProc::start(&["--no-bpf"]);
    d.put("var.p", "%F{red}x%#");
    std::fs::write(
        dir.path().join(".zshrc"),
        format!(
            "eval \"$('{}' init zsh --socket '{}' --keys var.p)\"\nsetopt prompt_subst\nPS1='<${{KS_VAR_P//\\%/%%}}>%# '\n",
            kernstat().display(),
            d.sock.display()
        ),
    )
    .unwrap();
    let zdotdir = dir.path().to_str().unwrap().to_string();
    let pane = Pane::start(
        dir.path(),
        dir.path(),
        &[("ZDOTDIR", &zdotdir)],
        &["zsh", "-d", "-i"],
    );
    pane.wait_prompt("<%F{red}x%#>");
    pane.send("exit");
}
