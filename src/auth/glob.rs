//! Name patterns of the authorization rules: `*` stands for any run of characters (`/`
//! included), everything else is literal. A pattern is split into its literal pieces once, when
//! the rules are compiled.

/// A compiled pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pattern {
    /// The literal pieces between the `*`s; one piece means no `*`.
    pieces: Vec<String>,
}

impl Pattern {
    pub(crate) fn new(pattern: &str) -> Self {
        Self { pieces: pattern.split('*').map(str::to_owned).collect() }
    }

    pub(crate) fn matches(&self, text: &str) -> bool {
        let Some((first, rest)) = self.pieces.split_first() else { return text.is_empty() };
        let Some(mut remaining) = text.strip_prefix(first.as_str()) else { return false };
        let Some((last, middle)) = rest.split_last() else { return remaining.is_empty() };
        for piece in middle {
            match remaining.find(piece.as_str()) {
                Some(at) => remaining = &remaining[at + piece.len()..],
                None => return false,
            }
        }
        remaining.ends_with(last.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Pattern;

    fn m(p: &str, t: &str) -> bool {
        Pattern::new(p).matches(t)
    }

    #[test]
    fn literal_and_wildcards() {
        assert!(m("echo", "echo") && !m("echo", "echo2") && !m("echo", "ech"));
        assert!(m("*", "") && m("*", "anything/at all"));
        assert!(
            m("weather_*", "weather_today") && m("weather_*", "weather_") && !m("weather_*", "xweather_a")
        );
        assert!(m("*_admin", "db_admin") && !m("*_admin", "db_admin2"));
        assert!(m("demo://*/item/*", "demo://a/b/item/7") && !m("demo://*/item/*", "demo://a/b/items"));
        assert!(m("a*b*c", "abc") && m("a*b*c", "axxbyyc") && !m("a*b*c", "axxcyyb"));
    }

    #[test]
    fn the_last_piece_does_not_overlap_a_middle_one() {
        assert!(!m("ab*ba", "aba"));
        assert!(m("ab*ba", "abba"));
    }
}
