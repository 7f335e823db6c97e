//! The fields of `kernstat session`'s line protocol, which a shell speaks with builtins
//! only: a request's fields are separated by a TAB, and in them `\\`, `\n` and `\t`
//! stand for a backslash, a newline and a TAB; a reply is one value per line.

/// Control characters (a newline in a value) as spaces: one value, one line.
pub fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect()
}

/// `\\`, `\n`, `\t` in a request's field.
pub fn unescape(field: &str) -> String {
    if !field.contains('\\') {
        return field.to_string();
    }
    let mut out = String::with_capacity(field.len());
    let mut chars = field.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_unescape_and_values_stay_on_one_line() {
        assert_eq!(unescape(r"a\\b\nc\td"), "a\\b\nc\td");
        assert_eq!(unescape(r"plain"), "plain");
        assert_eq!(unescape(r"end\"), "end\\");
        assert_eq!(one_line("two\nlines\r\tx"), "two lines  x");
    }
}
