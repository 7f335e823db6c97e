//! `python.*`: the Python environment of a directory. The virtualenv is the shell's
//! `$VIRTUAL_ENV` when one is activated, else the nearest `.venv`, `venv`, `.virtualenv`
//! or `env` directory upward that holds a `pyvenv.cfg` (what `python -m venv`, virtualenv
//! and uv create). The version is the venv's (`version` or `version_info` in
//! pyvenv.cfg), else the nearest `.python-version` (pyenv, uv); `requires` is
//! `[project] requires-python` of the nearest `pyproject.toml`.

use std::path::{Path, PathBuf};

use super::files::{find_upward, ini_value};
use super::{Ctx, Provider, Reading, Scope};

/// The provider.
pub static PROVIDER: Provider = Provider {
    name: "python",
    scope: Scope::Path,
    env: &["VIRTUAL_ENV", "VIRTUAL_ENV_PROMPT"],
    fields: &[
        ("venv", "the virtualenv's directory (null when none)"),
        (
            "venv_name",
            "its prompt name (VIRTUAL_ENV_PROMPT, pyvenv.cfg's prompt, else the directory name)",
        ),
        (
            "version",
            "the venv's Python version, else .python-version's",
        ),
        ("requires", "pyproject.toml's requires-python"),
    ],
    dynamic: None,
    per_client: false,
    read,
};

const VENV_DIRS: &[&str] = &[".venv", "venv", ".virtualenv", "env"];

fn local_venv(start: &Path, watched: &mut Vec<PathBuf>) -> Option<PathBuf> {
    let mut dir = Some(start);
    while let Some(d) = dir {
        for name in VENV_DIRS {
            let cfg = d.join(name).join("pyvenv.cfg");
            watched.push(d.join(name));
            if cfg.is_file() {
                return Some(d.join(name));
            }
        }
        dir = d.parent();
    }
    None
}

/// A TOML basic or literal string on one line: `"x"` or `'x'`.
fn toml_string(v: &str) -> Option<String> {
    let v = v.trim();
    let inner = v
        .strip_prefix('"')
        .and_then(|s| s.split_once('"'))
        .or_else(|| v.strip_prefix('\'').and_then(|s| s.split_once('\'')))?;
    Some(inner.0.to_string())
}

fn read(ctx: &Ctx) -> Reading {
    let mut r = ctx.reading();
    let Some(start) = ctx.path else { return r };
    let mut watched = Vec::new();
    let venv = match ctx.var("VIRTUAL_ENV") {
        Some(v) => Some(PathBuf::from(v)),
        None => local_venv(start, &mut watched),
    };
    r.watched.append(&mut watched);
    // pyvenv.cfg is INI without a section header.
    let cfg = venv
        .as_ref()
        .and_then(|v| r.read(&v.join("pyvenv.cfg")))
        .map(|c| format!("[venv]\n{c}"));
    let mut version = cfg.as_deref().and_then(|c| {
        ini_value(c, "venv", "version")
            .or_else(|| ini_value(c, "venv", "version_info"))
            .map(str::to_string)
    });
    if version.is_none() {
        let mut looked = Vec::new();
        let found = find_upward(start, &[".python-version"], &mut looked);
        r.watched.extend(looked);
        version = found.and_then(|f| {
            let text = r.read(&f)?;
            text.lines()
                .map(str::trim)
                .find(|l| !l.is_empty() && !l.starts_with('#'))
                .map(str::to_string)
        });
    }
    let mut looked = Vec::new();
    let pyproject = find_upward(start, &["pyproject.toml"], &mut looked);
    r.watched.extend(looked);
    let requires = pyproject
        .and_then(|f| r.read(&f))
        .and_then(|t| ini_value(&t, "project", "requires-python").and_then(toml_string));
    let name = venv.as_ref().map(|v| {
        ctx.var("VIRTUAL_ENV_PROMPT")
            .map(|p| {
                p.trim()
                    .trim_start_matches('(')
                    .trim_end_matches(") ")
                    .trim_end_matches(')')
                    .to_string()
            })
            .or_else(|| {
                cfg.as_deref()
                    .and_then(|c| ini_value(c, "venv", "prompt"))
                    .and_then(|p| toml_string(p).or_else(|| Some(p.to_string())))
            })
            .unwrap_or_else(|| {
                v.file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default()
            })
    });
    if venv.is_none() && version.is_none() && requires.is_none() {
        return r;
    }
    r.set("venv", venv.map(|v| v.to_string_lossy().into_owned()));
    r.set("venv_name", name);
    r.set("version", version);
    r.set("requires", requires);
    r
}
