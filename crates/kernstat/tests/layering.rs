//! The workspace's shape, read from the code (not from names in comments):
//!
//! - crates: each library crate depends only on crates of a lower layer (`cargo
//!   metadata`), so no circle can form and the binary crate is the top: wiring;
//! - the small static front links no server, recorder or export code (`cargo tree` of
//!   its normal dependencies);
//! - modules: within every crate, the `crate::` paths of each top-level module's files
//!   form no circle (a module graph from the `use`s and paths, strongly connected
//!   components by Tarjan's algorithm);
//! - the module check fails on a planted circle (a crate of two modules that use each
//!   other, written to a temporary directory).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Each workspace crate's layer: a crate may depend on crates of lower layers only.
const LAYERS: &[(&str, u32)] = &[
    ("kernstat-model", 0),
    ("kernstat-shm", 0),
    ("kernstat-testkit", 0),
    ("kernstat-sources", 1),
    ("kernstat-bpf", 1),
    ("kernstat-record", 1),
    ("kernstat-render", 1),
    ("kernstat-client", 1),
    ("kernstat-os", 2),
    ("kernstat-why", 2),
    ("kernstat-collect", 3),
    ("kernstat-daemon", 3),
    ("kernstat-top", 4),
    ("kernstat-bar", 4),
    ("kernstat-export", 4),
    ("kernstat-service", 4),
    ("kernstat-view", 4),
    ("kernstat-tui", 5),
    ("kernstat", 6),
    ("kernstat-front", 6),
];

fn metadata() -> serde_json::Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = std::process::Command::new(cargo);
    cmd.args([
        "metadata",
        "--format-version",
        "1",
        "--offline",
        "--no-deps",
    ])
    .current_dir(env!("CARGO_MANIFEST_DIR"));
    let out = cmd.output().expect("cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn every_crate_depends_only_on_lower_layers() {
    let m = metadata();
    let layer: BTreeMap<&str, u32> = LAYERS.iter().copied().collect();
    let mut wrong = Vec::new();
    for p in m["packages"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        let Some(&mine) = layer.get(name) else {
            wrong.push(format!("{name}: not in LAYERS (say where it belongs)"));
            continue;
        };
        for d in p["dependencies"].as_array().unwrap() {
            let dep = d["name"].as_str().unwrap();
            if !d["kind"].is_null() || !dep.starts_with("kernstat") {
                continue;
            }
            match layer.get(dep) {
                Some(&theirs) if theirs < mine => {}
                _ => wrong.push(format!("{name} (layer {mine}) depends on {dep}")),
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_front_links_no_server_recorder_or_export_code() {
    // `cargo tree` resolves for this machine's target from the lock file (offline).
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args([
            "tree",
            "-p",
            "kernstat-front",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--offline",
            "-f",
            "{p}",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let linked: BTreeSet<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next().map(str::to_string))
        .collect();
    assert!(linked.contains("kernstat-client"), "{linked:?}");
    for forbidden in [
        "kernstat-daemon",
        "kernstat-service",
        "kernstat-record",
        "kernstat-export",
        "kernstat-bpf",
        "libbpf-rs",
        "parquet",
        "arrow-array",
        "prometheus-client",
        "gix",
    ] {
        assert!(
            !linked.contains(forbidden),
            "the front links {forbidden}: {linked:?}"
        );
    }
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The top-level module a file of `src` belongs to (None: the crate root).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main")).then(|| name.to_string())
}

/// The first identifiers after each `crate::` in `code`: `crate::a::b` gives `a`,
/// `crate::{a, b::c}` gives `a` and `b`.
fn crate_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let ident = |s: &str| -> String {
        s.trim()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect()
    };
    let mut rest = code;
    while let Some(i) = rest.find("crate::") {
        let before = rest[..i].chars().last();
        rest = &rest[i + "crate::".len()..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '$') {
            continue; // `kernstat_crate::`, `$crate::`
        }
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 1;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 1 => {
                        out.push(ident(&item));
                        item.clear();
                        continue;
                    }
                    _ => {}
                }
                if depth == 0 {
                    break;
                }
                if depth == 1 {
                    item.push(c);
                }
            }
            out.push(ident(&item));
        } else {
            out.push(ident(rest));
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

/// The module graph of a crate's `src`: top-level module -> modules it names.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeSet<String> = files.iter().filter_map(|f| module_of(src, f)).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = modules
        .iter()
        .map(|m| (m.clone(), BTreeSet::new()))
        .collect();
    for f in &files {
        let Some(from) = module_of(src, f) else {
            continue;
        };
        let text = std::fs::read_to_string(f).unwrap();
        // Tests inside a module may reach anywhere; doc comments and comments are prose.
        let code: String = text
            .split("#[cfg(test)]")
            .next()
            .unwrap_or("")
            .lines()
            .map(|l| l.split("//").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        for to in crate_paths(&code) {
            if to != from && modules.contains(&to) {
                graph.get_mut(&from).unwrap().insert(to);
            }
        }
    }
    graph
}

/// The circles of a graph: its strongly connected components of more than one node.
fn circles(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Tarjan<'a> {
        graph: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    impl<'a> Tarjan<'a> {
        fn visit(&mut self, v: &'a str) {
            let i = self.index.len();
            self.index.insert(v, i);
            self.low.insert(v, i);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in &self.graph[v] {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(lw);
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).unwrap();
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.out.push(component);
                }
            }
        }
    }
    let mut t = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.out
}

#[test]
fn no_crate_has_a_circle_of_modules() {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = Vec::new();
    let mut read = 0;
    for e in std::fs::read_dir(&crates).unwrap().flatten() {
        let src = e.path().join("src");
        if !src.is_dir() {
            continue;
        }
        read += 1;
        for c in circles(&module_graph(&src)) {
            found.push(format!(
                "{}: {}",
                e.file_name().to_string_lossy(),
                c.join(" <-> ")
            ));
        }
    }
    assert!(read >= 15, "the crates are where they were ({read} read)");
    assert!(found.is_empty(), "module circles:\n{}", found.join("\n"));
}

#[test]
fn a_planted_circle_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("b")).unwrap();
    std::fs::write(src.join("lib.rs"), "mod a;\nmod b;\nmod c;\n").unwrap();
    std::fs::write(src.join("a.rs"), "use crate::{c, b::inner::Thing};\n").unwrap();
    std::fs::write(src.join("b").join("mod.rs"), "pub mod inner;\n").unwrap();
    std::fs::write(
        src.join("b").join("inner.rs"),
        "// crate::c in a comment is not a use\npub fn f() { crate::a::g() }\n",
    )
    .unwrap();
    std::fs::write(src.join("c.rs"), "pub fn h() {}\n").unwrap();
    let graph = module_graph(&src);
    assert_eq!(
        graph["a"],
        BTreeSet::from(["b".to_string(), "c".to_string()])
    );
    assert_eq!(graph["b"], BTreeSet::from(["a".to_string()]));
    assert_eq!(
        circles(&graph),
        vec![vec!["a".to_string(), "b".to_string()]]
    );
}
