//! The layering written in the README's `## Layout` section holds in the code: every top-level
//! module of `src/` is placed in exactly one layer, a module imports only modules of its own
//! layer or lower ones, and no two top-level modules import each other through any path.
//!
//! Why a test and not a lint: nothing in rustc or clippy knows the intended order, and the order
//! eroded unseen before (nine modules had come to import each other in one cycle). The README is
//! the one place the order is written, so the test reads it from there; moving a module means
//! editing that list, in the same change.
//!
//! What counts as an import: `crate::<module>` anywhere in a module's production code (comments
//! left out). Test code is left out: files named `tests.rs`, files under a `tests/` folder, and
//! an inline `#[cfg(test)] mod tests` to the end of its file. A test may wire the whole gateway.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, bottom first, as the README lists them.
fn readme_layers(root: &Path) -> Vec<BTreeSet<String>> {
    let readme = std::fs::read_to_string(root.join("README.md")).expect("README.md");
    let layout = readme.split("\n## Layout").nth(1).expect("README has a `## Layout` section");
    let layout = layout.split("\n## ").next().unwrap_or(layout);
    let mut layers = Vec::new();
    for line in layout.lines() {
        let Some(rest) = line.trim_start().strip_prefix(|c: char| c.is_ascii_digit()) else { continue };
        let Some(rest) = rest.trim_start_matches(|c: char| c.is_ascii_digit()).strip_prefix(". ") else {
            continue;
        };
        // The modules are the backticked names before the colon: "`a`, `b`: what they do".
        let names = rest.split(':').next().unwrap_or_default();
        let layer: BTreeSet<String> =
            names.split('`').skip(1).step_by(2).map(|n| n.trim_start_matches("src/").to_owned()).collect();
        assert!(!layer.is_empty(), "a layer line of the README names no module: {line}");
        layers.push(layer);
    }
    assert!(layers.len() >= 3, "the README's Layout section lists no numbered layers");
    layers
}

/// Every top-level module of `src/` (a `.rs` file or a folder), but the crate roots.
fn top_modules(src: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(src).expect("src/") {
        let path = entry.expect("entry").path();
        let name = path.file_stem().and_then(|s| s.to_str()).expect("utf-8 name").to_owned();
        if path.is_dir() || path.extension().is_some_and(|e| e == "rs") {
            out.insert(name);
        }
    }
    out.remove("lib");
    out.remove("main");
    out
}

/// The production `.rs` files of one top-level module.
fn files_of(src: &Path, module: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let file = src.join(format!("{module}.rs"));
    if file.is_file() {
        out.push(file);
    }
    let mut dirs = vec![src.join(module)];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        for entry in entries {
            let path = entry.expect("entry").path();
            let name = path.file_name().and_then(|s| s.to_str()).unwrap_or_default();
            if path.is_dir() && name != "tests" {
                dirs.push(path);
            } else if name.ends_with(".rs") && name != "tests.rs" {
                out.push(path);
            }
        }
    }
    out
}

/// The top-level modules `text` imports through `crate::`, comments and inline tests left out.
fn imports(text: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim() == "#[cfg(test)]"
            && lines.peek().is_some_and(|l| l.trim_start().starts_with("mod tests"))
        {
            break;
        }
        let code = line.split("//").next().unwrap_or_default();
        for (i, _) in code.match_indices("crate::") {
            let preceded = code[..i].chars().last().is_some_and(|c| c.is_alphanumeric() || c == '_');
            let name: String =
                code[i + 7..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
            if !preceded && modules.contains(&name) {
                out.insert(name);
            }
        }
    }
    out
}

fn graph(src: &Path, modules: &BTreeSet<String>) -> BTreeMap<String, BTreeSet<String>> {
    modules
        .iter()
        .map(|m| {
            let mut deps = BTreeSet::new();
            for file in files_of(src, m) {
                let text = std::fs::read_to_string(&file).expect("source file");
                deps.extend(imports(&text, modules));
            }
            deps.remove(m);
            (m.clone(), deps)
        })
        .collect()
}

/// One cycle of the graph, if there is any (depth-first search with colours).
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(start) = path.iter().position(|n| n == node) {
            let mut cycle = path[start..].to_vec();
            cycle.push(node.to_owned());
            return Some(cycle);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, graph, done, path) {
                return Some(cycle);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|n| visit(n, graph, &mut done, &mut Vec::new()))
}

#[test]
fn every_import_points_down_the_readme_layers() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let src = root.join("src");
    let modules = top_modules(&src);
    let layers = readme_layers(root);
    let mut layer_of = BTreeMap::new();
    for (i, layer) in layers.iter().enumerate() {
        for m in layer {
            assert!(modules.contains(m), "the README's Layout names `{m}`, which is not a module of src/");
            assert!(layer_of.insert(m.clone(), i).is_none(), "the README's Layout places `{m}` twice");
        }
    }
    let unplaced: Vec<_> = modules.iter().filter(|m| !layer_of.contains_key(*m)).collect();
    assert!(unplaced.is_empty(), "modules of src/ missing from the README's Layout layers: {unplaced:?}");
    let graph = graph(&src, &modules);
    let upward: Vec<String> = graph
        .iter()
        .flat_map(|(m, deps)| deps.iter().map(move |d| (m, d)))
        .filter(|(m, d)| layer_of[*d] > layer_of[*m])
        .map(|(m, d)| format!("{m} (layer {}) imports {d} (layer {})", layer_of[m] + 1, layer_of[d] + 1))
        .collect();
    assert!(upward.is_empty(), "imports that point up the README's layers:\n{}", upward.join("\n"));
    if let Some(cycle) = find_cycle(&graph) {
        panic!("top-level modules import each other in a cycle: {}", cycle.join(" -> "));
    }
}

#[test]
fn the_checker_sees_imports_and_cycles() {
    let modules: BTreeSet<String> = ["a", "b", "c"].into_iter().map(str::to_owned).collect();
    let text = "use crate::a::X;\n// crate::b in a comment\nfn f() { my_crate::c::g(); crate::b::h() }\n\
                #[cfg(test)]\nmod tests {\n    use crate::c;\n}\n";
    let found = imports(text, &modules);
    assert_eq!(found, ["a", "b"].into_iter().map(str::to_owned).collect());
    let mut graph = BTreeMap::new();
    graph.insert("a".to_owned(), ["b".to_owned()].into_iter().collect::<BTreeSet<_>>());
    graph.insert("b".to_owned(), ["c".to_owned()].into_iter().collect());
    graph.insert("c".to_owned(), BTreeSet::new());
    assert_eq!(find_cycle(&graph), None);
    graph.get_mut("c").expect("c").insert("a".to_owned());
    assert_eq!(find_cycle(&graph), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
}
