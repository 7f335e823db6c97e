//! `asdf.*`: the tool versions asdf would use in a directory: the nearest
//! `.tool-versions` upward (`$ASDF_DEFAULT_TOOL_VERSIONS_FILENAME` renames it), else the
//! one in the home directory. One field per tool (`asdf.nodejs` = `20.11.0`, the first
//! version of its line, the one asdf selects), and `asdf.file`.

use super::{Ctx, Provider, Reading};

/// The provider.
pub static PROVIDER: Provider = Provider {
    info: &kernstat_client::keys::context::ASDF,
    read,
};

/// (tool, first version) of each line of a .tool-versions file.
pub fn parse(text: &str) -> Vec<(&str, &str)> {
    text.lines()
        .filter_map(|l| {
            let l = l.split('#').next()?.trim();
            let mut words = l.split_whitespace();
            Some((words.next()?, words.next()?))
        })
        .collect()
}

fn read(ctx: &Ctx) -> Reading {
    let mut r = ctx.reading();
    let Some(start) = ctx.path else { return r };
    let name = ctx
        .var("ASDF_DEFAULT_TOOL_VERSIONS_FILENAME")
        .unwrap_or_else(|| ".tool-versions".into());
    let found = r.read_upward(start, &[&name]).or_else(|| {
        let home = ctx.home()?.join(&name);
        let text = r.read(&home)?;
        Some((home, text))
    });
    let Some((file, text)) = found else { return r };
    for (tool, version) in parse(&text) {
        if tool != "file" && !r.fields.iter().any(|(f, _)| f == tool) {
            r.set(tool, version);
        }
    }
    r.set("file", file.to_string_lossy().into_owned());
    r
}
