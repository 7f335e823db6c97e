//! `conda.*`: the active conda environment of the asking shell. conda keeps it only in
//! the shell's environment (`conda activate` sets `$CONDA_DEFAULT_ENV` and
//! `$CONDA_PREFIX`), so this provider reads nothing but what the client sent — and the
//! environment's Python version, from the package record conda writes into
//! `$CONDA_PREFIX/conda-meta/python-VERSION-BUILD.json`.

use std::path::Path;

use super::{Ctx, Provider, Reading};

/// The provider.
pub static PROVIDER: Provider = Provider {
    info: &kernstat_client::keys::context::CONDA,
    read,
};

fn read(ctx: &Ctx) -> Reading {
    let mut r = ctx.reading();
    let prefix = ctx.var("CONDA_PREFIX");
    let name = ctx.var("CONDA_DEFAULT_ENV").or_else(|| {
        prefix
            .as_deref()
            .and_then(|p| Path::new(p).file_name())
            .map(|n| n.to_string_lossy().into_owned())
    });
    let Some(name) = name else {
        return r;
    };
    let python = prefix.as_deref().and_then(|p| {
        let meta = Path::new(p).join("conda-meta");
        python_version(&r.list(&meta))
    });
    r.set("env", name);
    r.set("prefix", prefix);
    r.set("python", python);
    r
}

/// The version in `python-3.12.4-h5148396_1.json`, among conda-meta's names.
fn python_version(names: &[String]) -> Option<String> {
    names.iter().find_map(|name| {
        let rest = name.strip_prefix("python-")?.strip_suffix(".json")?;
        let version = rest.split('-').next()?;
        version
            .starts_with(|c: char| c.is_ascii_digit())
            .then(|| version.to_string())
    })
}
