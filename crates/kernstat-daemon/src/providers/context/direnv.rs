//! `direnv.*`: whether direnv would load this directory's `.envrc`, read from direnv's
//! own records without running it. direnv allows an `.envrc` by content: the allow
//! record is `$XDG_DATA_HOME/direnv/allow/SHA256(path + "\n" + contents)` (checked
//! against direnv 2.32's `direnv allow`), so an edited file is blocked again until
//! re-allowed; direnv ≥ 2.33 also records a denial as `direnv/deny/SHA256(path + "\n")`.
//! `loaded` says whether the asking shell has it loaded (`$DIRENV_DIR`).

use sha2::{Digest, Sha256};

use super::{Ctx, Provider, Reading};

/// The provider.
pub static PROVIDER: Provider = Provider {
    info: &kernstat_client::keys::context::DIRENV,
    read,
};

fn hex(d: impl AsRef<[u8]>) -> String {
    let mut s = String::with_capacity(64);
    for b in d.as_ref() {
        s.push(char::from(b"0123456789abcdef"[usize::from(b >> 4)]));
        s.push(char::from(b"0123456789abcdef"[usize::from(b & 15)]));
    }
    s
}

fn read(ctx: &Ctx) -> Reading {
    let mut r = ctx.reading();
    let Some(start) = ctx.path else { return r };
    // The upward search reads the file it finds: its bytes are hashed anyway.
    let Some((envrc, contents)) = r.read_upward_bytes(start, &[".envrc"]) else {
        return r;
    };
    let Some(data) = ctx.data_home().map(|d| d.join("direnv")) else {
        return r;
    };
    let path = envrc.to_string_lossy();
    let mut h = Sha256::new();
    h.update(path.as_bytes());
    h.update(b"\n");
    let path_hash = hex(h.clone().finalize());
    h.update(&contents);
    let allow = data.join("allow").join(hex(h.finalize()));
    let deny = data.join("deny").join(path_hash);
    let status = if r.exists(&deny) {
        "denied"
    } else if r.exists(&allow) {
        "allowed"
    } else {
        "blocked"
    };
    let dir = envrc.parent().map(|d| d.to_string_lossy().into_owned());
    let loaded = match (ctx.var("DIRENV_DIR"), &dir) {
        (Some(v), Some(d)) => v.strip_prefix('-') == Some(d.as_str()),
        _ => false,
    };
    r.set("status", status);
    r.set("allowed", status == "allowed");
    r.set("envrc", path.into_owned());
    r.set("loaded", loaded);
    r
}
