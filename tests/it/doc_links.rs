//! The documentation points only at things that exist: every relative link of the README and
//! of the book (`docs/src/*.md`) names a file or folder of the repository, every `#anchor`
//! names a heading of its page (mdBook's ids: lowercase, spaces as `-`, other punctuation
//! dropped, a repeated heading numbered `-1`, `-2`), and every repository file a `//!` or `///`
//! doc in `src/` cites exists.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README.md and every chapter of the book.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md")];
    let dir = std::fs::read_dir(root().join("docs/src")).expect("docs/src");
    pages.extend(
        dir.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "md")),
    );
    pages.sort();
    pages
}

/// The lines of `text` outside fenced code blocks, with inline code spans removed.
fn prose(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            out.push(without_code_spans(line));
        }
    }
    out
}

fn without_code_spans(line: &str) -> String {
    line.split('`').step_by(2).collect::<Vec<_>>().join("")
}

/// Every `[text](target)` target of a page.
fn link_targets(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in prose(text) {
        let mut rest = line.as_str();
        while let Some(at) = rest.find("](") {
            let after = &rest[at + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].to_owned());
            rest = &after[end..];
        }
    }
    out
}

/// The anchor ids of a page's headings, as mdBook makes them.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    for line in prose_keeping_code(text) {
        let Some(title) = line.strip_prefix('#').map(|t| t.trim_start_matches('#')) else { continue };
        if !title.starts_with(' ') {
            continue;
        }
        let base = heading_id(title.trim());
        let mut id = base.clone();
        let mut n = 0;
        while !seen.insert(id.clone()) {
            n += 1;
            id = format!("{base}-{n}");
        }
    }
    seen
}

/// Lines outside fenced code blocks, code spans kept (a heading's code is part of its id).
fn prose_keeping_code(text: &str) -> Vec<&str> {
    let mut fenced = false;
    text.lines()
        .filter(|line| {
            if line.trim_start().starts_with("```") {
                fenced = !fenced;
                return false;
            }
            !fenced
        })
        .collect()
}

/// mdBook's id of a heading: its text without markup, lowercased, whitespace as `-`, and
/// nothing but letters, digits, `_` and `-` kept.
fn heading_id(title: &str) -> String {
    let text: String = title.replace('`', "");
    let text = strip_links(&text);
    text.chars()
        .filter_map(|c| match c {
            c if c.is_alphanumeric() || c == '_' || c == '-' => Some(c.to_lowercase().next().unwrap_or(c)),
            c if c.is_whitespace() => Some('-'),
            _ => None,
        })
        .collect()
}

/// `[text](url)` as `text`.
fn strip_links(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(open) = rest.find('[') {
        let Some(close) = rest[open..].find("](").map(|i| open + i) else { break };
        let Some(end) = rest[close..].find(')').map(|i| close + i) else { break };
        out.push_str(&rest[..open]);
        out.push_str(&rest[open + 1..close]);
        rest = &rest[end + 1..];
    }
    out.push_str(rest);
    out
}

/// What is wrong with one link of `page`, if anything.
fn check_link(page: &Path, target: &str) -> Option<String> {
    if target.starts_with("http://") || target.starts_with("https://") || target.starts_with("mailto:") {
        return None;
    }
    let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
    let file = if path.is_empty() { page.to_path_buf() } else { page.parent()?.join(path) };
    if !file.exists() {
        return Some(format!("{target}: no such file"));
    }
    if anchor.is_empty() {
        return None;
    }
    let text = std::fs::read_to_string(&file).ok()?;
    (!anchors(&text).contains(anchor)).then(|| format!("{target}: no heading with the id `{anchor}`"))
}

#[test]
fn every_link_and_anchor_resolves() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("page");
        for target in link_targets(&text) {
            checked += 1;
            if let Some(why) = check_link(&page, &target) {
                broken.push(format!("{}: {why}", page.strip_prefix(root()).unwrap_or(&page).display()));
            }
        }
    }
    assert!(checked > 50, "only {checked} links found: is the link reader broken?");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn the_link_reader_follows_mdbooks_ids() {
    assert_eq!(
        heading_id("Header-carried parameters (`Mcp-Param-*`)"),
        "header-carried-parameters-mcp-param-"
    );
    assert_eq!(heading_id("HTTP+SSE upstreams (2024-11-05)"), "httpsse-upstreams-2024-11-05");
    assert_eq!(
        heading_id("Replay or park, for a tool with side effects"),
        "replay-or-park-for-a-tool-with-side-effects"
    );
    let page = "# A\n## Same\n```\n## not a heading\n```\n## Same\nsee [x](#same-1) and `[y](nowhere)`";
    assert_eq!(anchors(page), ["a", "same", "same-1"].map(String::from).into());
    assert_eq!(link_targets(page), vec!["#same-1"]);
}

/// The repository files a doc comment line cites: words ending in a file extension the
/// repository uses, trimmed of punctuation.
fn cited_files(line: &str) -> Vec<String> {
    const EXTENSIONS: [&str; 8] = [".md", ".rs", ".toml", ".sh", ".py", ".yml", ".yaml", ".json"];
    line.split_whitespace()
        .filter(|w| !w.contains("://") && !w.contains("::"))
        .flat_map(|w| w.split(|c: char| "()[],;:\"'`".contains(c)))
        .map(|w| w.trim_end_matches('.'))
        .filter(|w| EXTENSIONS.iter().any(|x| w.ends_with(x)) && !w.contains(['*', '<', '{', '$']))
        .map(str::to_owned)
        .collect()
}

/// Where a citation in `file` may be relative to: the repository, `src/`, the file's folder,
/// and the folder of the module the file is the root of (`src/front.rs` → `src/front/`).
fn exists_from(file: &Path, cited: &str) -> bool {
    let module_dir = file.with_extension("");
    let bases =
        [root(), root().join("src"), file.parent().map(Path::to_path_buf).unwrap_or_default(), module_dir];
    bases.iter().any(|base| base.join(cited).exists())
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src").filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|x| x == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_file_a_module_doc_cites_exists() {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let (mut missing, mut checked) = (Vec::new(), 0);
    for file in &files {
        let text = std::fs::read_to_string(file).expect("source");
        for (n, line) in text.lines().enumerate() {
            let doc = line.trim_start();
            if !(doc.starts_with("//!") || doc.starts_with("///")) {
                continue;
            }
            for cited in cited_files(doc) {
                checked += 1;
                if !exists_from(file, &cited) {
                    let at = file.strip_prefix(root()).unwrap_or(file).display();
                    missing.push(format!("{at}:{}: {cited}", n + 1));
                }
            }
        }
    }
    assert!(checked > 20, "only {checked} citations found: is the reader broken?");
    assert!(missing.is_empty(), "doc comments cite files that do not exist:\n{}", missing.join("\n"));
}

#[test]
fn citations_are_read_from_doc_lines() {
    assert_eq!(
        cited_files("//! see (docs/src/park-mode.md, \"Across replicas\")."),
        vec!["docs/src/park-mode.md"]
    );
    assert_eq!(cited_files("/// `gather.rs` and README.md."), vec!["gather.rs", "README.md"]);
    assert!(cited_files("/// [`crate::x::y.rs`] https://a.example/b.md *.rs").is_empty());
}
