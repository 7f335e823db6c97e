//! `terraform.workspace`: the Terraform workspace of a directory. `$TF_WORKSPACE`
//! overrides it for a shell; otherwise terraform records it in
//! `.terraform/environment` (`$TF_DATA_DIR` moves `.terraform`), and a directory that
//! was `terraform init`ed without one is on `default`. Found in the nearest directory
//! upward that has the data directory.

use std::path::PathBuf;

use super::{Ctx, Provider, Reading};

/// The provider.
pub static PROVIDER: Provider = Provider {
    info: &kernstat_client::keys::context::TERRAFORM,
    read,
};

fn read(ctx: &Ctx) -> Reading {
    let mut r = ctx.reading();
    let Some(start) = ctx.path else { return r };
    let data = ctx
        .var("TF_DATA_DIR")
        .unwrap_or_else(|| ".terraform".into());
    // One stat per directory on the way up, as terraform's own check is.
    let rights = r.rights.clone();
    let is_dir = |d: &std::path::Path| crate::client_files::Walk::to(d, &rights).is_ok();
    let found = if PathBuf::from(&data).is_absolute() {
        let d = PathBuf::from(&data);
        r.watched.push(d.clone());
        is_dir(&d).then_some(d)
    } else {
        let mut found = None;
        for dir in start.ancestors() {
            let d = dir.join(&data);
            let hit = is_dir(&d);
            r.watched.push(d);
            if hit {
                found = r.watched.last().cloned();
                break;
            }
        }
        found
    };
    if let Some(ws) = ctx.var("TF_WORKSPACE") {
        r.set("workspace", ws);
        r.set(
            "root",
            found
                .as_ref()
                .and_then(|d| d.parent())
                .map(|p| p.to_string_lossy().into_owned()),
        );
        return r;
    }
    let Some(dir) = found else { return r };
    let ws = r
        .read(&dir.join("environment"))
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| "default".into());
    r.set("workspace", ws);
    r.set(
        "root",
        dir.parent().map(|p| p.to_string_lossy().into_owned()),
    );
    r
}
