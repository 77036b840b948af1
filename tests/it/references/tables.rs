//! Reading the reference tables of the book (`docs/src/*.md`): the rows of the table under a
//! given header, split into cells, and the code spans in a cell.

use std::path::PathBuf;

/// The text of a chapter of the book.
pub(crate) fn chapter(name: &str) -> String {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("docs/src").join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The body rows, as cells, of the table in `text` whose header row is exactly `header`.
pub(crate) fn table(text: &str, header: &[&str]) -> Vec<Vec<String>> {
    let mut lines = text.lines().skip_while(|l| !l.starts_with('|') || cells(l) != header);
    assert!(lines.next().is_some(), "no table with the header {header:?}");
    lines
        .skip(1) // the |---| line
        .take_while(|l| l.starts_with('|'))
        .map(cells)
        .collect()
}

/// The cells of one table row, trimmed; `\|` is a `|` inside a cell.
pub(crate) fn cells(row: &str) -> Vec<String> {
    let inner = row.trim().trim_start_matches('|');
    let inner = inner.strip_suffix('|').unwrap_or(inner);
    let mut out = Vec::new();
    let mut cell = String::new();
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' if chars.peek() == Some(&'|') => {
                chars.next();
                cell.push('|');
            }
            '|' => out.push(std::mem::take(&mut cell)),
            _ => cell.push(c),
        }
    }
    out.push(cell);
    out.into_iter().map(|cell| cell.trim().to_owned()).collect()
}

/// The contents of every `code span` in `cell`.
pub(crate) fn code_spans(cell: &str) -> Vec<String> {
    cell.split('`').skip(1).step_by(2).map(str::to_owned).collect()
}

#[test]
fn cells_split_on_bars_but_not_escaped_ones() {
    assert_eq!(cells("| `a` | b \\| c |"), vec!["`a`", "b | c"]);
    assert_eq!(code_spans("`x` and `y`, not z"), vec!["x", "y"]);
    let text = "intro\n| k | v |\n|---|---|\n| a | 1 |\n| b | 2 |\n\nafter | x |";
    assert_eq!(table(text, &["k", "v"]), vec![vec!["a", "1"], vec!["b", "2"]]);
}
