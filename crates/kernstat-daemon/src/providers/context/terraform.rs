//! `terraform.workspace`: the Terraform workspace of a directory. `$TF_WORKSPACE`
//! overrides it for a shell; otherwise terraform records it in
//! `.terraform/environment` (`$TF_DATA_DIR` moves `.terraform`), and a directory that
//! was `terraform init`ed without one is on `default`. Found in the nearest directory
//! upward that has the data directory.

use std::path::PathBuf;

use super::{Ctx, Provider, Reading, Scope};

/// The provider.
pub static PROVIDER: Provider = Provider {
    name: "terraform",
    scope: Scope::Path,
    env: &["TF_WORKSPACE", "TF_DATA_DIR"],
    fields: &[
        (
            "workspace",
            "the workspace (null outside an initialised directory)",
        ),
        ("root", "the directory holding the data directory"),
    ],
    dynamic: None,
    per_client: false,
    read,
};

fn read(ctx: &Ctx) -> Reading {
    let mut r = ctx.reading();
    let Some(start) = ctx.path else { return r };
    let data = ctx
        .var("TF_DATA_DIR")
        .unwrap_or_else(|| ".terraform".into());
    let mut looked = Vec::new();
    let found = if PathBuf::from(&data).is_absolute() {
        let d = PathBuf::from(&data);
        looked.push(d.clone());
        d.is_dir().then(|| d.clone())
    } else {
        super::files::find_upward(start, &[&data], &mut looked).filter(|d| d.is_dir())
    };
    r.watched.extend(looked);
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
