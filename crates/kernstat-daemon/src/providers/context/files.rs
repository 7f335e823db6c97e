//! How the context providers read the files other tools leave behind: bounded in size
//! (a provider never reads more than `MAX_FILE` of anything a client may name; the
//! reading itself is `client_files`', through `Reading`), and small INI files parsed
//! the way aws, gcloud and git write them.

/// Largest file a provider reads (kubeconfigs with many clusters are a few hundred KiB).
pub const MAX_FILE: u64 = 1 << 20;

/// Bytes as text, invalid UTF-8 replaced.
pub fn text(buf: Vec<u8>) -> String {
    match String::from_utf8(buf) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// One INI section's `key = value` pairs, as aws and gcloud write their files. Kept by
/// hand after a comparison (release, 100,000 parses of an aws config with profiles, an
/// sso-session and a nested `s3 =` block): rust-ini 0.21 gave the same pairs for every
/// section (it too lists the nested block's lines as keys of the profile, where botocore
/// would fold them into `s3`; no field kernstat reads is among them) at 5.2 µs a parse,
/// configparser 3 at 3.7 µs, this 0.46 µs — and a prompt reads these files after every
/// change. The section is the one whose header (inside the brackets, trimmed) equals
/// `section`; comments start with `#` or `;`.
pub fn ini_section<'a>(text: &'a str, section: &str) -> Vec<(&'a str, &'a str)> {
    let mut inside = false;
    let mut out = Vec::new();
    for line in text.lines() {
        let l = line.trim();
        if l.is_empty() || l.starts_with('#') || l.starts_with(';') {
            continue;
        }
        if let Some(rest) = l.strip_prefix('[') {
            inside = rest
                .strip_suffix(']')
                .is_some_and(|name| name.trim() == section);
            continue;
        }
        if inside {
            if let Some((k, v)) = l.split_once('=') {
                out.push((k.trim(), v.trim()));
            }
        }
    }
    out
}

/// The value of `key` in `section`, the last one when repeated (as aws and gcloud read).
pub fn ini_value<'a>(text: &'a str, section: &str, key: &str) -> Option<&'a str> {
    ini_section(text, section)
        .into_iter()
        .rev()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
        .filter(|v| !v.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn ini() {
        let t = "# c\n[default]\nregion = eu-west-1\n[profile dev]\n region=us-east-1 \n; x\nregion = us-east-2\n[ profile empty ]\nregion =\n";
        assert_eq!(ini_value(t, "default", "region"), Some("eu-west-1"));
        assert_eq!(ini_value(t, "profile dev", "region"), Some("us-east-2"));
        assert_eq!(ini_value(t, "profile empty", "region"), None);
        assert_eq!(ini_value(t, "profile none", "region"), None);
    }

    #[test]
    fn upward() {
        let d = tempfile::tempdir().unwrap();
        let deep = d.path().join("a/b/c");
        fs::create_dir_all(&deep).unwrap();
        fs::write(d.path().join("a/.tool-versions"), "nodejs 20\n").unwrap();
        // The upward search providers use: nearest first, every candidate watched.
        let mut r = super::super::Reading::default();
        let (found, text) = r.read_upward(&deep, &[".tool-versions"]).unwrap();
        assert_eq!(found, d.path().join("a/.tool-versions"));
        assert_eq!(text, "nodejs 20\n");
        let looked = r.watched;
        assert_eq!(looked.len(), 3);
        let mut r = super::super::Reading::default();
        assert!(
            r.read(&d.path().join("a")).is_none(),
            "a directory is not a file"
        );
        assert!(r.error.is_none(), "nor an error");
        // A FIFO where a file belongs: no value, no hang, and the reason.
        let fifo = d.path().join("fifo");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: c is a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(r.read(&fifo).is_none());
        assert!(r.error.unwrap().contains("not a regular file"));
    }
}
