//! `kernstat eval`'s templates: text with `{key}` fields (`{git.branch}`, `{load.one}`),
//! `{{` and `}}` for literal braces. Parsed once, so that every key is known before the
//! one round trip that fetches them all.

use std::fmt;

/// One piece of a template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    /// Literal text.
    Text(String),
    /// A key to fill in.
    Key(String),
}

/// Why a template was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FillError {
    /// Byte offset of the problem.
    pub at: usize,
    /// What is wrong.
    pub what: &'static str,
}

impl fmt::Display for FillError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "template, byte {}: {}", self.at, self.what)
    }
}

impl std::error::Error for FillError {}

fn key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | ':')
}

/// Splits `src` into text and keys.
pub fn parse(src: &str) -> Result<Vec<Piece>, FillError> {
    let mut out = Vec::new();
    let mut text = String::new();
    let mut chars = src.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '{' if chars.peek().map(|&(_, c)| c) == Some('{') => {
                chars.next();
                text.push('{');
            }
            '}' if chars.peek().map(|&(_, c)| c) == Some('}') => {
                chars.next();
                text.push('}');
            }
            '}' => {
                return Err(FillError {
                    at: i,
                    what: "a lone `}` (write `}}` for a brace)",
                })
            }
            '{' => {
                let mut key = String::new();
                loop {
                    match chars.next() {
                        Some((_, '}')) => break,
                        Some((_, c)) if key_char(c) => key.push(c),
                        Some((j, _)) => {
                            return Err(FillError {
                                at: j,
                                what: "a key holds only letters, digits and . _ - :",
                            })
                        }
                        None => {
                            return Err(FillError {
                                at: i,
                                what: "`{` without its `}` (write `{{` for a brace)",
                            })
                        }
                    }
                }
                if key.is_empty() {
                    return Err(FillError {
                        at: i,
                        what: "an empty `{}`",
                    });
                }
                if !text.is_empty() {
                    out.push(Piece::Text(std::mem::take(&mut text)));
                }
                out.push(Piece::Key(key));
            }
            c => text.push(c),
        }
    }
    if !text.is_empty() {
        out.push(Piece::Text(text));
    }
    Ok(out)
}

/// The keys a template names, each once, in order.
pub fn keys(pieces: &[Piece]) -> Vec<&str> {
    let mut v: Vec<&str> = Vec::new();
    for p in pieces {
        if let Piece::Key(k) = p {
            if !v.contains(&k.as_str()) {
                v.push(k);
            }
        }
    }
    v
}

/// The template with each key replaced by `value(key)`.
pub fn render(pieces: &[Piece], mut value: impl FnMut(&str) -> String) -> String {
    let mut s = String::new();
    for p in pieces {
        match p {
            Piece::Text(t) => s.push_str(t),
            Piece::Key(k) => s.push_str(&value(k)),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_and_braces() {
        let p = parse("{git.branch} {{x}} {load.one}%").unwrap();
        assert_eq!(keys(&p), vec!["git.branch", "load.one"]);
        assert_eq!(render(&p, |k| k.len().to_string()), "10 {x} 8%");
        assert_eq!(parse("a { b").unwrap_err().at, 3);
        assert!(parse("}").is_err());
        assert!(parse("{}").is_err());
        assert!(parse("{a b}").is_err());
        assert_eq!(parse("").unwrap(), vec![]);
    }
}
