//! `mise.*`: the tool versions mise would use in a directory, from its TOML config
//! files (mise is never run): the global `~/.config/mise/config.toml`
//! (`$MISE_CONFIG_DIR`, `$XDG_CONFIG_HOME`, `$MISE_GLOBAL_CONFIG_FILE`), then every
//! project file from the root down to the directory — `.config/mise/config.toml`,
//! `.config/mise.toml`, `mise/config.toml`, `mise.toml`, `.mise/config.toml`,
//! `.mise.toml`, the `.local` variants and `mise.$MISE_ENV.toml` — the nearer and later
//! overriding the farther, as mise merges them. One field per tool (`mise.node` =
//! `22`; an array's first entry, a table's `version`), and `mise.file`, the nearest
//! project file.

use std::path::{Path, PathBuf};

use super::{Ctx, Provider, Reading};

/// The provider.
pub static PROVIDER: Provider = Provider {
    info: &kernstat_client::keys::context::MISE,
    read,
};

/// Project file names in one directory, lowest precedence first.
fn project_names(env: Option<&str>) -> Vec<String> {
    let mut v: Vec<String> = [
        ".config/mise/config.toml",
        ".config/mise.toml",
        "mise/config.toml",
        "mise.toml",
        ".mise/config.toml",
        ".mise.toml",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    if let Some(e) = env.filter(|e| !e.contains('/')) {
        v.push(format!("mise.{e}.toml"));
        v.push(format!(".mise.{e}.toml"));
    }
    v.push("mise.local.toml".into());
    v.push(".mise.local.toml".into());
    v
}

/// The `[tools]` of one config file: (tool, version).
pub fn tools(text: &str) -> Vec<(String, String)> {
    let Ok(doc) = text.parse::<toml::Table>() else {
        return Vec::new();
    };
    let Some(tools) = doc.get("tools").and_then(|t| t.as_table()) else {
        return Vec::new();
    };
    tools
        .iter()
        .filter_map(|(name, v)| {
            let version = match v {
                toml::Value::String(s) => s.clone(),
                toml::Value::Array(a) => match a.first()? {
                    toml::Value::String(s) => s.clone(),
                    toml::Value::Table(t) => t.get("version")?.as_str()?.to_string(),
                    _ => return None,
                },
                toml::Value::Table(t) => t.get("version")?.as_str()?.to_string(),
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Float(f) => f.to_string(),
                _ => return None,
            };
            Some((name.clone(), version))
        })
        .collect()
}

fn global_file(ctx: &Ctx) -> Option<PathBuf> {
    if let Some(f) = ctx.var("MISE_GLOBAL_CONFIG_FILE") {
        return Some(PathBuf::from(f));
    }
    let dir = ctx
        .var("MISE_CONFIG_DIR")
        .map(PathBuf::from)
        .or_else(|| Some(ctx.config_home()?.join("mise")))?;
    Some(dir.join("config.toml"))
}

fn merge(into: &mut Vec<(String, String)>, from: Vec<(String, String)>) {
    for (tool, version) in from {
        match into.iter_mut().find(|(t, _)| *t == tool) {
            Some(slot) => slot.1 = version,
            None => into.push((tool, version)),
        }
    }
}

fn read(ctx: &Ctx) -> Reading {
    let mut r = ctx.reading();
    let Some(start) = ctx.path else { return r };
    let names = project_names(ctx.var("MISE_ENV").as_deref());
    let ancestors: Vec<&Path> = start.ancestors().collect();
    let mut merged: Vec<(String, String)> = Vec::new();
    let mut any = false;
    if let Some(g) = global_file(ctx) {
        if let Some(text) = r.read(&g) {
            merge(&mut merged, tools(&text));
            any = true;
        }
    }
    let mut nearest: Option<PathBuf> = None;
    // Root first, so that nearer directories override.
    for dir in ancestors.iter().rev() {
        for name in &names {
            let f = dir.join(name);
            if let Some(text) = r.read(&f) {
                merge(&mut merged, tools(&text));
                nearest = Some(f);
                any = true;
            }
        }
    }
    if !any {
        return r;
    }
    for (tool, version) in merged {
        if tool != "file" {
            r.set(&tool, version);
        }
    }
    r.set("file", nearest.map(|f| f.to_string_lossy().into_owned()));
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_forms() {
        let t = "[tools]\nnode = \"22\"\npython = [\"3.12\", \"3.11\"]\n\"cargo:ripgrep\" = { version = \"14\" }\nbad = 1.5\n[env]\nX = \"1\"\n";
        let got = tools(t);
        assert!(got.contains(&("node".into(), "22".into())));
        assert!(got.contains(&("python".into(), "3.12".into())));
        assert!(got.contains(&("cargo:ripgrep".into(), "14".into())));
        assert!(tools("not toml [").is_empty());
    }
}
