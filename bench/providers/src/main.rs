//! kernstat's context providers and beachcomber 0.9.1's, side by side on the same fake
//! home: the median time of one computation of each (both read the same files; pinned to
//! one CPU, alternating), and every field both report. Prints a Markdown table.
//!
//! Usage: kernstat-bench-providers [ITERATIONS]

use std::path::{Path, PathBuf};
use std::time::Instant;

use beachcomber::provider::Provider as BcProvider;
use kernstat_daemon::providers::context::{self, Env};

fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// The fake home, laid out as the tools leave it (see crates/kernstat-daemon/tests).
fn fake_home(root: &Path) -> PathBuf {
    let h = root.join("home");
    write(
        &h.join(".kube/config"),
        "apiVersion: v1\nclusters:\n- cluster:\n    server: https://10.0.0.1:6443\n  name: c1\ncontexts:\n- context:\n    cluster: c1\n    user: bob\n  name: dev\n- context:\n    cluster: c1\n    namespace: team-x\n    user: alice\n  name: prod\ncurrent-context: prod\nkind: Config\npreferences: {}\nusers:\n- name: alice\n  user:\n    token: t\n",
    );
    write(&h.join(".config/gcloud/active_config"), "default");
    write(
        &h.join(".config/gcloud/configurations/config_default"),
        "[core]\naccount = a@b.c\nproject = proj-one\n\n",
    );
    write(
        &h.join(".aws/config"),
        "[default]\nregion = eu-west-1\n\n[profile dev]\nregion = us-east-2\n",
    );
    let proj = h.join("proj");
    write(
        &proj.join(".tool-versions"),
        "nodejs 20.11.0\npython 3.12.1\n",
    );
    write(&proj.join("mise.toml"), "[tools]\nnode = \"22\"\n");
    write(
        &proj.join(".venv/pyvenv.cfg"),
        "home = /usr/bin\ninclude-system-site-packages = false\nversion = 3.11.2\n",
    );
    write(&proj.join(".terraform/environment"), "staging");
    write(&proj.join(".envrc"), "export FOO=1\n");
    h
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Median nanoseconds of `f`, `n` times.
fn time(n: usize, mut f: impl FnMut()) -> f64 {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_nanos() as f64
        })
        .collect::<Vec<_>>()
        .pipe(median)
}

trait Pipe: Sized {
    fn pipe<R>(self, f: impl FnOnce(Self) -> R) -> R {
        f(self)
    }
}
impl<T> Pipe for T {}

fn bc_fields<P: BcProvider>(p: &P, path: Option<&str>) -> serde_json::Value {
    let mut all = serde_json::Map::new();
    for s in p.sources() {
        let r = s.execute(path);
        for (k, v) in r.fields {
            all.insert(k, serde_json::to_value(v).unwrap());
        }
    }
    serde_json::Value::Object(all)
}

fn bc_time<P: BcProvider>(p: &P, path: Option<&str>, n: usize) -> f64 {
    let sources = p.sources();
    time(n, || {
        for s in &sources {
            std::hint::black_box(s.execute(path));
        }
    })
}

fn main() {
    let n: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    // Pinned: moving between the two vCPUs changes timings 2-3x.
    // SAFETY: a zeroed cpu_set_t with CPU 0 set, for this thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(0, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
    let root = std::env::temp_dir().join(format!("ks-bench-providers-{}", std::process::id()));
    let home = fake_home(&root);
    let proj = home.join("proj");
    let proj_s = proj.to_str().unwrap().to_string();
    // beachcomber's providers read the daemon's environment; kernstat's get the same
    // variables as a client sends them.
    std::env::set_var("HOME", &home);
    std::env::set_var("AWS_PROFILE", "dev");
    std::env::remove_var("KUBECONFIG");
    std::env::remove_var("XDG_DATA_HOME");
    std::env::remove_var("XDG_CONFIG_HOME");
    let mut vars = std::collections::BTreeMap::new();
    vars.insert("HOME".to_string(), home.to_str().unwrap().to_string());
    vars.insert("AWS_PROFILE".to_string(), "dev".to_string());
    let env = Env::Given(vars);
    let kube_path = home.join(".kube/config");
    let kube_s = kube_path.to_str().unwrap().to_string();

    use beachcomber::provider as bc;
    // (kernstat provider, beachcomber's name, its timing and fields at its path)
    type Row = (&'static str, &'static str, f64, serde_json::Value);
    let mut rows: Vec<(Row, f64, serde_json::Value)> = Vec::new();
    macro_rules! side {
        ($ks:expr, $bcname:expr, $bcp:expr, $bcpath:expr) => {{
            let p = context::provider($ks).unwrap();
            let path = (p.scope == context::Scope::Path).then_some(proj.as_path());
            let ks_t = time(n, || {
                std::hint::black_box(context::read_now(p, path, &env, None));
            });
            let bc_t = bc_time(&$bcp, $bcpath, n);
            let r = context::read_now(p, path, &env, None);
            let ks_v = serde_json::Value::Object(r.fields.into_iter().collect());
            rows.push((($ks, $bcname, bc_t, bc_fields(&$bcp, $bcpath)), ks_t, ks_v));
        }};
    }
    side!(
        "kubecontext",
        "kubecontext",
        bc::kubecontext::KubecontextProvider,
        Some(kube_s.as_str())
    );
    side!("gcloud", "gcloud_configs", bc::gcloud::GcloudProvider, None);
    side!("aws", "aws_profiles", bc::aws::AwsProvider, None);
    side!(
        "python",
        "python",
        bc::python::PythonProvider,
        Some(proj_s.as_str())
    );
    side!(
        "terraform",
        "terraform",
        bc::terraform::TerraformProvider,
        Some(proj_s.as_str())
    );
    side!(
        "asdf",
        "asdf",
        bc::asdf::AsdfProvider,
        Some(proj_s.as_str())
    );
    side!(
        "mise",
        "mise",
        bc::mise::MiseProvider,
        Some(proj_s.as_str())
    );
    side!(
        "direnv",
        "direnv",
        bc::direnv::DirenvProvider,
        Some(proj_s.as_str())
    );
    side!("sudo", "sudo", bc::sudo::SudoProvider, None);
    println!("| provider | kernstat (median) | beachcomber 0.9.1 (median) | kernstat's fields | beachcomber's fields |");
    println!("|---|---|---|---|---|");
    for ((ks, bcname, bc_t, bc_v), ks_t, ks_v) in rows {
        println!(
            "| `{ks}` / `{bcname}` | {:.2} µs | {:.2} µs | `{}` | `{}` |",
            ks_t / 1000.0,
            bc_t / 1000.0,
            ks_v,
            bc_v
        );
    }
    let _ = std::fs::remove_dir_all(&root);
    eprintln!(
        "{n} iterations each, pinned to CPU 0, HOME={}",
        home.display()
    );
}
