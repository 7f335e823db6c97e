//! `kubecontext.*`: the current Kubernetes context and its namespace, from the
//! kubeconfig files kubectl would read — `$KUBECONFIG` (a `:`-separated list) or
//! `~/.kube/config` — merged as kubectl merges them: the first file that sets
//! `current-context` wins, and the first file that defines a context wins for its fields.
//!
//! kubeconfigs are YAML in whatever style the tool that wrote them chose — kubectl's
//! block style, kind's and k3d's, `aws eks update-kubeconfig`'s, flow style written by
//! hand or by scripts (`- context: {cluster: c1, namespace: payments}`), anchors and
//! aliases, JSON — so they are parsed by a YAML parser (serde-saphyr: maintained, pure
//! Rust, panic-free, and bounded by its budget against alias bombs, since a KUBECONFIG
//! a client names is untrusted), into just the fields needed; the rest of the document
//! (certificates included) is skipped. A file is re-read only when it changes.

use std::path::PathBuf;

use serde::Deserialize;

use super::{Ctx, Provider, Reading};

/// The provider.
pub static PROVIDER: Provider = Provider {
    info: &kernstat_client::keys::context::KUBE,
    read,
};

/// One `contexts` entry.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Context {
    /// Its name.
    pub name: String,
    /// Its namespace, cluster and user, where set.
    pub namespace: Option<String>,
    /// The cluster.
    pub cluster: Option<String>,
    /// The user.
    pub user: Option<String>,
}

/// What one kubeconfig says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KubeConfig {
    /// `current-context`, when set and not empty.
    pub current: Option<String>,
    /// Every context.
    pub contexts: Vec<Context>,
}

/// The parts of a kubeconfig read (serde skips the rest).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct File {
    #[serde(rename = "current-context")]
    current: Option<Scalar>,
    contexts: Option<Vec<NamedContext>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct NamedContext {
    name: Option<Scalar>,
    context: Option<ContextFields>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
struct ContextFields {
    namespace: Option<Scalar>,
    cluster: Option<Scalar>,
    user: Option<Scalar>,
}

/// A scalar where a string is expected: a namespace written `123` or `true` is still
/// that text (kubectl quotes them; a hand-written file may not).
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Scalar {
    Text(String),
    Int(i64),
    Float(f64),
    Bool(bool),
}

impl Scalar {
    fn text(self) -> Option<String> {
        let s = match self {
            Scalar::Text(s) => s,
            Scalar::Int(i) => i.to_string(),
            Scalar::Float(f) => f.to_string(),
            Scalar::Bool(b) => b.to_string(),
        };
        (!s.is_empty()).then_some(s)
    }
}

/// Parses a kubeconfig's text (any YAML, or JSON); one that does not parse says nothing.
pub fn parse(text: &str) -> KubeConfig {
    let Ok(f) = serde_saphyr::from_str::<File>(text) else {
        return KubeConfig::default();
    };
    KubeConfig {
        current: f.current.and_then(Scalar::text),
        contexts: f
            .contexts
            .unwrap_or_default()
            .into_iter()
            .map(|c| {
                let body = c.context.unwrap_or_default();
                Context {
                    name: c.name.and_then(Scalar::text).unwrap_or_default(),
                    namespace: body.namespace.and_then(Scalar::text),
                    cluster: body.cluster.and_then(Scalar::text),
                    user: body.user.and_then(Scalar::text),
                }
            })
            .collect(),
    }
}

/// The files kubectl reads, in merge order.
pub fn files(ctx: &Ctx) -> Vec<PathBuf> {
    match ctx.var("KUBECONFIG") {
        Some(list) => list
            .split(':')
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .collect(),
        None => ctx
            .home()
            .map(|h| vec![h.join(".kube/config")])
            .unwrap_or_default(),
    }
}

fn read(ctx: &Ctx) -> Reading {
    let mut r = ctx.reading();
    let mut current: Option<String> = None;
    let mut contexts: Vec<Context> = Vec::new();
    for f in files(ctx) {
        let Some(text) = r.read(&f) else { continue };
        let cfg = parse(&text);
        if current.is_none() {
            current = cfg.current;
        }
        for c in cfg.contexts {
            if !contexts.iter().any(|have| have.name == c.name) {
                contexts.push(c);
            }
        }
    }
    if let Some(name) = current {
        let c = contexts.into_iter().find(|c| c.name == name);
        let c = c.as_ref();
        r.set(
            "namespace",
            c.and_then(|c| c.namespace.clone())
                .unwrap_or_else(|| "default".into()),
        );
        r.set("cluster", c.and_then(|c| c.cluster.clone()));
        r.set("user", c.and_then(|c| c.user.clone()));
        r.set("context", name);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kubectl_layout() {
        let text = "apiVersion: v1\nclusters:\n- cluster:\n    server: https://a:6443\n  name: a\ncontexts:\n- context:\n    cluster: a\n    namespace: team-x\n    user: alice\n  name: prod\n- context:\n    cluster: b\n    user: bob\n  name: \"dev\"\ncurrent-context: prod # the one\nkind: Config\nusers:\n- name: alice\n  user:\n    token: t\n";
        let c = parse(text);
        assert_eq!(c.current.as_deref(), Some("prod"));
        assert_eq!(c.contexts.len(), 2);
        assert_eq!(c.contexts[0].namespace.as_deref(), Some("team-x"));
        assert_eq!(c.contexts[0].user.as_deref(), Some("alice"));
        assert_eq!(c.contexts[1].name, "dev");
        assert_eq!(c.contexts[1].namespace, None);
    }

    #[test]
    fn indented_lists_and_json() {
        let text =
            "contexts:\n  - name: a\n    context:\n      namespace: 'n s'\ncurrent-context: ''\n";
        let c = parse(text);
        assert_eq!(c.current, None);
        assert_eq!(c.contexts[0].name, "a");
        assert_eq!(c.contexts[0].namespace.as_deref(), Some("n s"));
        let j = r#"{"current-context":"x","contexts":[{"name":"x","context":{"namespace":"y"}}]}"#;
        let c = parse(j);
        assert_eq!(c.current.as_deref(), Some("x"));
        assert_eq!(c.contexts[0].namespace.as_deref(), Some("y"));
    }
}

/// The forms tools write, each parsed to what kubectl would show for it.
#[cfg(test)]
mod forms {
    use super::*;

    /// (what wrote it, the file, the current context, namespace, cluster, user)
    const FORMS: &[(&str, &str, &str, &str, &str, &str)] = &[
        (
            "kubectl config set-context / use-context",
            "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: LS0tLS1CRUdJTg==\n    server: https://127.0.0.1:6443\n  name: prod\ncontexts:\n- context:\n    cluster: prod\n    namespace: payments\n    user: admin\n  name: prod\n- context:\n    cluster: prod\n    user: admin\n  name: other\ncurrent-context: prod\nkind: Config\npreferences: {}\nusers:\n- name: admin\n  user:\n    client-certificate-data: LS0t\n    client-key-data: LS0t\n",
            "prod", "payments", "prod", "admin",
        ),
        (
            "kind export kubeconfig",
            "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: LS0t\n    server: https://127.0.0.1:39397\n  name: kind-kind\ncontexts:\n- context:\n    cluster: kind-kind\n    user: kind-kind\n  name: kind-kind\ncurrent-context: kind-kind\nkind: Config\npreferences: {}\nusers:\n- name: kind-kind\n  user:\n    client-certificate-data: LS0t\n",
            "kind-kind", "default", "kind-kind", "kind-kind",
        ),
        (
            "k3d kubeconfig merge",
            "apiVersion: v1\nclusters:\n- cluster:\n    server: https://0.0.0.0:6550\n  name: k3d-dev\ncontexts:\n- context:\n    cluster: k3d-dev\n    user: admin@k3d-dev\n  name: k3d-dev\ncurrent-context: k3d-dev\nkind: Config\npreferences: {}\nusers:\n- name: admin@k3d-dev\n  user:\n    client-certificate-data: LS0t\n",
            "k3d-dev", "default", "k3d-dev", "admin@k3d-dev",
        ),
        (
            "minikube start (extensions in the context)",
            "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority: /home/u/.minikube/ca.crt\n    extensions:\n    - extension:\n        last-update: Mon, 01 Jan 2024 10:00:00 UTC\n        provider: minikube.sigs.k8s.io\n        version: v1.32.0\n      name: cluster_info\n    server: https://192.168.49.2:8443\n  name: minikube\ncontexts:\n- context:\n    cluster: minikube\n    extensions:\n    - extension:\n        last-update: Mon, 01 Jan 2024 10:00:00 UTC\n        provider: minikube.sigs.k8s.io\n        version: v1.32.0\n      name: context_info\n    namespace: default\n    user: minikube\n  name: minikube\ncurrent-context: minikube\nkind: Config\npreferences: {}\nusers:\n- name: minikube\n  user:\n    client-certificate: /home/u/.minikube/profiles/minikube/client.crt\n",
            "minikube", "default", "minikube", "minikube",
        ),
        (
            "aws eks update-kubeconfig (ARNs with colons, exec args)",
            "apiVersion: v1\nclusters:\n- cluster:\n    certificate-authority-data: LS0t\n    server: https://ABC.gr7.us-west-2.eks.amazonaws.com\n  name: arn:aws:eks:us-west-2:123456789012:cluster/demo\ncontexts:\n- context:\n    cluster: arn:aws:eks:us-west-2:123456789012:cluster/demo\n    user: arn:aws:eks:us-west-2:123456789012:cluster/demo\n  name: arn:aws:eks:us-west-2:123456789012:cluster/demo\ncurrent-context: arn:aws:eks:us-west-2:123456789012:cluster/demo\nkind: Config\npreferences: {}\nusers:\n- name: arn:aws:eks:us-west-2:123456789012:cluster/demo\n  user:\n    exec:\n      apiVersion: client.authentication.k8s.io/v1beta1\n      args:\n      - --region\n      - us-west-2\n      - eks\n      - get-token\n      - --cluster-name\n      - demo\n      command: aws\n",
            "arn:aws:eks:us-west-2:123456789012:cluster/demo", "default",
            "arn:aws:eks:us-west-2:123456789012:cluster/demo",
            "arn:aws:eks:us-west-2:123456789012:cluster/demo",
        ),
        (
            "flow style, as the issue found it",
            "contexts:\n- context: {cluster: c1, user: u1, namespace: payments}\n  name: c1\ncurrent-context: c1\n",
            "c1", "payments", "c1", "u1",
        ),
        (
            "flow style, the whole list",
            "{contexts: [{name: a, context: {cluster: ca, user: ua}}, {name: b, context: {namespace: nb, cluster: cb, user: ub}}], current-context: b}\n",
            "b", "nb", "cb", "ub",
        ),
        (
            "anchors, an alias and a merge key",
            "x-base: &base\n  cluster: shared\n  user: ops\ncontexts:\n- name: staging\n  context:\n    <<: *base\n    namespace: staging\n- name: copy\n  context: *base\ncurrent-context: staging\n",
            "staging", "staging", "shared", "ops",
        ),
        (
            "JSON (kubectl config view -o json)",
            "{\"kind\":\"Config\",\"apiVersion\":\"v1\",\"contexts\":[{\"name\":\"j\",\"context\":{\"cluster\":\"cj\",\"user\":\"uj\",\"namespace\":\"nj\"}}],\"current-context\":\"j\"}",
            "j", "nj", "cj", "uj",
        ),
        (
            "quoted, commented, a numeric namespace",
            "# written by hand\ncontexts:\n  - name: \"q\" # the one\n    context:\n      cluster: 'c q'\n      user: u\n      namespace: 2024\ncurrent-context: 'q'\n",
            "q", "2024", "c q", "u",
        ),
    ];

    #[test]
    fn every_form_reads_as_kubectl_shows_it() {
        for (what, text, current, namespace, cluster, user) in FORMS {
            let home = tempfile::tempdir().unwrap();
            std::fs::create_dir(home.path().join(".kube")).unwrap();
            std::fs::write(home.path().join(".kube/config"), text).unwrap();
            let env = super::super::Env::Given(
                [("HOME".to_string(), home.path().display().to_string())].into(),
            );
            let r = super::super::read_now(&PROVIDER, None, &env, None);
            assert_eq!(r.error, None, "{what}");
            let field = |f: &str| r.get(f).and_then(|v| v.as_str()).unwrap_or("").to_string();
            assert_eq!(
                (
                    field("context"),
                    field("namespace"),
                    field("cluster"),
                    field("user")
                ),
                (
                    current.to_string(),
                    namespace.to_string(),
                    cluster.to_string(),
                    user.to_string()
                ),
                "{what}"
            );
        }
    }

    #[test]
    fn an_alias_bomb_is_refused_not_expanded() {
        let mut bomb = String::from("a: &a [x,x,x,x,x,x,x,x,x,x]\n");
        for i in 1..12 {
            let prev = (b'a' + (i - 1) as u8) as char;
            let this = (b'a' + i as u8) as char;
            bomb.push_str(&format!(
                "{this}: &{this} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"
            ));
        }
        bomb.push_str("current-context: x\n");
        // 10^12 nodes if expanded: the budget stops it, and nothing is read.
        assert_eq!(parse(&bomb), KubeConfig::default());
    }
}
