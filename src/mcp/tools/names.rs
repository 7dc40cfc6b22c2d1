//! Names in source text as a model writes them: a symbol path split into
//! its parts, a name's occurrences as a whole word, the identifier nearest
//! a column, a container compared with the qualifiers of a path.
//!
//! Everything here is literal: no pattern language is ever built from a
//! name, so `operator+`, `a.b*` or `$x` mean exactly those characters.

use std::ops::Range;

/// Words that are never the symbol a model means when its column lands on
/// one (a column on `fn` of `pub fn area` means `area`): the keywords of
/// the languages the built-in servers serve, that a snap skips.
const KEYWORDS: &[&str] = &[
    "abstract",
    "and",
    "as",
    "async",
    "await",
    "bool",
    "break",
    "case",
    "catch",
    "char",
    "class",
    "const",
    "continue",
    "crate",
    "def",
    "default",
    "del",
    "do",
    "double",
    "dyn",
    "elif",
    "else",
    "enum",
    "except",
    "export",
    "extends",
    "extern",
    "false",
    "final",
    "finally",
    "float",
    "fn",
    "for",
    "from",
    "func",
    "function",
    "global",
    "go",
    "if",
    "impl",
    "implements",
    "import",
    "in",
    "int",
    "interface",
    "is",
    "lambda",
    "let",
    "long",
    "loop",
    "match",
    "mod",
    "move",
    "mut",
    "namespace",
    "new",
    "nil",
    "None",
    "nonlocal",
    "not",
    "null",
    "or",
    "package",
    "pass",
    "private",
    "protected",
    "pub",
    "public",
    "raise",
    "ref",
    "return",
    "self",
    "Self",
    "short",
    "signed",
    "static",
    "struct",
    "super",
    "switch",
    "this",
    "throw",
    "throws",
    "trait",
    "True",
    "False",
    "true",
    "try",
    "type",
    "typedef",
    "typeof",
    "union",
    "unsafe",
    "unsigned",
    "use",
    "var",
    "virtual",
    "void",
    "where",
    "while",
    "with",
    "yield",
];

/// Longest symbol argument accepted.
pub(super) const MAX_SYMBOL_CHARS: usize = 256;

/// Whether `c` can be part of an identifier in the languages served
/// (`$` for JavaScript).
pub(super) fn is_ident_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_' || c == '$'
}

fn is_keyword(word: &str) -> bool {
    KEYWORDS.contains(&word)
}

/// A symbol as a model names it: `tally`, `Ledger::tally`, `pkg.Ledger.tally`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct SymbolPath {
    /// The enclosing names, outermost first (empty for a bare name).
    pub(super) qualifiers: Vec<String>,
    /// The symbol's own name: what servers call it.
    pub(super) name: String,
}

impl SymbolPath {
    /// Splits at `::` or, without one, at `.`; a part with no identifier
    /// character (`*` of `a.*`, the empty part of `a..b`) means the text is
    /// not a path, and the whole of it is the name.
    pub(super) fn parse(text: &str) -> Result<SymbolPath, String> {
        let text = text.trim();
        if text.is_empty() {
            return Err("symbol is empty: give a name such as `tally` or `Ledger::tally`".into());
        }
        if text.chars().count() > MAX_SYMBOL_CHARS {
            return Err(format!(
                "symbol is longer than {MAX_SYMBOL_CHARS} characters"
            ));
        }
        if text.contains(['\n', '\r']) {
            return Err("symbol must be one line".into());
        }
        let separator = if text.contains("::") { "::" } else { "." };
        let parts: Vec<&str> = text.split(separator).collect();
        let is_path = parts.len() > 1
            && parts
                .iter()
                .all(|p| !p.trim().is_empty() && p.chars().any(is_ident_char));
        if !is_path {
            return Ok(SymbolPath {
                qualifiers: Vec::new(),
                name: text.to_string(),
            });
        }
        let mut parts: Vec<String> = parts.iter().map(|p| p.trim().to_string()).collect();
        let name = parts.pop().unwrap_or_default();
        Ok(SymbolPath {
            qualifiers: parts,
            name,
        })
    }

    /// As given: `Ledger::tally`.
    pub(super) fn display(&self) -> String {
        let mut parts = self.qualifiers.clone();
        parts.push(self.name.clone());
        parts.join("::")
    }
}

/// The byte ranges where `name` occurs in `text` as a whole word: at an end
/// of `name` that is an identifier character, the neighbouring character
/// must not be one (so `area` is not found in `surface_area`, and
/// `operator+` is found before `(`). The search is a plain substring scan.
pub(super) fn word_occurrences<'a>(
    text: &'a str,
    name: &'a str,
) -> impl Iterator<Item = Range<usize>> + 'a {
    let first_is_ident = name.chars().next().is_some_and(is_ident_char);
    let last_is_ident = name.chars().next_back().is_some_and(is_ident_char);
    let mut from = 0;
    std::iter::from_fn(move || {
        if name.is_empty() {
            return None;
        }
        while from <= text.len() {
            let found = text[from..].find(name)? + from;
            let end = found + name.len();
            // Next search from the following character (occurrences may not overlap a word).
            from = found + text[found..].chars().next().map_or(1, char::len_utf8);
            let before_ok = !first_is_ident
                || text[..found]
                    .chars()
                    .next_back()
                    .is_none_or(|c| !is_ident_char(c));
            let after_ok =
                !last_is_ident || text[end..].chars().next().is_none_or(|c| !is_ident_char(c));
            if before_ok && after_ok {
                return Some(found..end);
            }
        }
        None
    })
}

/// An identifier on a line, in characters (0-based).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Word {
    pub(super) column: usize,
    pub(super) text: String,
}

/// The identifiers of `line` that are not keywords, with their columns.
pub(super) fn words(line: &str) -> Vec<Word> {
    let mut words = Vec::new();
    let mut current: Option<Word> = None;
    for (column, c) in line.chars().enumerate() {
        if is_ident_char(c) {
            match current.as_mut() {
                Some(word) => word.text.push(c),
                None => {
                    current = Some(Word {
                        column,
                        text: c.to_string(),
                    })
                }
            }
        } else if let Some(word) = current.take() {
            words.push(word);
        }
    }
    words.extend(current);
    // A number is no symbol either.
    words.retain(|w| !is_keyword(&w.text) && !w.text.starts_with(|c: char| c.is_ascii_digit()));
    words
}

/// The identifier at `column` (characters, 0-based) of `line`, or the one
/// nearest it when the column is on whitespace, punctuation or a keyword
/// (the one to the right on a tie: code reads `name (`, `-> Type`).
/// `None`: the line holds no identifier.
pub(super) fn identifier_near(line: &str, column: usize) -> Option<Word> {
    let words = words(line);
    let distance = |w: &Word| {
        let end = w.column + w.text.chars().count();
        if column < w.column {
            w.column - column
        } else if column >= end {
            column + 1 - end
        } else {
            0
        }
    };
    words
        .into_iter()
        .min_by_key(|w| (distance(w), w.column < column))
}

/// A container as servers name it (`impl Ledger`, `impl<T> Summable for
/// Ledger<T>`, `ns::Ledger`, `pkg.Ledger`) as plain path segments.
fn container_segments(container: &str) -> Vec<String> {
    let mut text = container.trim();
    if let Some(rest) = text.strip_prefix("impl") {
        let rest = rest.trim_start();
        // `impl<T> X`: skip the impl's own generics.
        let rest = if rest.starts_with('<') {
            skip_generics(rest).trim_start()
        } else {
            rest
        };
        text = match rest.rsplit_once(" for ") {
            Some((_, self_type)) => self_type,
            None => rest,
        };
    }
    let without_generics: String = {
        let mut depth = 0usize;
        text.chars()
            .filter(|&c| match c {
                '<' => {
                    depth += 1;
                    false
                }
                '>' => {
                    depth = depth.saturating_sub(1);
                    false
                }
                _ => depth == 0,
            })
            .collect()
    };
    without_generics
        .split("::")
        .flat_map(|part| part.split('.'))
        .map(|part| part.trim().trim_start_matches('&').trim().to_string())
        .filter(|part| !part.is_empty())
        .collect()
}

/// `rest` after its leading `<…>` (balanced).
fn skip_generics(rest: &str) -> &str {
    let mut depth = 0usize;
    for (i, c) in rest.char_indices() {
        match c {
            '<' => depth += 1,
            '>' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return &rest[i + 1..];
                }
            }
            _ => {}
        }
    }
    ""
}

/// Whether the enclosing names `containers` (outermost first; a server's
/// `containerName`, or the symbols a document outline nests it in) end
/// with `qualifiers`. No qualifiers: any container.
pub(super) fn container_matches(containers: &[&str], qualifiers: &[String]) -> bool {
    if qualifiers.is_empty() {
        return true;
    }
    let segments: Vec<String> = containers
        .iter()
        .flat_map(|c| container_segments(c))
        .collect();
    segments.len() >= qualifiers.len()
        && segments[segments.len() - qualifiers.len()..]
            .iter()
            .zip(qualifiers)
            .all(|(a, b)| a == b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_split_at_double_colons_or_dots_and_odd_names_stay_whole() {
        let p = SymbolPath::parse("Ledger::tally").unwrap();
        assert_eq!(
            (p.qualifiers, p.name),
            (vec!["Ledger".to_string()], "tally".to_string())
        );
        let p = SymbolPath::parse("pkg.Ledger.tally").unwrap();
        assert_eq!(p.qualifiers, ["pkg", "Ledger"]);
        assert_eq!(p.name, "tally");
        for whole in ["tally", "a.*", "operator+", "$x", "a..b", "(.*)", "[a-z]+"] {
            let p = SymbolPath::parse(whole).unwrap();
            assert!(p.qualifiers.is_empty(), "{whole}");
            assert_eq!(p.name, whole);
        }
        assert!(SymbolPath::parse("  ").is_err());
        assert!(SymbolPath::parse("a\nb").is_err());
        assert!(SymbolPath::parse(&"x".repeat(300)).is_err());
    }

    #[test]
    fn occurrences_are_whole_words_found_literally() {
        let text = "area(x); surface_area(y); area2; (area)";
        let found: Vec<_> = word_occurrences(text, "area").collect();
        assert_eq!(found, [0..4, 34..38]);
        // Metacharacters are themselves.
        let text = "x = a.*b; y = a.b; a.* ";
        assert_eq!(word_occurrences(text, "a.*").count(), 2);
        assert_eq!(
            word_occurrences("operator+(a) operator+=", "operator+").count(),
            2
        );
        assert_eq!(word_occurrences("$x + $xy", "$x").count(), 1);
        let found: Vec<_> = word_occurrences("é tallyé tally", "tally")
            .map(|r| r.start)
            .collect();
        assert_eq!(found, [11]);
        assert_eq!(word_occurrences("abc", "").count(), 0);
    }

    #[test]
    fn a_column_off_an_identifier_snaps_to_the_nearest_one() {
        let line = "    pub fn area(width: u32) -> u32 {";
        // On the identifier: itself.
        assert_eq!(identifier_near(line, 12).unwrap().text, "area");
        // Leading whitespace and keywords: the nearest identifier.
        assert_eq!(identifier_near(line, 0).unwrap().text, "area");
        assert_eq!(identifier_near(line, 5).unwrap().text, "area");
        // Punctuation between two: the nearer; a tie goes right.
        assert_eq!(identifier_near(line, 15).unwrap().text, "width");
        assert_eq!(identifier_near(line, 200).unwrap().text, "u32");
        assert!(identifier_near("    } // 12", 0).is_none());
        assert_eq!(identifier_near("a b", 1).unwrap().text, "b");
    }

    #[test]
    fn containers_match_the_qualifiers_of_a_path() {
        let q = |s: &str| vec![s.to_string()];
        assert!(container_matches(&["Ledger"], &q("Ledger")));
        assert!(container_matches(&["impl Ledger"], &q("Ledger")));
        assert!(container_matches(
            &["impl<T> Summable for Ledger<T>"],
            &q("Ledger")
        ));
        assert!(container_matches(&["ns::Ledger"], &q("Ledger")));
        assert!(container_matches(
            &["pkg", "Ledger"],
            &["pkg".into(), "Ledger".into()]
        ));
        assert!(!container_matches(&["Other"], &q("Ledger")));
        assert!(!container_matches(&[], &q("Ledger")));
        assert!(container_matches(&[], &[]));
    }
}
