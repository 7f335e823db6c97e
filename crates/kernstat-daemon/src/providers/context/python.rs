//! `python.*`: the Python environment of a directory. The virtualenv is the shell's
//! `$VIRTUAL_ENV` when one is activated, else the nearest `.venv`, `venv`, `.virtualenv`
//! or `env` directory upward that holds a `pyvenv.cfg` (what `python -m venv`, virtualenv
//! and uv create). The version is the venv's (`version` or `version_info` in
//! pyvenv.cfg), else the nearest `.python-version` (pyenv, uv); `requires` is
//! `[project] requires-python` of the nearest `pyproject.toml`.

use std::path::{Path, PathBuf};

use super::files::ini_value;
use super::{Ctx, Provider, Reading};

/// The provider.
pub static PROVIDER: Provider = Provider {
    info: &kernstat_client::keys::context::PYTHON,
    read,
};

const VENV_DIRS: &[&str] = &[".venv", "venv", ".virtualenv", "env"];

/// The nearest venv upward and its pyvenv.cfg (read by trying each candidate: one open
/// per candidate, no stat).
fn local_venv(r: &mut Reading, start: &Path) -> Option<(PathBuf, String)> {
    for d in start.ancestors() {
        for name in VENV_DIRS {
            let venv = d.join(name);
            if let Some(cfg) = r.read(&venv.join("pyvenv.cfg")) {
                return Some((venv, cfg));
            }
            // Watched too: the venv directory appearing.
            r.watched.push(venv);
        }
    }
    None
}

/// A `key = value` of pyvenv.cfg (INI without a section header).
fn cfg_value<'a>(cfg: &'a str, key: &str) -> Option<&'a str> {
    cfg.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k.trim() == key)
            .then(|| v.trim())
            .filter(|v| !v.is_empty())
    })
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
    let activated = ctx.var("VIRTUAL_ENV");
    let (venv, cfg) = match &activated {
        Some(v) => {
            let v = PathBuf::from(v);
            let cfg = r.read(&v.join("pyvenv.cfg"));
            (Some(v), cfg)
        }
        None => match local_venv(&mut r, start) {
            Some((v, cfg)) => (Some(v), Some(cfg)),
            None => (None, None),
        },
    };
    let mut version = cfg.as_deref().and_then(|c| {
        cfg_value(c, "version")
            .or_else(|| cfg_value(c, "version_info"))
            .map(str::to_string)
    });
    if version.is_none() {
        version = r
            .read_upward(start, &[".python-version"])
            .and_then(|(_, text)| {
                text.lines()
                    .map(str::trim)
                    .find(|l| !l.is_empty() && !l.starts_with('#'))
                    .map(str::to_string)
            });
    }
    // The project's pyproject.toml: beside a local venv, else the nearest upward.
    let project_dir = venv
        .as_deref()
        .filter(|_| activated.is_none())
        .and_then(Path::parent);
    let pyproject = match project_dir {
        Some(d) => r.read(&d.join("pyproject.toml")),
        None => r.read_upward(start, &["pyproject.toml"]).map(|(_, t)| t),
    };
    let requires =
        pyproject.and_then(|t| ini_value(&t, "project", "requires-python").and_then(toml_string));
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
                    .and_then(|c| cfg_value(c, "prompt"))
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
