//! Property tests of `kernstat eval`'s templates (fill.rs): any string parses or is refused at a byte
//! offset inside it; text with its braces doubled comes back unchanged; keys come back
//! in order.
use kernstat_client::fill::{keys, parse, render, Piece};
use proptest::prelude::*;

proptest! {
    #[test]
    fn any_string_parses_or_is_refused_inside_it(src in ".{0,200}") {
        match parse(&src) {
            Ok(p) => { let _ = render(&p, |k| k.to_string()); }
            Err(e) => prop_assert!(e.at <= src.len()),
        }
    }

    #[test]
    fn escaped_text_and_keys_round_trip(
        parts in proptest::collection::vec(prop_oneof![
            "[a-z][a-z0-9_.]{0,12}".prop_map(|k| (format!("{{{k}}}"), Piece::Key(k))),
            ".{0,12}".prop_map(|t| (t.replace('{', "{{").replace('}', "}}"), Piece::Text(t))),
        ], 0..12)
    ) {
        let src: String = parts.iter().map(|(s, _)| s.as_str()).collect();
        let pieces = parse(&src).unwrap();
        let want: String = parts.iter().map(|(_, p)| match p {
            Piece::Text(t) => t.clone(),
            Piece::Key(k) => format!("<{k}>"),
        }).collect();
        prop_assert_eq!(render(&pieces, |k| format!("<{k}>")), want);
        let want_keys: Vec<&str> = parts.iter().filter_map(|(_, p)| match p {
            Piece::Key(k) => Some(k.as_str()),
            _ => None,
        }).collect();
        let mut dedup: Vec<&str> = Vec::new();
        for k in want_keys { if !dedup.contains(&k) { dedup.push(k); } }
        prop_assert_eq!(keys(&pieces), dedup);
    }
}
