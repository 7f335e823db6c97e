//! How `kernstat get` prints values for people, shells and spreadsheets: one place that
//! turns (key, value) pairs into text, JSON, `KS_KEY='value'` lines, TSV or CSV, so
//! that every format quotes the same values the same way.

use std::fmt::Write as _;

use serde_json::Value;

/// How `get` prints values (the CLI's `--format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// Each value on its own line (strings bare; a provider's fields as field=value lines).
    #[default]
    Text,
    /// One JSON object, key to value (null without one).
    Json,
    /// KS_KEY='value' lines sh, bash and zsh can eval (KS_GIT_BRANCH, KS_LOAD_ONE).
    Shell,
    /// `set -g KS_KEY 'value'` lines fish can eval.
    Fish,
    /// key<TAB>value lines.
    Tsv,
    /// key,value lines (RFC 4180 quoting).
    Csv,
}

/// Every format: its name on the command line, and what it prints.
pub const FORMATS: [(&str, Format, &str); 6] = [
    (
        "text",
        Format::Text,
        "each value on its own line (strings bare; a provider's fields as field=value lines)",
    ),
    (
        "json",
        Format::Json,
        "one JSON object, key to value (null without one)",
    ),
    (
        "shell",
        Format::Shell,
        "KS_KEY='value' lines sh, bash and zsh can eval (KS_GIT_BRANCH, KS_LOAD_ONE)",
    ),
    (
        "fish",
        Format::Fish,
        "`set -g KS_KEY 'value'` lines fish can eval",
    ),
    ("tsv", Format::Tsv, "key<TAB>value lines"),
    ("csv", Format::Csv, "key,value lines (RFC 4180 quoting)"),
];

impl Format {
    /// The format named `name` (one of [`FORMATS`]).
    pub fn by_name(name: &str) -> Option<Format> {
        FORMATS
            .iter()
            .find(|(n, _, _)| *n == name)
            .map(|(_, f, _)| *f)
    }
}

/// A value as one line of text: strings bare, null empty, anything else as JSON.
pub fn text(v: &Value) -> String {
    crate::session::value_text(v)
}

/// The shell variable for `key`: `KS_` and the key upper-cased, anything but letters
/// and digits as `_` (`git.branch` → `KS_GIT_BRANCH`).
pub fn shell_name(key: &str) -> String {
    let mut s = String::from("KS_");
    s.extend(key.chars().map(|c| {
        if c.is_ascii_alphanumeric() {
            c.to_ascii_uppercase()
        } else {
            '_'
        }
    }));
    s
}

/// `s` in single quotes, safe to `eval` in any POSIX shell (sh, bash, zsh). Not fish,
/// where `\'` is an escape inside quotes: [`fish_quote`].
pub fn shell_quote(s: &str) -> String {
    let mut q = String::with_capacity(s.len() + 2);
    q.push('\'');
    for c in s.chars() {
        if c == '\'' {
            q.push_str("'\\''");
        } else {
            q.push(c);
        }
    }
    q.push('\'');
    q
}

/// `s` in single quotes for fish: `\\` and `\'` are fish's only escapes inside them.
pub fn fish_quote(s: &str) -> String {
    format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Tabs and newlines in a TSV field would break its row: shown as \t and \n.
fn tsv_field(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('\t', "\\t")
        .replace('\n', "\\n")
        .replace('\r', "\\r")
}

/// (key, value) rows: a provider's object (asked for by its name) becomes one row per
/// field, `provider.field`.
fn rows(key: &str, v: &Value, whole: bool, out: &mut Vec<(String, Value)>) {
    match (whole, v) {
        (true, Value::Object(m)) => {
            for (f, fv) in m {
                out.push((format!("{key}.{f}"), fv.clone()));
            }
        }
        _ => out.push((key.to_string(), v.clone())),
    }
}

/// Renders `values` (key, value or None, whether the key names a whole provider). JSON
/// objects list their keys sorted.
pub fn render(format: Format, values: &[(String, Option<Value>, bool)]) -> String {
    let mut s = String::new();
    if format == Format::Json {
        let mut m = serde_json::Map::new();
        for (k, v, _) in values {
            m.insert(k.clone(), v.clone().unwrap_or(Value::Null));
        }
        let _ = writeln!(s, "{}", Value::Object(m));
        return s;
    }
    let mut flat = Vec::new();
    for (k, v, whole) in values {
        rows(k, v.as_ref().unwrap_or(&Value::Null), *whole, &mut flat);
    }
    for (k, v) in &flat {
        let t = text(v);
        let _ = match format {
            Format::Text if values.len() == 1 && values[0].2 => {
                writeln!(s, "{}={t}", k.split_once('.').map_or(k.as_str(), |x| x.1))
            }
            Format::Text => writeln!(s, "{t}"),
            Format::Shell => writeln!(s, "{}={}", shell_name(k), shell_quote(&t)),
            Format::Fish => writeln!(s, "set -g {} {}", shell_name(k), fish_quote(&t)),
            Format::Tsv => writeln!(s, "{}\t{}", tsv_field(k), tsv_field(&t)),
            Format::Csv => writeln!(s, "{},{}", csv_field(k), csv_field(&t)),
            Format::Json => Ok(()),
        };
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn v(k: &str, j: Value, whole: bool) -> (String, Option<Value>, bool) {
        (k.to_string(), Some(j), whole)
    }

    #[test]
    fn every_format() {
        let vals = vec![
            v("git.branch", json!("it's"), false),
            v("load.one", json!(0.5), false),
            ("battery.percent".to_string(), None, false),
        ];
        assert_eq!(render(Format::Text, &vals), "it's\n0.5\n\n");
        assert_eq!(
            render(Format::Shell, &vals),
            "KS_GIT_BRANCH='it'\\''s'\nKS_LOAD_ONE='0.5'\nKS_BATTERY_PERCENT=''\n"
        );
        assert_eq!(
            render(Format::Json, &vals),
            "{\"battery.percent\":null,\"git.branch\":\"it's\",\"load.one\":0.5}\n"
        );
        let odd = vec![v("a", json!("x,\"y\"\tz"), false)];
        assert_eq!(render(Format::Csv, &odd), "a,\"x,\"\"y\"\" z\"\n");
        assert_eq!(render(Format::Tsv, &odd), "a\tx,\"y\" z\n");
        assert_eq!(
            render(Format::Fish, &vals),
            "set -g KS_GIT_BRANCH 'it\\'s'\nset -g KS_LOAD_ONE '0.5'\nset -g KS_BATTERY_PERCENT ''\n"
        );
    }

    /// A value from a hostile repository or a put (ESC, BEL, C1 CSI, newlines) reaches
    /// no terminal raw, in any text format; JSON escapes it.
    #[test]
    fn control_characters_never_reach_the_terminal() {
        let evil = vec![v("git.branch", json!("x\u{1b}]0;T\u{7}\u{9b}2J\ny"), false)];
        for f in [
            Format::Text,
            Format::Shell,
            Format::Fish,
            Format::Tsv,
            Format::Csv,
        ] {
            let out = render(f, &evil);
            // (TSV's own separator is a tab.)
            let value = out.trim_end_matches('\n').split('\t').next_back().unwrap();
            assert!(!value.chars().any(char::is_control), "{f:?}: {out:?}");
        }
        assert!(render(Format::Json, &evil).contains("\\u001b"));
        // fish: a backslash and a quote stay inside the one argument.
        assert_eq!(fish_quote("x\\'; rm -rf ~; '"), "'x\\\\\\'; rm -rf ~; \\''");
    }

    #[test]
    fn a_whole_provider_is_one_row_per_field() {
        let vals = vec![v(
            "aws",
            json!({"profile": "dev", "region": "eu-west-1"}),
            true,
        )];
        assert_eq!(
            render(Format::Text, &vals),
            "profile=dev\nregion=eu-west-1\n"
        );
        assert_eq!(
            render(Format::Shell, &vals),
            "KS_AWS_PROFILE='dev'\nKS_AWS_REGION='eu-west-1'\n"
        );
    }

    #[test]
    fn shell_output_evals_back_to_the_values() {
        // Every byte but NUL survives a round trip through sh.
        let nasty = "a'b\"c$d`e\\f\ng h*;|&";
        let line = format!("{}={}", shell_name("x.y"), shell_quote(nasty));
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{line}; printf %s \"$KS_X_Y\""))
            .output()
            .unwrap();
        assert_eq!(String::from_utf8(out.stdout).unwrap(), nasty);
    }
}
