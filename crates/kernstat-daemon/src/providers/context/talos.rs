//! `talos.context`: the active Talos context, from talosctl's config (`$TALOSCONFIG`,
//! default `~/.talos/config`): its top-level `context:` key (YAML as talosctl writes it).

use std::path::PathBuf;

use super::{Ctx, Provider, Reading};

/// The provider.
pub static PROVIDER: Provider = Provider {
    info: &kernstat_client::keys::context::TALOS,
    read,
};

/// The top-level `context:` of a talosconfig.
pub fn active_context(text: &str) -> Option<String> {
    text.lines()
        .filter(|l| !l.starts_with([' ', '\t', '-', '#']))
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            (k.trim() == "context").then(|| {
                let v = v.split(" #").next().unwrap_or("").trim();
                v.trim_matches('"').trim_matches('\'').to_string()
            })
        })
        .filter(|v| !v.is_empty())
}

fn read(ctx: &Ctx) -> Reading {
    let mut r = ctx.reading();
    let file = ctx
        .var("TALOSCONFIG")
        .map(PathBuf::from)
        .or_else(|| Some(ctx.home()?.join(".talos/config")));
    let Some(text) = file.and_then(|f| r.read(&f)) else {
        return r;
    };
    if let Some(c) = active_context(&text) {
        r.set("context", c);
    }
    r
}

#[cfg(test)]
mod tests {
    #[test]
    fn talosctl_layout() {
        let t = "context: prod-cluster\ncontexts:\n    prod-cluster:\n        endpoints:\n            - 10.0.0.2\n        context: nested\n";
        assert_eq!(super::active_context(t).as_deref(), Some("prod-cluster"));
        assert_eq!(super::active_context("contexts: {}\n"), None);
    }
}
