//! Property tests of the context providers' parsers, whose input is any file a user (or
//! a client naming a file) can put in their way: kubeconfigs, sudo's timestamp records,
//! .tool-versions, mise's TOML, INI files (aws, gcloud, pyvenv.cfg) — arbitrary bytes,
//! truncated, huge, invalid UTF-8. Each parses or yields nothing, never panics; and
//! every provider, given arbitrary contents in every file it reads, answers.
//! `make fuzz` runs them with many more cases.

use kernstat_daemon::providers::context::{self, asdf, files, kube, mise, sudo, Env, PROVIDERS};
use proptest::prelude::*;

/// Text that looks like the files: their keywords, indentation, quotes, brackets.
fn configish() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just("current-context: ".to_string()),
            Just("contexts:\n".to_string()),
            Just("- context:\n".to_string()),
            Just("  name: ".to_string()),
            Just("    namespace: ".to_string()),
            Just("[profile dev]\n".to_string()),
            Just("[core]\n".to_string()),
            Just("[tools]\n".to_string()),
            Just("region = ".to_string()),
            Just("\"".to_string()),
            Just("'".to_string()),
            Just(" # ".to_string()),
            Just("\n".to_string()),
            "[ -~]{0,12}",
            ".{0,6}",
        ],
        0..40,
    )
    .prop_map(|v| v.concat())
}

proptest! {
    #[test]
    fn kubeconfigs_parse_or_yield_nothing(text in configish()) {
        let c = kube::parse(&text);
        for ctx in &c.contexts {
            prop_assert!(!ctx.namespace.as_deref().is_some_and(str::is_empty));
        }
    }

    #[test]
    fn any_bytes_as_a_kubeconfig(bytes in proptest::collection::vec(any::<u8>(), 0..2048)) {
        let _ = kube::parse(&String::from_utf8_lossy(&bytes));
    }

    #[test]
    fn sudo_records_of_any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let recs = sudo::parse(&bytes);
        prop_assert!(recs.len() * 56 <= bytes.len());
    }

    #[test]
    fn tool_versions_and_ini_and_toml(text in configish()) {
        for (tool, version) in asdf::parse(&text) {
            prop_assert!(!tool.is_empty() && !version.is_empty());
        }
        let _ = mise::tools(&text);
        let _ = files::ini_value(&text, "profile dev", "region");
    }

    #[test]
    fn every_provider_answers_whatever_its_files_hold(
        text in prop_oneof![configish(), ".{0,300}"],
        bytes in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        let home = tempfile::tempdir().unwrap();
        let h = home.path();
        let proj = h.join("proj/sub");
        std::fs::create_dir_all(&proj).unwrap();
        let put = |rel: &str, data: &[u8]| {
            let p = h.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, data).unwrap();
        };
        for rel in [".kube/config", ".aws/config", ".config/gcloud/configurations/config_default",
                    "proj/.tool-versions", "proj/mise.toml", "proj/.venv/pyvenv.cfg",
                    "proj/.python-version", "proj/pyproject.toml", "proj/.terraform/environment",
                    "proj/.envrc", ".config/mise/config.toml"] {
            put(rel, text.as_bytes());
        }
        put(".config/gcloud/active_config", &bytes);
        let mut vars = std::collections::BTreeMap::new();
        vars.insert("HOME".to_string(), h.to_str().unwrap().to_string());
        vars.insert("CONDA_PREFIX".to_string(), String::from_utf8_lossy(&bytes).replace('\0', ""));
        let env = Env::Given(vars);
        for p in PROVIDERS {
            let r = context::read_now(p, Some(&proj), &env, None);
            let vals = context::values(p, &r);
            prop_assert_eq!(&vals.last().unwrap().0, p.name);
        }
    }
}

proptest! {
    /// The config file: any text parses or is refused with a message, never a panic.
    #[test]
    fn any_config_text_parses_or_is_refused(
        text in prop_oneof![
            ".{0,300}",
            proptest::collection::vec(prop_oneof![
                Just("[providers]\n".to_string()),
                Just("disabled = [\"sudo\"]\n".to_string()),
                Just("[[script]]\n".to_string()),
                Just("name = \"x\"\n".to_string()),
                Just("command = [\"true\"]\n".to_string()),
                Just("timeout_secs = ".to_string()),
                Just("max_bytes = ".to_string()),
                "-?[0-9]{0,20}(\\.[0-9]{0,5})?\n",
                "[a-z_ =\"\\[\\]\n]{0,20}",
            ], 0..20).prop_map(|v| v.concat()),
        ]
    ) {
        match kernstat_daemon::settings::Settings::parse(&text) {
            Ok(s) => prop_assert!(s.scripts.concurrency >= 1),
            Err(e) => prop_assert!(!e.is_empty()),
        }
    }
}
