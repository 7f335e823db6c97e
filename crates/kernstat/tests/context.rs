//! The context keys as a shell uses them: `kernstat get` sends exactly the variables
//! the providers read (here from a fake home), several keys in one call, every output
//! format, `eval` templates, exit statuses, the same answers without a daemon; and
//! `sudo.active` against real sudo (a user made for the test, a password typed into
//! `sudo -S -v`, then `sudo -k`) from a daemon running as root.

mod common;
use common::{command, kernstat, DaemonProc};

use std::path::Path;
use std::process::{Command, Output};

use kernstat_daemon::providers::context::PROVIDERS;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// kernstat with none of this machine's context variables, and `env` instead.
fn ks(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = command();
    for p in PROVIDERS {
        for v in p.env {
            c.env_remove(v);
        }
    }
    c.envs(env.iter().copied()).args(args).output().unwrap()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

struct FakeHome {
    dir: tempfile::TempDir,
}

impl FakeHome {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let h = dir.path();
        write(
            &h.join(".kube/config"),
            "apiVersion: v1\ncontexts:\n- context:\n    cluster: c1\n    namespace: team-x\n    user: alice\n  name: prod\ncurrent-context: prod\nkind: Config\n",
        );
        write(
            &h.join(".aws/config"),
            "[default]\nregion = eu-west-1\n[profile dev]\nregion = us-east-2\n",
        );
        write(&h.join("proj/.tool-versions"), "nodejs 20.11.0\n");
        FakeHome { dir }
    }

    fn home(&self) -> &str {
        self.dir.path().to_str().unwrap()
    }

    fn proj(&self) -> String {
        self.dir.path().join("proj").to_str().unwrap().to_string()
    }
}

#[test]
fn several_keys_every_format_and_eval_with_the_shells_variables() {
    let d = DaemonProc::start(&["--no-bpf"]);
    let sock = d.sock.to_str().unwrap().to_string();
    let h = FakeHome::new();
    let proj = h.proj();
    let env = [("HOME", h.home()), ("AWS_PROFILE", "dev")];
    let keys = [
        "kubecontext.context",
        "aws.region",
        "asdf.nodejs",
        "uname.sysname",
    ];
    let with = |extra: &[&str]| {
        let mut a = vec!["get"];
        a.extend_from_slice(&keys);
        a.extend_from_slice(&["--path", &proj, "--socket", &sock]);
        a.extend_from_slice(extra);
        a.iter().map(|s| s.to_string()).collect::<Vec<_>>()
    };
    let run = |args: Vec<String>| {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        ks(&a, &env)
    };
    let o = run(with(&[]));
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_eq!(out(&o), "prod\nus-east-2\n20.11.0\nLinux\n");
    let o = run(with(&["--format", "shell"]));
    assert_eq!(
        out(&o),
        "KS_KUBECONTEXT_CONTEXT='prod'\nKS_AWS_REGION='us-east-2'\nKS_ASDF_NODEJS='20.11.0'\nKS_UNAME_SYSNAME='Linux'\n"
    );
    let o = run(with(&["--format", "json"]));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["aws.region"], "us-east-2");
    assert_eq!(v["kubecontext.context"], "prod");
    let o = run(with(&["--format", "csv"]));
    assert!(
        out(&o).starts_with("kubecontext.context,prod\naws.region,us-east-2\n"),
        "{o:?}"
    );
    let o = run(with(&["--format", "tsv"]));
    assert!(out(&o).contains("asdf.nodejs\t20.11.0\n"), "{o:?}");

    // A provider's name: all its fields.
    let o = ks(&["get", "kubecontext", "--socket", &sock], &env);
    assert_eq!(
        out(&o),
        "cluster=c1\ncontext=prod\nnamespace=team-x\nuser=alice\n"
    );
    // A template in one call.
    let o = ks(
        &["eval", "{kubecontext.context}:{kubecontext.namespace} {{aws}} {aws.profile}/{aws.region} {asdf.ruby}.", "--path", &proj, "--socket", &sock],
        &env,
    );
    assert_eq!(out(&o), "prod:team-x {aws} dev/us-east-2 .\n", "{o:?}");
    assert_eq!(o.status.code(), Some(0));
    let o = ks(&["eval", "{oops", "--socket", &sock], &env);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("byte 0"),
        "{o:?}"
    );

    // Exit statuses: one key without a value → 1; an unknown key → 2.
    let o = ks(
        &[
            "get",
            "asdf.nodejs",
            "asdf.ruby",
            "--path",
            &proj,
            "--socket",
            &sock,
        ],
        &env,
    );
    assert_eq!(o.status.code(), Some(1), "{o:?}");
    assert_eq!(out(&o), "20.11.0\n\n");
    let o = ks(&["get", "aws.region", "no.such", "--socket", &sock], &env);
    assert_eq!(o.status.code(), Some(2), "{o:?}");

    // Another shell, other variables, other answers, from the same daemon.
    let o = ks(
        &["get", "aws.region", "--socket", &sock],
        &[("HOME", h.home())],
    );
    assert_eq!(out(&o), "eu-west-1\n");

    // Without a daemon: the same answers, computed here, and said so.
    let gone = d.dir.path().join("none/sock");
    let o = ks(
        &[
            "get",
            "kubecontext.context",
            "aws.region",
            "asdf.nodejs",
            "--path",
            &proj,
            "--socket",
            gone.to_str().unwrap(),
            "--format",
            "shell",
        ],
        &env,
    );
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    assert_eq!(
        out(&o),
        "KS_KUBECONTEXT_CONTEXT='prod'\nKS_AWS_REGION='us-east-2'\nKS_ASDF_NODEJS='20.11.0'\n"
    );
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("computed directly"),
        "{o:?}"
    );
}

/// A login made for one test, removed with its sudo rule and timestamps after.
struct TestUser {
    name: String,
}

impl TestUser {
    fn new(password: &str) -> Self {
        let name = format!("ks-sudo-{}", std::process::id() % 100_000);
        let _ = Command::new("userdel").arg(&name).output();
        assert!(Command::new("useradd")
            .args(["-M", "-s", "/bin/sh", &name])
            .status()
            .unwrap()
            .success());
        let mut c = Command::new("chpasswd")
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        use std::io::Write;
        c.stdin
            .take()
            .unwrap()
            .write_all(format!("{name}:{password}\n").as_bytes())
            .unwrap();
        assert!(c.wait().unwrap().success());
        write(
            Path::new(&format!("/etc/sudoers.d/{name}")),
            &format!("{name} ALL=(ALL) ALL\n"),
        );
        TestUser { name }
    }
}

impl TestUser {
    /// A command run as this user (its own uid, gid and groups).
    fn command(&self) -> Command {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid",
            &self.name,
            "--regid",
            &self.name,
            "--init-groups",
        ]);
        c
    }
}

impl Drop for TestUser {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(format!("/etc/sudoers.d/{}", self.name));
        for dir in kernstat_daemon::providers::context::sudo::TS_DIRS {
            let _ = std::fs::remove_file(Path::new(dir).join(&self.name));
        }
        let _ = Command::new("userdel").arg(&self.name).output();
    }
}

#[test]
fn sudo_active_follows_sudo_v_and_sudo_k() {
    if !kernstat_testkit::gate("root", unsafe { libc::geteuid() } == 0, || {
        "not root".into()
    }) || !kernstat_testkit::tool_gate("sudo")
        || !kernstat_testkit::tool_gate("setpriv")
    {
        return;
    }
    let user = TestUser::new("ks-Secret-42");
    // A daemon that keeps uid 0 (without capabilities): sudo's timestamps are root's.
    let d = DaemonProc::start(&["--no-bpf", "--system", "--user", "root"]);
    let sock = d.sock.to_str().unwrap();
    let ks = kernstat().to_str().unwrap();
    // One shell: before, after `sudo -v`, after `sudo -k` — at once (sudo keys are read
    // afresh on every request) — and from a command substitution's subshell.
    let script = format!(
        "get() {{ {ks} get sudo.active --socket {sock}; }}\n\
         get\n\
         echo ks-Secret-42 | sudo -S -v 2>/dev/null || echo sudo-failed\n\
         get\n\
         {ks} get sudo.expires_in_s --socket {sock}\n\
         v=$(get)\n\
         echo \"$v\"\n\
         sudo -k\n\
         get\n"
    );
    let o = user.command().args(["sh", "-c", &script]).output().unwrap();
    let text = out(&o);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{o:?}");
    assert_eq!(lines[0], "false", "{o:?}");
    assert_eq!(lines[1], "true", "{o:?}");
    let left: u64 = lines[2].parse().unwrap();
    assert!(
        (1..=900).contains(&left),
        "sudo's default 15 minutes: {left}"
    );
    assert_eq!(
        lines[3], "true",
        "from $(...), a subshell of the shell: {o:?}"
    );
    assert_eq!(lines[4], "false", "right after sudo -k: {o:?}");
    // Credentials belong to the shell that authenticated (its pid and start time, as
    // sudo records them): the same user asking from elsewhere, while they are valid,
    // has none.
    let script = format!(
        "echo ks-Secret-42 | sudo -S -v 2>/dev/null; {ks} get sudo.active --socket {sock}; sleep 2"
    );
    let mut shell = user
        .command()
        .args(["sh", "-c", &script])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    {
        use std::io::BufRead;
        let mut r = std::io::BufReader::new(shell.stdout.take().unwrap());
        r.read_line(&mut first).unwrap();
    }
    assert_eq!(first, "true\n");
    let o = user
        .command()
        .args([ks, "get", "sudo.active", "--socket", sock])
        .output()
        .unwrap();
    assert_eq!(out(&o), "false\n", "{o:?}");
    let _ = shell.wait();
}

#[test]
fn a_daemon_of_another_user_reads_only_what_the_asker_may() {
    if !kernstat_testkit::gate("root", unsafe { libc::geteuid() } == 0, || {
        "not root".into()
    }) || !kernstat_testkit::tool_gate("setpriv")
    {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let d = DaemonProc::start(&["--no-bpf", "--system", "--user", "root"]);
    let sock = d.sock.to_str().unwrap();
    let t = tempfile::tempdir().unwrap();
    std::fs::set_permissions(t.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let kubeconfig = "contexts:\n- context:\n    namespace: n\n  name: secret-ctx\ncurrent-context: secret-ctx\n";
    let private = t.path().join("private");
    let public = t.path().join("public");
    write(&private, kubeconfig);
    write(&public, &kubeconfig.replace("secret-ctx", "open-ctx"));
    std::fs::set_permissions(&private, std::fs::Permissions::from_mode(0o600)).unwrap();
    std::fs::set_permissions(&public, std::fs::Permissions::from_mode(0o644)).unwrap();
    let ask = |file: &Path| {
        common::as_nobody()
            .args(["get", "kubecontext.context", "--socket", sock])
            .env("KUBECONFIG", file)
            .output()
            .unwrap()
    };
    let o = ask(&public);
    assert_eq!(out(&o), "open-ctx\n", "{o:?}");
    let o = ask(&private);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not readable by uid 65534"),
        "{o:?}"
    );
    // Root itself is answered.
    let o = ks(
        &["get", "kubecontext.context", "--socket", sock],
        &[("KUBECONFIG", private.to_str().unwrap())],
    );
    assert_eq!(out(&o), "secret-ctx\n", "{o:?}");
}

#[test]
fn a_config_typo_is_one_sentence_naming_the_line() {
    let t = tempfile::tempdir().unwrap();
    let file = t.path().join("config.toml");
    std::fs::write(
        &file,
        "[providers]\ndisabled = [\"sudo\"]\n\n[[script]]\nname = \"w\"\ncomand = [\"true\"]\n",
    )
    .unwrap();
    let sock = t.path().join("sock");
    let o = command()
        .args([
            "daemon",
            "--no-bpf",
            "--config",
            file.to_str().unwrap(),
            "--socket",
            sock.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.starts_with("kernstat daemon: config "), "{err}");
    assert!(err.contains("line 6") && err.contains("comand"), "{err}");
    assert!(!sock.exists(), "nothing was bound");
}
