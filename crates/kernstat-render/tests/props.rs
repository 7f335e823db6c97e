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
