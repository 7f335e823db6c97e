//! Property tests of the bar's template parser (user input from `--text`): any string
//! parses or is refused with a TemplateError, never a panic; what parses renders; and a
//! template made of known fields and escaped literal text always parses and renders the
//! literal text unchanged.

use kernstat_model::Model;
use kernstat_render::template::{Extras, Template, FIELDS};
use proptest::prelude::*;

/// Field names the template knows, from the parser's own list.
fn known_field() -> impl Strategy<Value = String> {
    prop::sample::select(
        FIELDS
            .iter()
            .map(|(name, _, _)| name.to_string())
            .collect::<Vec<_>>(),
    )
}

proptest! {
    #[test]
    fn any_string_parses_or_is_refused(src in ".{0,200}") {
        if let Ok(t) = Template::parse(&src) {
            let mut out = String::new();
            t.render(&mut out, &Model::default(), &Extras::default()).unwrap();
            let marked = Extras { self_cost_percent: Some(1.0), markup: true };
            t.render(&mut out, &Model::default(), &marked).unwrap();
        }
    }

    #[test]
    fn braces_anywhere_never_panic(src in "[{}a-z_ ]{0,64}") {
        let _ = Template::parse(&src);
    }

    #[test]
    fn fields_and_escaped_text_always_parse(
        parts in proptest::collection::vec(prop_oneof![
            known_field().prop_map(|f| (format!("{{{f}}}"), None)),
            "[^{}]{0,12}".prop_map(|t| (t.clone(), Some(t))),
            Just(("{{".to_string(), Some("{".to_string()))),
            Just(("}}".to_string(), Some("}".to_string()))),
        ], 0..12),
    ) {
        let src: String = parts.iter().map(|(s, _)| s.as_str()).collect();
        let t = Template::parse(&src).unwrap();
        // With no field in it, the template renders as exactly its literal text.
        if parts.iter().all(|(_, lit)| lit.is_some()) {
            let mut out = String::new();
            t.render(&mut out, &Model::default(), &Extras::default()).unwrap();
            let expect: String = parts.iter().filter_map(|(_, l)| l.clone()).collect();
            prop_assert_eq!(out, expect);
        }
    }
}

// `kernstat eval`'s templates (fill.rs): any string parses or is refused at a byte
// offset inside it; text with its braces doubled comes back unchanged; keys come back
// in order.
mod fill_props {
    use kernstat_render::fill::{keys, parse, render, Piece};
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
}
