//! The context providers through a live daemon, on fake home directories laid out as
//! the tools themselves leave them — made by the tools where Debian has them (kubectl,
//! direnv, python's venv) and compared with the tools' own answers; gcloud's layout as
//! gcloud 528 writes it (no Debian package). Each value checked; changes arrive through
//! inotify (the poll is 30 s, the waits here 10 s).

mod common;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{ask, session, start, start_with, wait_for, TestDaemon};
use kernstat_client::Session;
use kernstat_daemon::Config;
use serde_json::{json, Value};

/// A `get` with a path and an environment, as `kernstat get` sends it.
fn get(s: &mut Session, key: &str, path: Option<&Path>, env: &[(&str, &str)]) -> Value {
    let mut req = json!({"op": "get", "key": key});
    if let Some(p) = path {
        req["path"] = json!(p);
    }
    req["env"] = json!(env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect::<std::collections::BTreeMap<_, _>>());
    ask(s, &req.to_string())
}

fn data(v: &Value) -> &Value {
    assert_eq!(v["ok"], true, "{v}");
    &v["data"]
}

/// Runs a tool with `env`, returning its trimmed stdout.
fn tool(program: &str, args: &[&str], cwd: &Path, env: &[(&str, &str)]) -> String {
    let out = Command::new(program)
        .args(args)
        .current_dir(cwd)
        .envs(env.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Asks until the value is `want` (a change arriving through inotify).
fn until(d: &TestDaemon, key: &str, path: Option<&Path>, env: &[(&str, &str)], want: Value) {
    let mut s = session(d);
    let t0 = Instant::now();
    let mut last = Value::Null;
    while t0.elapsed() < Duration::from_secs(10) {
        last = get(&mut s, key, path, env);
        if last["data"] == want {
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("{key} never became {want}; last {last}");
}

#[test]
fn kubecontext_agrees_with_kubectl_across_two_files_and_follows_use_context() {
    if !kernstat_testkit::tool_gate("kubectl") {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let (a, b) = (h.join("a.yaml"), h.join("b.yaml"));
    let (a_s, b_s) = (a.to_str().unwrap(), b.to_str().unwrap());
    let hs = h.to_str().unwrap();
    let kubectl =
        |kc: &str, args: &[&str]| tool("kubectl", args, h, &[("HOME", hs), ("KUBECONFIG", kc)]);
    kubectl(
        a_s,
        &[
            "config",
            "set-cluster",
            "c1",
            "--server=https://10.0.0.1:6443",
        ],
    );
    kubectl(
        a_s,
        &[
            "config",
            "set-cluster",
            "c2",
            "--server=https://10.0.0.2:6443",
        ],
    );
    // (Debian's kubectl 1.20 crashes in `set-credentials`; `set` writes the same entry.)
    for user in ["alice", "bob"] {
        kubectl(a_s, &["config", "set", &format!("users.{user}.token"), "t"]);
    }
    kubectl(
        a_s,
        &[
            "config",
            "set-context",
            "prod",
            "--cluster=c1",
            "--user=alice",
            "--namespace=team-x",
        ],
    );
    kubectl(
        a_s,
        &["config", "set-context", "dev", "--cluster=c1", "--user=bob"],
    );
    kubectl(a_s, &["config", "use-context", "prod"]);
    kubectl(
        b_s,
        &[
            "config",
            "set-context",
            "other",
            "--cluster=c2",
            "--user=bob",
            "--namespace=ns-b",
        ],
    );
    kubectl(
        b_s,
        &["config", "set-context", "prod", "--namespace=shadowed"],
    );
    kubectl(b_s, &["config", "use-context", "other"]);

    let d = start();
    let mut s = session(&d);
    for list in [format!("{a_s}:{b_s}"), format!("{b_s}:{a_s}")] {
        let env = [("HOME", hs), ("KUBECONFIG", list.as_str())];
        let whole = get(&mut s, "kubecontext", None, &env);
        let want_ctx = kubectl(&list, &["config", "current-context"]);
        let ns = kubectl(
            &list,
            &["config", "view", "--minify", "-o", "jsonpath={..namespace}"],
        );
        let want_ns = if ns.is_empty() {
            "default".to_string()
        } else {
            ns
        };
        assert_eq!(
            data(&whole)["context"],
            want_ctx.as_str(),
            "KUBECONFIG={list}"
        );
        assert_eq!(
            data(&whole)["namespace"],
            want_ns.as_str(),
            "KUBECONFIG={list}"
        );
    }

    // kubectl use-context writes the first file; the daemon sees it without a poll.
    let list = format!("{a_s}:{b_s}");
    let env = [("HOME", hs), ("KUBECONFIG", list.as_str())];
    let (first_tx, first_rx) = std::sync::mpsc::channel();
    let watcher = std::thread::spawn({
        let sock = d.sock.clone();
        let list = list.clone();
        let hs = hs.to_string();
        move || {
            let s = Session::connect(&sock).unwrap();
            s.set_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut env = std::collections::BTreeMap::new();
            env.insert("HOME".to_string(), hs);
            env.insert("KUBECONFIG".to_string(), list);
            let q = kernstat_client::Query {
                key: "kubecontext.context",
                path: None,
                env: Some(&env),
            };
            let mut w = s.watch_query(&q).unwrap();
            let first = w.next().unwrap().unwrap();
            first_tx.send(first.data).unwrap();
            // kubectl rewrites the file in place (truncate, write): a read between the
            // two may publish a passing value; the stream must reach the new context.
            loop {
                let v = w.next().unwrap().unwrap().data;
                if v == Some(json!("dev")) {
                    return v;
                }
            }
        }
    });
    // The change is made only once the stream has its first value.
    let first = first_rx.recv_timeout(Duration::from_secs(10)).unwrap();
    assert_eq!(first, Some(json!("prod")));
    kubectl(&list, &["config", "use-context", "dev"]);
    let second = watcher.join().unwrap();
    assert_eq!(second, Some(json!("dev")));
    let v = get(&mut s, "kubecontext.namespace", None, &env);
    assert_eq!(
        data(&v),
        "default",
        "dev sets no namespace: kubectl's default"
    );
    assert_eq!(kubectl(&list, &["config", "current-context"]), "dev");

    // No kubeconfig at all: no value, not an error.
    let empty = tempfile::tempdir().unwrap();
    let v = get(
        &mut s,
        "kubecontext.context",
        None,
        &[("HOME", empty.path().to_str().unwrap())],
    );
    assert_eq!(v["code"], "no_data", "{v}");
}

#[test]
fn gcloud_two_configurations_as_gcloud_writes_them() {
    let home = tempfile::tempdir().unwrap();
    let g = home.path().join(".config/gcloud");
    // As gcloud 528 leaves them after `gcloud config set project proj-one` and
    // `gcloud config configurations create work` + two `config set --configuration work`.
    write(&g.join("active_config"), "default");
    write(
        &g.join("configurations/config_default"),
        "[core]\nproject = proj-one\n\n",
    );
    write(
        &g.join("configurations/config_work"),
        "[core]\naccount = a@b.c\nproject = p-work\n\n",
    );
    let hs = home.path().to_str().unwrap();
    let d = start();
    let mut s = session(&d);
    let v = get(&mut s, "gcloud", None, &[("HOME", hs)]);
    assert_eq!(
        *data(&v),
        json!({"configuration": "default", "project": "proj-one", "account": null})
    );
    let v = get(
        &mut s,
        "gcloud",
        None,
        &[("HOME", hs), ("CLOUDSDK_ACTIVE_CONFIG_NAME", "work")],
    );
    assert_eq!(
        *data(&v),
        json!({"configuration": "work", "project": "p-work", "account": "a@b.c"})
    );
    let v = get(
        &mut s,
        "gcloud.project",
        None,
        &[("HOME", hs), ("CLOUDSDK_CORE_PROJECT", "over")],
    );
    assert_eq!(*data(&v), "over");
    // `gcloud config configurations activate work` rewrites active_config.
    write(&g.join("active_config"), "work");
    until(&d, "gcloud.account", None, &[("HOME", hs)], json!("a@b.c"));
    let v = get(
        &mut s,
        "gcloud.project",
        None,
        &[("CLOUDSDK_CONFIG", g.to_str().unwrap())],
    );
    assert_eq!(*data(&v), "p-work", "CLOUDSDK_CONFIG names the directory");
}

#[test]
fn aws_profile_and_region_from_the_environment_and_the_config() {
    let home = tempfile::tempdir().unwrap();
    write(
        &home.path().join(".aws/config"),
        "[default]\nregion = eu-west-1\noutput = json\n\n[profile dev]\nregion = us-east-2\n",
    );
    let hs = home.path().to_str().unwrap();
    let d = start();
    let mut s = session(&d);
    let v = get(&mut s, "aws", None, &[("HOME", hs)]);
    assert_eq!(
        *data(&v),
        json!({"profile": "default", "region": "eu-west-1", "profile_exists": true})
    );
    let v = get(&mut s, "aws", None, &[("HOME", hs), ("AWS_PROFILE", "dev")]);
    assert_eq!(
        *data(&v),
        json!({"profile": "dev", "region": "us-east-2", "profile_exists": true})
    );
    let v = get(
        &mut s,
        "aws.region",
        None,
        &[
            ("HOME", hs),
            ("AWS_PROFILE", "dev"),
            ("AWS_REGION", "ap-south-1"),
        ],
    );
    assert_eq!(*data(&v), "ap-south-1");
    let v = get(&mut s, "aws", None, &[("HOME", hs), ("AWS_VAULT", "gone")]);
    assert_eq!(
        *data(&v),
        json!({"profile": "gone", "region": null, "profile_exists": false})
    );
    let v = get(&mut s, "aws.profile", None, &[("HOME", "/nonexistent")]);
    assert_eq!(v["code"], "no_data", "no AWS here: {v}");
}

#[test]
fn python_venv_made_by_python_and_version_files() {
    if !kernstat_testkit::tool_gate("python3") {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let proj = root.path().join("proj");
    let sub = proj.join("src/pkg");
    std::fs::create_dir_all(&sub).unwrap();
    tool(
        "python3",
        &["-m", "venv", "--without-pip", ".venv"],
        &proj,
        &[],
    );
    write(
        &proj.join("pyproject.toml"),
        "[project]\nname = \"x\"\nrequires-python = \">=3.9\"\n",
    );
    let version = tool(
        proj.join(".venv/bin/python").to_str().unwrap(),
        &["-c", "import platform; print(platform.python_version())"],
        &proj,
        &[],
    );
    let d = start();
    let mut s = session(&d);
    let v = get(&mut s, "python", Some(&sub), &[]);
    assert_eq!(
        *data(&v),
        json!({
            "venv": proj.join(".venv"),
            "venv_name": ".venv",
            "version": version,
            "requires": ">=3.9",
        })
    );
    // An activated venv elsewhere wins, with activate's prompt.
    let other = root.path().join("other");
    std::fs::create_dir_all(&other).unwrap();
    tool(
        "python3",
        &["-m", "venv", "--without-pip", "--prompt", "tools", "env"],
        &other,
        &[],
    );
    let venv = other.join("env");
    let v = get(
        &mut s,
        "python.venv_name",
        Some(&sub),
        &[("VIRTUAL_ENV", venv.to_str().unwrap())],
    );
    assert_eq!(*data(&v), "tools", "pyvenv.cfg's prompt");
    // No venv: .python-version (pyenv) gives the version.
    let plain = root.path().join("plain");
    write(&plain.join(".python-version"), "# pinned\n3.12.4\n");
    let v = get(&mut s, "python", Some(&plain), &[]);
    assert_eq!(
        *data(&v),
        json!({"venv": null, "venv_name": null, "version": "3.12.4", "requires": null})
    );
    // The venv removed: seen through inotify.
    std::fs::remove_dir_all(proj.join(".venv")).unwrap();
    until(&d, "python.venv", Some(&sub), &[], Value::Null);
}

#[test]
fn conda_env_from_the_environment() {
    let root = tempfile::tempdir().unwrap();
    let prefix = root.path().join("miniconda3/envs/ml");
    write(
        &prefix.join("conda-meta/python-3.12.4-h5148396_1.json"),
        "{}",
    );
    write(
        &prefix.join("conda-meta/pip-24.0-py312h06a4308_0.json"),
        "{}",
    );
    let ps = prefix.to_str().unwrap();
    let d = start();
    let mut s = session(&d);
    let v = get(
        &mut s,
        "conda",
        None,
        &[("CONDA_DEFAULT_ENV", "ml"), ("CONDA_PREFIX", ps)],
    );
    assert_eq!(
        *data(&v),
        json!({"env": "ml", "prefix": ps, "python": "3.12.4"})
    );
    let v = get(&mut s, "conda.env", None, &[]);
    assert_eq!(v["code"], "no_data", "outside an env: {v}");
}

#[test]
fn asdf_and_mise_versions_nearest_wins() {
    let root = tempfile::tempdir().unwrap();
    let home = root.path().join("home");
    let proj = home.join("proj");
    let sub = proj.join("a/b");
    std::fs::create_dir_all(&sub).unwrap();
    write(&home.join(".tool-versions"), "ruby 3.3.0\n");
    write(
        &proj.join(".tool-versions"),
        "# node first\nnodejs 20.11.0 18.19.0\npython 3.12.1 system\n",
    );
    write(
        &home.join(".config/mise/config.toml"),
        "[tools]\nnode = \"lts\"\ngo = \"1.22\"\n",
    );
    write(
        &proj.join("mise.toml"),
        "[tools]\nnode = \"22\"\npython = [\"3.12\", \"3.11\"]\n",
    );
    write(
        &sub.join(".mise.local.toml"),
        "[tools]\ngo = { version = \"1.23\" }\n",
    );
    let hs = home.to_str().unwrap();
    let d = start();
    let mut s = session(&d);
    let v = get(&mut s, "asdf", Some(&sub), &[("HOME", hs)]);
    assert_eq!(
        *data(&v),
        json!({"file": proj.join(".tool-versions"), "nodejs": "20.11.0", "python": "3.12.1"})
    );
    let v = get(&mut s, "asdf.ruby", Some(&sub), &[("HOME", hs)]);
    assert_eq!(
        v["code"], "no_data",
        "the project file hides the home one: {v}"
    );
    let v = get(&mut s, "asdf.ruby", Some(&home), &[("HOME", hs)]);
    assert_eq!(*data(&v), "3.3.0");
    let v = get(&mut s, "mise", Some(&sub), &[("HOME", hs)]);
    assert_eq!(
        *data(&v),
        json!({"file": sub.join(".mise.local.toml"), "node": "22", "go": "1.23", "python": "3.12"})
    );
    write(&proj.join("mise.toml"), "[tools]\nnode = \"23\"\n");
    until(&d, "mise.node", Some(&sub), &[("HOME", hs)], json!("23"));
    until(&d, "mise.python", Some(&sub), &[("HOME", hs)], Value::Null);
}

#[test]
fn direnv_allow_edit_and_deny_agree_with_direnv() {
    if !kernstat_testkit::tool_gate("direnv") {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let hs = home.path().to_str().unwrap();
    let proj = home.path().join("proj");
    let sub = proj.join("sub");
    std::fs::create_dir_all(&sub).unwrap();
    write(&proj.join(".envrc"), "export FOO=1\n");
    let env = [("HOME", hs)];
    let direnv_allowed = |dir: &Path| {
        let status = tool("direnv", &["status"], dir, &env);
        status.lines().any(|l| l == "Found RC allowed true")
    };
    let d = start();
    let mut s = session(&d);
    let v = get(&mut s, "direnv.status", Some(&sub), &env);
    assert_eq!(*data(&v), "blocked");
    assert!(!direnv_allowed(&sub));
    tool("direnv", &["allow", "."], &proj, &env);
    until(&d, "direnv.status", Some(&sub), &env, json!("allowed"));
    assert!(direnv_allowed(&sub));
    let v = get(
        &mut s,
        "direnv",
        Some(&sub),
        &[
            ("HOME", hs),
            ("DIRENV_DIR", &format!("-{}", proj.display())),
        ],
    );
    assert_eq!(
        *data(&v),
        json!({"status": "allowed", "allowed": true, "envrc": proj.join(".envrc"), "loaded": true})
    );
    // An edit invalidates the allow record (it hashes the contents).
    write(&proj.join(".envrc"), "export FOO=2\n");
    until(&d, "direnv.allowed", Some(&sub), &env, json!(false));
    assert!(!direnv_allowed(&sub));
    // direnv >= 2.33 records a denial by the path's hash.
    let deny = home.path().join(".local/share/direnv/deny");
    let hash = {
        use std::io::Write;
        let mut c = Command::new("sha256sum")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        c.stdin
            .take()
            .unwrap()
            .write_all(format!("{}\n", proj.join(".envrc").display()).as_bytes())
            .unwrap();
        let out = c.wait_with_output().unwrap();
        String::from_utf8(out.stdout)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .to_string()
    };
    write(
        &deny.join(hash),
        &format!("{}\n", proj.join(".envrc").display()),
    );
    until(&d, "direnv.status", Some(&sub), &env, json!("denied"));
    let none = tempfile::tempdir().unwrap();
    let v = get(&mut s, "direnv.status", Some(none.path()), &env);
    assert_eq!(v["code"], "no_data", "{v}");
}

#[test]
fn terraform_workspace() {
    let root = tempfile::tempdir().unwrap();
    let module = root.path().join("infra");
    write(&module.join(".terraform/environment"), "staging");
    let sub = module.join("modules/net");
    std::fs::create_dir_all(&sub).unwrap();
    let d = start();
    let mut s = session(&d);
    let v = get(&mut s, "terraform", Some(&sub), &[]);
    assert_eq!(*data(&v), json!({"workspace": "staging", "root": module}));
    let v = get(
        &mut s,
        "terraform.workspace",
        Some(&sub),
        &[("TF_WORKSPACE", "prod")],
    );
    assert_eq!(*data(&v), "prod");
    std::fs::remove_file(module.join(".terraform/environment")).unwrap();
    until(&d, "terraform.workspace", Some(&sub), &[], json!("default"));
    let v = get(&mut s, "terraform.workspace", Some(root.path()), &[]);
    assert_eq!(v["code"], "no_data", "{v}");
}

#[test]
fn bad_context_requests_get_a_clear_error() {
    let d = start();
    let mut s = session(&d);
    let many: Vec<(String, String)> = (0..33)
        .map(|i| (format!("V{i}"), "x".to_string()))
        .collect();
    let env: Vec<(&str, &str)> = many.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let v = get(&mut s, "aws.profile", None, &env);
    assert_eq!(v["code"], "bad_request", "{v}");
    let long = "x".repeat(5000);
    let v = get(&mut s, "aws.profile", None, &[("AWS_PROFILE", &long)]);
    assert_eq!(v["code"], "bad_request", "{v}");
    let v = get(&mut s, "python.venv", None, &[]);
    assert_eq!(v["code"], "bad_request", "{v}");
    assert!(v["error"].as_str().unwrap().contains("needs a path"), "{v}");
    let v = get(&mut s, "kubecontext.bogus", None, &[]);
    assert_eq!(v["code"], "unknown_key", "{v}");
    // A FIFO where the kubeconfig belongs: no value, no hang, and why.
    let t = tempfile::tempdir().unwrap();
    let fifo = t.path().join("config");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let v = get(
        &mut s,
        "kubecontext.context",
        None,
        &[("KUBECONFIG", fifo.to_str().unwrap())],
    );
    assert_eq!(v["code"], "failed", "{v}");
    assert!(
        v["error"].as_str().unwrap().contains("not a regular file"),
        "{v}"
    );
    let v = ask(&mut s, r#"{"op":"get","key":"load.one"}"#);
    assert_eq!(v["ok"], true);
}

#[test]
fn contexts_nobody_asks_for_are_forgotten_with_their_watches() {
    let d = start_with(
        Config {
            // Long enough that the first context is not forgotten before the fifth is
            // made and watched on a busy machine.
            idle_after: Duration::from_secs(2),
            poll_every: Duration::from_millis(100),
            ..Config::default()
        },
        0o700,
        0o600,
    );
    let root = tempfile::tempdir().unwrap();
    let mut s = session(&d);
    for i in 0..5 {
        let dir = root.path().join(format!("p{i}"));
        write(&dir.join(".tool-versions"), "nodejs 20\n");
        let v = get(
            &mut s,
            "asdf.nodejs",
            Some(&dir),
            &[("HOME", "/nonexistent")],
        );
        assert_eq!(*data(&v), "20");
    }
    let status = ask(&mut s, r#"{"op":"status"}"#);
    assert_eq!(status["data"]["contexts"], 5, "{status}");
    // Watches are added on the user's blocking slots, after the answer.
    wait_for("the contexts' directories watched", || {
        let st = ask(&mut s, r#"{"op":"status"}"#);
        st["data"]["watched_dirs"].as_u64().unwrap() >= 5
    });
    wait_for("idle contexts forgotten", || {
        let st = ask(&mut s, r#"{"op":"status"}"#);
        st["data"]["contexts"] == 0 && st["data"]["watched_dirs"] == 0
    });
    let keys = ask(&mut s, r#"{"op":"list"}"#);
    assert!(
        !keys["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k.as_str().unwrap().starts_with("asdf")),
        "{keys}"
    );
}

#[test]
fn put_values_are_bounded_expire_and_reach_watchers() {
    let d = start();
    let mut s = session(&d);
    // A watcher of a key not set yet gets it when it is put.
    let (watching, watched) = std::sync::mpsc::channel();
    let watcher = std::thread::spawn({
        let sock = d.sock.clone();
        move || {
            let s = Session::connect(&sock).unwrap();
            s.set_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut w = s.watch("var.deploy", None).unwrap();
            watching.send(()).unwrap();
            w.next().unwrap().unwrap().data
        }
    });
    watched.recv().unwrap();
    // Alive 3 s: the watcher and the get below see it on a busy machine too.
    let v = ask(
        &mut s,
        r#"{"op":"put","key":"var.deploy","data":{"v":"1.2","by":"ci"},"ttl_s":3}"#,
    );
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(
        watcher.join().unwrap(),
        Some(json!({"v": "1.2", "by": "ci"}))
    );
    let v = ask(&mut s, r#"{"op":"get","key":"var.deploy"}"#);
    assert_eq!(v["data"]["v"], "1.2");
    // Expired: gone within the sweep (every second).
    wait_for("the value expired", || {
        ask(&mut s, r#"{"op":"get","key":"var.deploy"}"#)["code"] == "no_data"
    });
    // Abuse: other namespaces, bad TTLs, a value over 16 KiB: refused with a reason.
    for bad in [
        r#"{"op":"put","key":"load.one","data":1}"#.to_string(),
        r#"{"op":"put","key":"var.x","data":1,"ttl_s":-5}"#.to_string(),
        format!(
            r#"{{"op":"put","key":"var.big","data":"{}"}}"#,
            "x".repeat(17 * 1024)
        ),
    ] {
        let v = ask(&mut s, &bad);
        assert_eq!(v["code"], "bad_request", "{v}");
    }
    assert_eq!(
        ask(&mut s, r#"{"op":"get","key":"load.one"}"#)["data"],
        0.42,
        "untouched"
    );
    // 100,000 keys asked for (pipelined in batches): 1,000 are kept, the rest refused
    // as `full`, and memory stays bounded.
    let (mut ok, mut full) = (0, 0);
    for batch in 0..100 {
        let mut req = String::new();
        for i in 0..1000 {
            req.push_str(&format!(
                r#"{{"op":"put","key":"var.k{}","data":{}}}"#,
                batch * 1000 + i,
                i
            ));
            req.push('\n');
        }
        use std::io::{BufRead, Write};
        let mut c = std::os::unix::net::UnixStream::connect(&d.sock).unwrap();
        c.write_all(req.as_bytes()).unwrap();
        let r = std::io::BufReader::new(c);
        for line in r.lines().take(1000) {
            let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
            if v["ok"] == true {
                ok += 1;
            } else {
                assert_eq!(v["code"], "full", "{v}");
                full += 1;
            }
        }
    }
    assert_eq!((ok, full), (1000, 99_000));
    let st = ask(&mut s, r#"{"op":"status"}"#);
    assert_eq!(st["data"]["vars"], 1000);
    // Removing one makes room for one.
    assert_eq!(
        ask(&mut s, r#"{"op":"put","key":"var.k0","data":null}"#)["ok"],
        true
    );
    assert_eq!(
        ask(&mut s, r#"{"op":"put","key":"var.new","data":"x"}"#)["ok"],
        true
    );
    assert_eq!(
        ask(&mut s, r#"{"op":"put","key":"var.newer","data":"x"}"#)["code"],
        "full"
    );
}

fn settings(text: &str) -> kernstat_daemon::settings::Settings {
    kernstat_daemon::settings::Settings::parse(text).unwrap()
}

#[test]
fn script_providers_formats_failures_and_limits() {
    let d = start_with(
        Config {
            idle_after: Duration::from_millis(1500),
            ..Config::default()
        },
        0o700,
        0o600,
    );
    let t = tempfile::tempdir().unwrap();
    let log = t.path().join("log");
    let mut text = String::from(
        "[scripts]\nconcurrency = 4\n\n\
         [[script]]\nname = \"hello\"\ncommand = [\"echo\", \"hi there\"]\n\n\
         [[script]]\nname = \"kv\"\ncommand = [\"printf 'temp=21\\\\nwind=3\\\\n'\"]\nshell = true\nformat = \"kv\"\n\n\
         [[script]]\nname = \"js\"\ncommand = [\"echo '{\\\"up\\\": true, \\\"n\\\": 2}'\"]\nshell = true\nformat = \"json\"\n\n\
         [[script]]\nname = \"hang\"\ncommand = [\"sleep 30 & sleep 30\"]\nshell = true\ntimeout_secs = 2\n\n\
         [[script]]\nname = \"big\"\ncommand = [\"head -c 100000000 /dev/zero | tr '\\\\0' x\"]\nshell = true\nmax_bytes = 1000\n",
    );

    for i in 0..100 {
        text.push_str(&format!(
            "\n[[script]]\nname = \"s{i}\"\ncommand = [\"echo + >> {log}; sleep 0.05; echo - >> {log}; echo {i}\"]\nshell = true\n",
            log = log.display()
        ));
    }
    d.daemon.set_settings(settings(&text));
    let mut s = session(&d);
    let get = |s: &mut Session, key: &str| ask(s, &format!(r#"{{"op":"get","key":"{key}"}}"#));
    assert_eq!(get(&mut s, "hello")["data"], "hi there");
    assert_eq!(get(&mut s, "kv.wind")["data"], "3");
    assert_eq!(
        get(&mut s, "kv")["data"],
        json!({"temp": "21", "wind": "3"})
    );
    assert_eq!(get(&mut s, "js.up")["data"], true);
    // A script that hangs: its key fails at the timeout; others answer meanwhile.
    let hang = std::thread::spawn({
        let sock = d.sock.clone();
        move || {
            let mut s = Session::connect(&sock).unwrap();
            s.set_timeout(Some(Duration::from_secs(20))).unwrap();
            ask(&mut s, r#"{"op":"get","key":"hang"}"#)
        }
    });
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(get(&mut s, "load.one")["data"], 0.42);
    assert_eq!(get(&mut s, "hello")["data"], "hi there");
    assert!(
        !hang.is_finished(),
        "the hanging script is still being waited for"
    );
    let v = hang.join().unwrap();
    assert_eq!(v["code"], "failed", "{v}");
    assert!(v["error"].as_str().unwrap().contains("timed out"), "{v}");
    // 100 MB of output: cut at the cap.
    let v = get(&mut s, "big");
    assert_eq!(v["data"].as_str().unwrap().len(), 1000, "{v}");
    // 100 script keys asked at once: never more than 4 running.
    let askers: Vec<_> = (0..100)
        .map(|i| {
            let sock = d.sock.clone();
            std::thread::spawn(move || {
                let mut s = Session::connect(&sock).unwrap();
                s.set_timeout(Some(Duration::from_secs(60))).unwrap();
                ask(&mut s, &format!(r#"{{"op":"get","key":"s{i}"}}"#))["data"].clone()
            })
        })
        .collect();
    for (i, a) in askers.into_iter().enumerate() {
        assert_eq!(a.join().unwrap(), i.to_string());
    }
    let (mut running, mut most) = (0i32, 0i32);
    for line in std::fs::read_to_string(&log).unwrap().lines() {
        running += if line == "+" { 1 } else { -1 };
        most = most.max(running);
    }
    assert!(
        (2..=4).contains(&most),
        "at most 4 at once, and they did overlap: {most}"
    );
    // Only while someone asks: forgotten after the idle time, keys and all.
    let started = ask(&mut s, r#"{"op":"status"}"#)["data"]["scripts_started"]
        .as_u64()
        .unwrap();
    assert!(started >= 105, "{started}");
    wait_for("idle scripts forgotten", || {
        let keys = ask(&mut s, r#"{"op":"list"}"#);
        !keys["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|k| k == "hello")
    });
}

#[test]
fn the_config_file_is_reloaded_and_a_broken_edit_keeps_the_old_one() {
    let t = tempfile::tempdir().unwrap();
    let file = t.path().join("config.toml");
    std::fs::write(&file, "[providers]\ndisabled = [\"aws\"]\n").unwrap();
    let d = start();
    d.daemon
        .set_settings(kernstat_daemon::settings::Settings::load(&file).unwrap());
    d.daemon.watch_settings(file.clone()).unwrap();
    let mut s = session(&d);
    let v = get(&mut s, "aws.profile", None, &[("AWS_PROFILE", "dev")]);
    assert!(v["error"].as_str().unwrap().contains("switched off"), "{v}");
    // An edit that adds a script and turns aws back on.
    std::fs::write(
        &file,
        "[[script]]\nname = \"hi\"\ncommand = [\"echo\", \"1\"]\n",
    )
    .unwrap();
    wait_for("the new settings", || {
        get(&mut s, "aws.profile", None, &[("AWS_PROFILE", "dev")])["data"] == "dev"
    });
    assert_eq!(ask(&mut s, r#"{"op":"get","key":"hi"}"#)["data"], "1");
    // A broken edit: reported (on stderr), the previous settings stay.
    std::fs::write(&file, "[[script]]\nname = \"hi\"\ncomand = [\"echo\"]\n").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(ask(&mut s, r#"{"op":"get","key":"hi"}"#)["data"], "1");
}

#[test]
fn talos_context_from_talosconfig() {
    let home = tempfile::tempdir().unwrap();
    // As talosctl writes it (`talosctl config merge`, `config context`): the active
    // context at the top, each context's endpoints and keys below.
    write(
        &home.path().join(".talos/config"),
        "context: prod\ncontexts:\n    prod:\n        endpoints:\n            - 10.0.0.2\n        nodes:\n            - 10.0.0.3\n        ca: LS0t\n    lab:\n        endpoints:\n            - 10.1.0.2\n",
    );
    let hs = home.path().to_str().unwrap();
    let d = start();
    let mut s = session(&d);
    assert_eq!(
        *data(&get(&mut s, "talos.context", None, &[("HOME", hs)])),
        "prod"
    );
    let other = home.path().join("other");
    write(&other, "context: lab\ncontexts: {}\n");
    let v = get(
        &mut s,
        "talos.context",
        None,
        &[("TALOSCONFIG", other.to_str().unwrap())],
    );
    assert_eq!(*data(&v), "lab");
}
