//! One convention for `--sort` in every command: `KEY` sorts smallest first, `-KEY`
//! largest first (as `ps --sort -rss` does), whatever the column. Each command names
//! its columns; this only reads the sign.

/// A `--sort` value: the column's name and the direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SortSpec<'a> {
    /// The column's name, without the sign.
    pub key: &'a str,
    /// Largest first (`-KEY`).
    pub descending: bool,
}

impl<'a> SortSpec<'a> {
    /// `cpu` (ascending) or `-cpu` (descending).
    pub fn parse(s: &'a str) -> SortSpec<'a> {
        match s.strip_prefix('-') {
            Some(key) => SortSpec {
                key,
                descending: true,
            },
            None => SortSpec {
                key: s,
                descending: false,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_minus_sign_is_largest_first() {
        assert_eq!(
            SortSpec::parse("-cpu"),
            SortSpec {
                key: "cpu",
                descending: true
            }
        );
        assert!(!SortSpec::parse("pid").descending);
    }
}
