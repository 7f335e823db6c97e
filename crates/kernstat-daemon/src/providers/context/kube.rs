//! `kubecontext.*`: the current Kubernetes context and its namespace, from the
//! kubeconfig files kubectl would read — `$KUBECONFIG` (a `:`-separated list) or
//! `~/.kube/config` — merged as kubectl merges them: the first file that sets
//! `current-context` wins, and the first file that defines a context wins for its fields.
//!
//! kubeconfigs are YAML as kubectl writes it (block style); a line scanner reads the two
//! things needed (`current-context`, and `name`/`namespace`/`cluster`/`user` of each
//! `contexts` entry) in about a microsecond, where a YAML parser would build the whole
//! document, certificates included. A file that starts with `{` is JSON (also valid
//! YAML) and is read with serde_json.

use std::path::PathBuf;

use super::{Ctx, Provider, Reading, Scope};

/// The provider.
pub static PROVIDER: Provider = Provider {
    name: "kubecontext",
    scope: Scope::Global,
    env: &["KUBECONFIG", "HOME"],
    fields: &[
        ("context", "kubectl's current context (null when none)"),
        (
            "namespace",
            "the context's namespace (\"default\" when it sets none)",
        ),
        ("cluster", "the context's cluster"),
        ("user", "the context's user"),
    ],
    dynamic: None,
    per_client: false,
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

/// A YAML scalar as written on one line: quotes removed, a trailing comment dropped.
fn scalar(v: &str) -> Option<String> {
    let v = v.trim();
    let s = if let Some(inner) = v.strip_prefix('"') {
        inner
            .rsplit_once('"')
            .map(|(s, _)| s.replace("\\\"", "\""))?
    } else if let Some(inner) = v.strip_prefix('\'') {
        inner.rsplit_once('\'').map(|(s, _)| s.replace("''", "'"))?
    } else {
        let v = match v.find(" #") {
            Some(i) => &v[..i],
            None => v,
        };
        let v = v.trim();
        if v == "null" || v == "~" {
            return None;
        }
        v.to_string()
    };
    (!s.is_empty()).then_some(s)
}

fn indent(line: &str) -> usize {
    line.len() - line.trim_start_matches(' ').len()
}

/// Parses a kubeconfig's text (block YAML as kubectl writes it, or JSON).
pub fn parse(text: &str) -> KubeConfig {
    if text.trim_start().starts_with('{') {
        return parse_json(text);
    }
    let mut cfg = KubeConfig::default();
    let mut in_contexts = false;
    // The indentation of the current entry's own keys (`name`, `context`).
    let mut item_indent = usize::MAX;
    for raw in text.lines() {
        let line = raw.trim_end();
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let ind = indent(line);
        if ind == 0 && !trimmed.starts_with('-') {
            in_contexts = false;
            if let Some((k, v)) = trimmed.split_once(':') {
                match k.trim() {
                    "current-context" => cfg.current = scalar(v),
                    "contexts" => {
                        in_contexts = true;
                        item_indent = usize::MAX;
                    }
                    _ => {}
                }
            }
            continue;
        }
        if !in_contexts {
            continue;
        }
        let (ind, body) = match trimmed
            .strip_prefix("- ")
            .or(trimmed.strip_prefix('-').filter(|r| r.is_empty()))
        {
            Some(rest) => {
                cfg.contexts.push(Context::default());
                item_indent = ind + 2 + indent(rest);
                (item_indent, rest.trim_start())
            }
            None => (ind, trimmed),
        };
        let Some(cur) = cfg.contexts.last_mut() else {
            continue;
        };
        let Some((k, v)) = body.split_once(':') else {
            continue;
        };
        match (k.trim(), ind.cmp(&item_indent)) {
            ("name", std::cmp::Ordering::Equal) => cur.name = scalar(v).unwrap_or_default(),
            ("namespace", std::cmp::Ordering::Greater) => cur.namespace = scalar(v),
            ("cluster", std::cmp::Ordering::Greater) => cur.cluster = scalar(v),
            ("user", std::cmp::Ordering::Greater) => cur.user = scalar(v),
            _ => {}
        }
    }
    cfg
}

fn parse_json(text: &str) -> KubeConfig {
    let Ok(v) = serde_json::from_str::<serde_json::Value>(text) else {
        return KubeConfig::default();
    };
    let s = |v: &serde_json::Value| v.as_str().filter(|s| !s.is_empty()).map(str::to_string);
    KubeConfig {
        current: s(&v["current-context"]),
        contexts: v["contexts"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|c| Context {
                        name: s(&c["name"]).unwrap_or_default(),
                        namespace: s(&c["context"]["namespace"]),
                        cluster: s(&c["context"]["cluster"]),
                        user: s(&c["context"]["user"]),
                    })
                    .collect()
            })
            .unwrap_or_default(),
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
