//! `aws.*`: the AWS profile a shell uses and its region. The profile is
//! `$AWS_PROFILE`, else `$AWS_VAULT` (set inside `aws-vault exec`), else
//! `$AWS_DEFAULT_PROFILE`, else `default`; the region is `$AWS_REGION`, else
//! `$AWS_DEFAULT_REGION`, else the profile's `region` in the config file
//! (`$AWS_CONFIG_FILE`, default `~/.aws/config`: `[default]` and `[profile NAME]`
//! sections), as the AWS CLI resolves them.

use std::path::PathBuf;

use super::files::ini_value;
use super::{Ctx, Provider, Reading};

/// The provider.
pub static PROVIDER: Provider = Provider {
    info: &kernstat_client::keys::context::AWS,
    read,
};

fn read(ctx: &Ctx) -> Reading {
    let mut r = ctx.reading();
    let explicit = ctx
        .var("AWS_PROFILE")
        .or_else(|| ctx.var("AWS_VAULT"))
        .or_else(|| ctx.var("AWS_DEFAULT_PROFILE"));
    let file = ctx
        .var("AWS_CONFIG_FILE")
        .map(PathBuf::from)
        .or_else(|| Some(ctx.home()?.join(".aws/config")));
    let text = file.as_deref().and_then(|f| r.read(f));
    if explicit.is_none() && text.is_none() && ctx.var("AWS_REGION").is_none() {
        return r; // no AWS here at all
    }
    let profile = explicit.unwrap_or_else(|| "default".to_string());
    let section = if profile == "default" {
        "default".to_string()
    } else {
        format!("profile {profile}")
    };
    let exists = text
        .as_deref()
        .is_some_and(|t| t.lines().any(|l| header_is(l, &section)));
    let region = ctx
        .var("AWS_REGION")
        .or_else(|| ctx.var("AWS_DEFAULT_REGION"))
        .or_else(|| ini_value(text.as_deref()?, &section, "region").map(str::to_string));
    r.set("profile", profile);
    r.set("region", region);
    r.set("profile_exists", exists);
    r
}

fn header_is(line: &str, section: &str) -> bool {
    line.trim()
        .strip_prefix('[')
        .and_then(|l| l.strip_suffix(']'))
        .is_some_and(|n| n.trim() == section)
}
