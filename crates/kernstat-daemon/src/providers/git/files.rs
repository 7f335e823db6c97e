//! The git keys that come from the repository's own files: HEAD (branch, or a detached
//! commit), the branch's ref (a loose file or packed-refs), a tag pointing at the
//! commit (loose lightweight and annotated tags, packed tags with their peeled lines),
//! logs/refs/stash, the markers of an operation in progress, and the upstream and push
//! branch from config. Worktrees (`.git` files, commondir) are followed.
//!
//! A prompt asks about whatever directory it is in, so the repository may be hostile
//! (an unpacked archive, a shared directory, another user's tree through the system
//! daemon): every file is read through `client_files` — resolved from descriptors,
//! links followed by hand, regular files only, with the asking user's rights, and
//! within a cap. Files that may be large (packed-refs, the stash log) are streamed
//! with a bounded line length rather than read whole.
//!
//! Why not gix here, as for the counts: opening a repository with gix reads its config
//! and refs with the daemon's rights through std I/O (links followed, no size cap, a
//! FIFO blocks) — fine for a user's own daemon, where the counts run, but not for keys
//! the system daemon serves every user; and it costs: measured on this VM (release,
//! 2,000 runs, a repository with one loose annotated tag), `gix::open` and peeling the
//! tag took 141 µs, peeling in a repository kept open 28 µs, the 256 bytes read here
//! 7.6 µs. What is parsed by hand is small and git's own format for it is fixed: a ref
//! file (`ref: NAME` or an id), packed-refs lines, and the first 256 bytes of a loose
//! annotated tag (`object ID`). The config file is parsed with gix-config.

use std::io::{self, BufRead};
use std::path::Path;

use crate::client_files::{Rights, Walk};

use super::GitInfo;

/// Largest small file read (HEAD, a loose ref, a `.git` file, commondir, msgnum).
const SMALL: u64 = 64 * 1024;
/// Largest config file read.
const CONFIG: u64 = 4 << 20;
/// Most bytes streamed from packed-refs or the stash log (larger: read no further).
const STREAM: u64 = 256 << 20;
/// Longest line accepted in a streamed file (a ref line is an id and a name).
const LINE: usize = 64 * 1024;
/// Most loose tags looked at, and how deep their directories may nest.
const MAX_TAGS: usize = 100_000;
const TAG_DEPTH: usize = 16;

/// A repository found from a directory: its work tree, its git directory and the
/// directory refs live in (differs for linked worktrees), all reached with one set of
/// rights.
#[derive(Clone, Debug)]
pub struct Repo {
    /// The work tree's top directory.
    pub work: Walk,
    /// Its `.git` directory (or a linked worktree's).
    pub git: Walk,
    /// The common directory (refs, packed-refs, config, objects).
    pub common: Walk,
}

fn invalid(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

/// Finds the repository containing `dir`, as git does: `.git` in it or the nearest
/// ancestor, a directory or a `gitdir:` file.
pub fn discover(dir: &Path, rights: &Rights) -> io::Result<Repo> {
    let mut w = Walk::to(dir, rights)?;
    loop {
        use rustix::fs::FileType;
        match w.kind(Path::new(".git"))? {
            Some(FileType::Directory) => {
                let git = w.dir(Path::new(".git"))?;
                let common = common_dir(&git)?;
                return Ok(Repo {
                    work: w,
                    git,
                    common,
                });
            }
            Some(FileType::RegularFile) => {
                let text = String::from_utf8_lossy(&w.read(Path::new(".git"), SMALL)?).into_owned();
                let rel = text
                    .trim()
                    .strip_prefix("gitdir:")
                    .ok_or_else(|| invalid(".git file without gitdir:".into()))?
                    .trim()
                    .to_string();
                let git = w.dir(Path::new(&rel))?;
                let common = common_dir(&git)?;
                return Ok(Repo {
                    work: w,
                    git,
                    common,
                });
            }
            Some(other) => return Err(invalid(format!(".git is a {other:?}"))),
            None if w.depth() == 0 => {
                return Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    "not in a git repository",
                ))
            }
            None => w = w.parent(),
        }
    }
}

fn common_dir(git: &Walk) -> io::Result<Walk> {
    match git.read(Path::new("commondir"), SMALL) {
        Ok(c) => git.dir(Path::new(String::from_utf8_lossy(&c).trim())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(git.clone()),
        Err(e) => Err(e),
    }
}

fn is_hex_id(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A small file's text, None when it is absent; an unreadable or oversized one is an
/// error.
fn small(dir: &Walk, rel: &str) -> io::Result<Option<String>> {
    match dir.read(Path::new(rel), SMALL) {
        Ok(b) => Ok(Some(String::from_utf8_lossy(&b).into_owned())),
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
            ) =>
        {
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

/// Calls `each(line)` for every line of `rel` (absent: none), streamed: at most
/// `STREAM` bytes, lines of at most `LINE` bytes; `each` returns false to stop.
fn stream_lines(dir: &Walk, rel: &str, mut each: impl FnMut(&str) -> bool) -> io::Result<()> {
    use std::io::Read;
    let f = match dir.open(Path::new(rel)) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    let mut r = io::BufReader::with_capacity(64 * 1024, f.take(STREAM));
    let mut line = Vec::with_capacity(128);
    loop {
        line.clear();
        let n = (&mut r).take(LINE as u64 + 1).read_until(b'\n', &mut line);
        match n {
            Ok(0) => return Ok(()),
            Ok(_) if line.len() > LINE && line.last() != Some(&b'\n') => {
                return Err(invalid(format!("{rel}: a line longer than {LINE} bytes")))
            }
            Ok(_) => {
                let text = String::from_utf8_lossy(&line);
                if !each(text.trim_end_matches(['\n', '\r'])) {
                    return Ok(());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

/// Packed refs as (name, id, peeled id) to `each`, until it returns false.
fn packed_refs(
    common: &Walk,
    mut each: impl FnMut(&str, &str, Option<&str>) -> bool,
) -> io::Result<()> {
    let mut pending: Option<(String, String)> = None;
    let mut go_on = true;
    stream_lines(common, "packed-refs", |line| {
        if line.starts_with('#') {
            return true;
        }
        if let Some(peeled) = line.strip_prefix('^') {
            if let Some((name, id)) = pending.take() {
                go_on = each(&name, &id, Some(peeled.trim()));
            }
            return go_on;
        }
        if let Some((name, id)) = pending.take() {
            go_on = each(&name, &id, None);
            if !go_on {
                return false;
            }
        }
        if let Some((id, name)) = line.split_once(' ') {
            pending = Some((name.trim().to_string(), id.to_string()));
        }
        true
    })?;
    if let (true, Some((name, id))) = (go_on, pending) {
        each(&name, &id, None);
    }
    Ok(())
}

/// The id `name` (a full ref name) points to: a loose ref in the worktree's or the
/// common directory (following `ref:` lines, at most 5 deep), else packed-refs.
fn resolve(repo: &Repo, name: &str, depth: u32) -> io::Result<Option<String>> {
    if depth > 5 || name.contains("..") || name.starts_with('/') {
        return Ok(None);
    }
    for base in [&repo.git, &repo.common] {
        if let Some(t) = small(base, name)? {
            let t = t.trim();
            if let Some(r) = t.strip_prefix("ref: ") {
                return resolve(repo, r.trim(), depth + 1);
            }
            if is_hex_id(t) {
                return Ok(Some(t.to_string()));
            }
        }
    }
    let mut found = None;
    packed_refs(&repo.common, |n, id, _| {
        if n == name {
            found = Some(id.to_string());
            return false;
        }
        true
    })?;
    Ok(found)
}

/// Loose tags under refs/tags as (name, id), depth-first.
fn loose_tags(dir: &Walk, prefix: &str, depth: usize, out: &mut Vec<(String, String)>) {
    use rustix::fs::FileType;
    if depth > TAG_DEPTH || out.len() >= MAX_TAGS {
        return;
    }
    let Ok(entries) = dir.list(Path::new("."), MAX_TAGS) else {
        return;
    };
    for (name, kind) in entries {
        let name = name.to_string_lossy().into_owned();
        let full = format!("{prefix}{name}");
        match kind {
            FileType::Directory => {
                if let Ok(sub) = dir.dir(Path::new(&name)) {
                    loose_tags(&sub, &format!("{full}/"), depth + 1, out);
                }
            }
            _ => {
                if let Ok(Some(id)) = small(dir, &name) {
                    out.push((full, id.trim().to_string()));
                }
            }
        }
        if out.len() >= MAX_TAGS {
            return;
        }
    }
}

/// The first 256 bytes of loose object `id`, inflated (None: not loose, or damaged).
fn loose_object_head(common: &Walk, id: &str) -> Option<Vec<u8>> {
    use std::io::Read;
    if !is_hex_id(id) {
        return None;
    }
    let f = common
        .open(&Path::new("objects").join(&id[..2]).join(&id[2..]))
        .ok()?;
    // 256 inflated bytes never need more than a few KiB of the stream.
    let mut z = flate2::read::ZlibDecoder::new(f.take(64 * 1024));
    let mut head = vec![0u8; 256];
    let mut n = 0;
    while n < head.len() {
        match z.read(&mut head[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(_) => return None,
        }
    }
    head.truncate(n);
    Some(head)
}

/// The commit an annotated tag object points to, when the object is loose (as `git tag
/// -a` leaves it until the next gc packs it, and then packed-refs carries the peeled
/// id): `tag SIZE\0object ID\n...`; tags of tags are followed (4 deep).
fn peel_loose(common: &Walk, id: &str) -> Option<String> {
    let mut id = id.to_string();
    for _ in 0..4 {
        let head = loose_object_head(common, &id)?;
        if !head.starts_with(b"tag ") {
            return None;
        }
        let body = &head[head.iter().position(|&b| b == 0)? + 1..];
        let target = std::str::from_utf8(
            body.strip_prefix(b"object ")?
                .split(|&b| b == b'\n')
                .next()?,
        )
        .ok()?
        .to_string();
        if target == id || !is_hex_id(&target) {
            return None;
        }
        let next_is_tag =
            loose_object_head(common, &target).is_some_and(|h| h.starts_with(b"tag "));
        id = target;
        if !next_is_tag {
            return Some(id);
        }
    }
    None
}

/// The config file, parsed by gix-config (None: absent, unreadable or not a config).
fn config(common: &Walk) -> Option<gix::config::File> {
    let bytes = common.read(Path::new("config"), CONFIG).ok()?;
    gix::config::File::from_bytes_no_includes(
        &bytes,
        gix::config::file::Metadata::default(),
        gix::config::file::init::Options::default(),
    )
    .ok()
}

fn setting(
    config: &gix::config::File,
    section: &str,
    sub: Option<&str>,
    key: &str,
) -> Option<String> {
    use gix::bstr::ByteSlice;
    config
        .string_by(section, sub.map(|s| s.as_bytes().as_bstr()), key)
        .map(|v| v.to_str_lossy().trim().to_string())
        .filter(|v| !v.is_empty())
}

/// The branch's upstream as `remote/branch` (`./branch` for a local one).
fn upstream(config: &gix::config::File, branch: &str) -> Option<String> {
    let remote = setting(config, "branch", Some(branch), "remote")?;
    let merge = setting(config, "branch", Some(branch), "merge")?;
    Some(format!(
        "{remote}/{}",
        merge.trim_start_matches("refs/heads/")
    ))
}

/// The remote-tracking ref HEAD's branch pushes to, as `git push` with push.default
/// simple/current chooses the remote: `branch.B.pushRemote`, else `remote.pushDefault`,
/// else `branch.B.remote`; the branch of the same name there.
fn push_ref(config: &gix::config::File, branch: &str) -> Option<String> {
    let r = setting(config, "branch", Some(branch), "pushRemote")
        .or_else(|| setting(config, "remote", None, "pushDefault"))
        .or_else(|| setting(config, "branch", Some(branch), "remote"))?;
    (r != ".").then(|| format!("refs/remotes/{r}/{branch}"))
}

/// HEAD as git reads it: a `ref: NAME` line, an id, or (core.preferSymlinkRefs) a
/// symbolic link whose target is the ref's name — its text, never followed.
fn head(git: &Walk) -> io::Result<String> {
    if let Some(target) = git.link_target("HEAD")? {
        let t = target.to_string_lossy();
        return match t.strip_prefix("refs/") {
            Some(_) => Ok(format!("ref: {t}")),
            None => Err(invalid("HEAD is a symbolic link outside refs/".into())),
        };
    }
    small(git, "HEAD")?.ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no HEAD"))
}

/// A ref name as git accepts it (git check-ref-format, the parts a prompt could be
/// fooled by): printable, no spaces or control characters, no `..`, `~^:?*[\`.
fn valid_ref_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 1024
        && !name.contains("..")
        && !name.contains("//")
        && !name.contains("/.")
        && !name.starts_with('.')
        && !name.contains("@{")
        && !name.starts_with('/')
        && !name.ends_with('/')
        && !name.ends_with(".lock")
        && name
            .chars()
            .all(|c| !c.is_control() && !c.is_whitespace() && !"~^:?*[\\".contains(c))
}

/// Reads everything for the repository containing `dir`, with `rights`.
pub fn read(dir: &Path, rights: &Rights) -> io::Result<GitInfo> {
    let repo = discover(dir, rights)?;
    let head = head(&repo.git)?;
    let head = head.trim();
    let (branch, commit, detached) = match head.strip_prefix("ref: ") {
        Some(r) => {
            let r = r.trim();
            if !valid_ref_name(r) {
                return Err(invalid("HEAD names an invalid ref".into()));
            }
            (
                Some(r.trim_start_matches("refs/heads/").to_string()),
                resolve(&repo, r, 0)?,
                false,
            )
        }
        None if is_hex_id(head) => (None, Some(head.to_string()), true),
        None => return Err(invalid("unreadable HEAD".into())),
    };
    let common = &repo.common;
    let tag = match &commit {
        None => None,
        Some(c) => {
            let mut loose = Vec::new();
            if let Ok(tags) = common.dir(Path::new("refs/tags")) {
                loose_tags(&tags, "", 0, &mut loose);
            }
            loose.sort();
            let found = loose
                .into_iter()
                .find(|(_, id)| id == c || peel_loose(common, id).as_deref() == Some(c.as_str()))
                .map(|(n, _)| n);
            match found {
                Some(t) => Some(t),
                None => {
                    let mut packed = None;
                    packed_refs(common, |n, id, peeled| {
                        if let Some(t) = n.strip_prefix("refs/tags/") {
                            if peeled.unwrap_or(id) == c {
                                packed = Some(t.to_string());
                                return false;
                            }
                        }
                        true
                    })?;
                    packed
                }
            }
        }
    }
    .filter(|t| valid_ref_name(t));
    let mut stash = 0u64;
    stream_lines(common, "logs/refs/stash", |_| {
        stash += 1;
        true
    })?;
    let git = &repo.git;
    let has = |rel: &str| git.exists(Path::new(rel));
    let state = if has("rebase-merge")? || has("rebase-apply")? {
        "rebase"
    } else if has("MERGE_HEAD")? {
        "merge"
    } else if has("CHERRY_PICK_HEAD")? {
        "cherry-pick"
    } else if has("REVERT_HEAD")? {
        "revert"
    } else if has("BISECT_LOG")? {
        "bisect"
    } else {
        "none"
    };
    let config = config(common);
    let upstream = branch
        .as_deref()
        .zip(config.as_ref())
        .and_then(|(b, c)| upstream(c, b))
        .filter(|u| {
            u.split('/').all(|p| !p.is_empty()) && valid_ref_name(u.trim_start_matches("./"))
        });
    let push_ref = branch
        .as_deref()
        .zip(config.as_ref())
        .and_then(|(b, c)| push_ref(c, b))
        .filter(|r| valid_ref_name(r));
    // As git-prompt.sh reads them: rebase-merge/{msgnum,end}, rebase-apply/{next,last}.
    let num = |rel: String| -> Option<u64> { small(git, &rel).ok()??.trim().parse().ok() };
    let steps = [
        ("rebase-merge", "msgnum", "end"),
        ("rebase-apply", "next", "last"),
    ]
    .iter()
    .find_map(|(dir, step, total)| {
        Some((
            num(format!("{dir}/{step}"))?,
            num(format!("{dir}/{total}"))?,
        ))
    });
    Ok(GitInfo {
        root: repo.work.path(),
        git_dir: repo.git.path(),
        common_dir: repo.common.path(),
        branch,
        commit,
        detached,
        tag,
        stash,
        state,
        upstream,
        steps,
        push_ref,
    })
}

/// The directory `path`'s repository, for stamps: (git dir, common dir).
pub fn dirs(path: &Path, rights: &Rights) -> io::Result<(Walk, Walk)> {
    let r = discover(path, rights)?;
    Ok((r.git, r.common))
}

/// The work tree's file `rel`, for line counts: regular files only, at most `cap`.
pub fn work_file(root: &Path, rel: &Path, cap: u64) -> Option<Vec<u8>> {
    Walk::to(root, &Rights::Own).ok()?.read(rel, cap).ok()
}

#[cfg(test)]
#[path = "files_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "files_props.rs"]
mod props;
