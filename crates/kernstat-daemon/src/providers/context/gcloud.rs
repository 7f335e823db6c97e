//! `gcloud.*`: the active gcloud configuration and its project and account, from the
//! files gcloud keeps: `$CLOUDSDK_CONFIG` (default `~/.config/gcloud`)/`active_config`
//! names the configuration (`default` when absent), `configurations/config_NAME` is an
//! INI file whose `[core]` section holds `project` and `account`.
//! `$CLOUDSDK_ACTIVE_CONFIG_NAME` selects another configuration for one shell, and
//! `$CLOUDSDK_CORE_PROJECT` / `$CLOUDSDK_CORE_ACCOUNT` override the properties, as gcloud
//! itself lets them.

use std::path::PathBuf;

use super::files::ini_value;
use super::{Ctx, Provider, Reading};

/// The provider.
pub static PROVIDER: Provider = Provider {
    info: &kernstat_client::keys::context::GCLOUD,
    read,
};

/// gcloud's configuration directory.
pub fn config_dir(ctx: &Ctx) -> Option<PathBuf> {
    ctx.var("CLOUDSDK_CONFIG")
        .map(PathBuf::from)
        .or_else(|| Some(ctx.home()?.join(".config/gcloud")))
}

fn read(ctx: &Ctx) -> Reading {
    let mut r = ctx.reading();
    let Some(dir) = config_dir(ctx) else {
        return r;
    };
    let from_file = r.read(&dir.join("active_config"));
    let name = ctx
        .var("CLOUDSDK_ACTIVE_CONFIG_NAME")
        .or_else(|| {
            from_file
                .as_deref()
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(str::to_string)
        })
        .unwrap_or_else(|| "default".to_string());
    // A configuration name is one path component.
    if name.contains('/') || name == ".." {
        return r;
    }
    let props = r.read(&dir.join("configurations").join(format!("config_{name}")));
    let (project, account) = match props.as_deref() {
        Some(text) => (
            ini_value(text, "core", "project").map(str::to_string),
            ini_value(text, "core", "account").map(str::to_string),
        ),
        None if from_file.is_none() => return r, // gcloud was never set up here
        None => (None, None),
    };
    r.set("configuration", name);
    r.set("project", ctx.var("CLOUDSDK_CORE_PROJECT").or(project));
    r.set("account", ctx.var("CLOUDSDK_CORE_ACCOUNT").or(account));
    r
}
