//! A loaded SCIP index as compact tables, built once by `scip::load`:
//! symbols interned (an id per name), occurrences in one flat vector grouped
//! by document and sorted by position, a by-symbol permutation of it, and
//! per-symbol facts (kind, display name, documentation, enclosing symbol,
//! implementations). Queries here answer in index terms (document numbers,
//! occurrence numbers, positions in the document's own encoding); turning
//! them into LSP results is `scip::answer`'s.

use indexmap::IndexSet;

/// Occurrence roles (SCIP `SymbolRole` bits) that matter here.
pub const ROLE_DEFINITION: u8 = 0x1;
pub const ROLE_IMPORT: u8 = 0x2;

/// How a document's character offsets count (SCIP `PositionEncoding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    Utf8,
    Utf16,
    Utf32,
}

impl Encoding {
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::Utf8 => "utf-8",
            Encoding::Utf16 => "utf-16",
            Encoding::Utf32 => "utf-32",
        }
    }
}

/// A position in a document: 0-based line and character, in the document's
/// encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pos {
    pub line: u32,
    pub character: u32,
}

/// A range of a document, end exclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span {
    pub start: Pos,
    pub end: Pos,
}

impl Span {
    /// Whether `pos` is inside, or just past the end (a cursor at the end
    /// of a name is on it, as servers read it).
    pub fn touches(&self, pos: Pos) -> bool {
        self.start <= pos && pos <= self.end
    }

    /// Lines and characters spanned, for choosing the narrowest of several.
    fn size(&self) -> (u32, u32) {
        let lines = self.end.line - self.start.line;
        let chars = if lines == 0 {
            self.end.character - self.start.character
        } else {
            self.end.character
        };
        (lines, chars)
    }
}

/// One occurrence: where, which symbol, in what role. 24 bytes.
#[derive(Debug, Clone, Copy)]
pub struct Occurrence {
    pub span: Span,
    pub symbol: u32,
    pub roles: u8,
}

impl Occurrence {
    pub fn is_definition(&self) -> bool {
        self.roles & ROLE_DEFINITION != 0
    }
}

/// One document of the index.
#[derive(Debug)]
pub struct Document {
    /// Relative to the project root, `/`-separated, checked: no `..`, not absolute.
    pub path: Box<str>,
    pub language: Box<str>,
    pub encoding: Encoding,
    /// Its occurrences: `occurrences[first..end]`.
    pub first: u32,
    pub end: u32,
}

/// SCIP `SymbolInformation.Kind` values that map to LSP `SymbolKind`s (the
/// rest are given as `Variable`).
pub type ScipKind = i32;

/// What the index says about one symbol beyond its occurrences.
#[derive(Debug, Default)]
pub struct SymbolFacts {
    pub kind: ScipKind,
    pub display_name: Box<str>,
    /// The documentation items joined (Markdown), the signature first.
    pub documentation: Box<str>,
    /// The symbol it is nested in, when the index says.
    pub enclosing: Option<u32>,
}

/// The tables.
#[derive(Debug)]
pub struct Index {
    pub documents: Vec<Document>,
    /// Document numbers sorted by path.
    pub(super) by_path: Vec<u32>,
    pub(super) occurrences: Vec<Occurrence>,
    /// Occurrence numbers grouped by symbol: symbol `s`'s are
    /// `by_symbol[symbol_first[s]..symbol_first[s + 1]]`, in document order.
    pub(super) by_symbol: Vec<u32>,
    pub(super) symbol_first: Vec<u32>,
    /// Symbol names; a local symbol (`local 3`) is kept per document as
    /// `local 3\0<document number>`.
    pub(super) symbols: IndexSet<Box<str>>,
    /// Facts by symbol id, for the symbols the index describes.
    pub(super) facts: Vec<Option<Box<SymbolFacts>>>,
    /// (implemented symbol, implementing symbol), sorted.
    pub(super) implementations: Vec<(u32, u32)>,
    /// Definition occurrence → the range of the whole definition (SCIP
    /// `enclosing_range`), sorted by occurrence number.
    pub(super) enclosing: Vec<(u32, Span)>,
}

impl Index {
    pub fn occurrence_count(&self) -> usize {
        self.occurrences.len()
    }

    pub fn symbol_count(&self) -> usize {
        self.symbols.len()
    }

    /// Whether any symbol names what implements it.
    pub fn has_implementations(&self) -> bool {
        !self.implementations.is_empty()
    }

    /// Whether any symbol has documentation (what hover shows).
    pub fn has_documentation(&self) -> bool {
        self.facts
            .iter()
            .flatten()
            .any(|f| !f.documentation.is_empty())
    }

    /// The document at this relative path.
    pub fn document(&self, path: &str) -> Option<u32> {
        self.by_path
            .binary_search_by(|&d| (*self.documents[d as usize].path).cmp(path))
            .ok()
            .map(|at| self.by_path[at])
    }

    /// The document an occurrence belongs to.
    pub fn document_of(&self, occurrence: u32) -> u32 {
        // Documents hold consecutive runs of occurrences, in document order.
        let at = self.documents.partition_point(|d| d.end <= occurrence);
        at as u32
    }

    pub fn occurrence(&self, occurrence: u32) -> &Occurrence {
        &self.occurrences[occurrence as usize]
    }

    /// A document's occurrences, by number.
    pub fn occurrences_in(&self, document: u32) -> std::ops::Range<u32> {
        let d = &self.documents[document as usize];
        d.first..d.end
    }

    /// The occurrence under `pos` in `document`: the narrowest one that
    /// touches it, preferring one the position is strictly inside.
    pub fn occurrence_at(&self, document: u32, pos: Pos) -> Option<u32> {
        let range = self.occurrences_in(document);
        let slice = &self.occurrences[range.start as usize..range.end as usize];
        // Sorted by start: everything from here on starts after `pos`.
        let after = slice.partition_point(|o| o.span.start <= pos);
        let mut best: Option<(bool, (u32, u32), usize)> = None;
        // Names are on one line: looking back over the occurrences that
        // start on the same line (and a few before, for multi-line ranges)
        // finds every candidate.
        for i in (0..after).rev() {
            let o = &slice[i];
            if o.span.start.line + 8 < pos.line {
                break;
            }
            if !o.span.touches(pos) {
                continue;
            }
            let strictly = pos < o.span.end;
            let key = (strictly, o.span.size(), i);
            let better = match &best {
                None => true,
                Some((s, size, _)) => (strictly && !s) || (strictly == *s && key.1 < *size),
            };
            if better {
                best = Some(key);
            }
        }
        best.map(|(_, _, i)| range.start + i as u32)
    }

    /// Every occurrence of `symbol`, in document order.
    pub fn occurrences_of(&self, symbol: u32) -> &[u32] {
        let s = symbol as usize;
        &self.by_symbol[self.symbol_first[s] as usize..self.symbol_first[s + 1] as usize]
    }

    /// The occurrences that define `symbol`.
    pub fn definitions_of(&self, symbol: u32) -> impl Iterator<Item = u32> + '_ {
        self.occurrences_of(symbol)
            .iter()
            .copied()
            .filter(|&o| self.occurrence(o).is_definition())
    }

    /// The symbols that implement `symbol` (SCIP relationships with
    /// `is_implementation`).
    pub fn implementations_of(&self, symbol: u32) -> impl Iterator<Item = u32> + '_ {
        let from = self.implementations.partition_point(|&(t, _)| t < symbol);
        self.implementations[from..]
            .iter()
            .take_while(move |&&(t, _)| t == symbol)
            .map(|&(_, by)| by)
    }

    pub fn facts(&self, symbol: u32) -> Option<&SymbolFacts> {
        self.facts.get(symbol as usize).and_then(|f| f.as_deref())
    }

    /// The symbol's name as the index spells it (a local one without its
    /// document suffix).
    pub fn symbol_name(&self, symbol: u32) -> &str {
        let name = self
            .symbols
            .get_index(symbol as usize)
            .map(|s| &**s)
            .unwrap_or("");
        name.split('\0').next().unwrap_or(name)
    }

    /// Whether the symbol is local to one document.
    pub fn is_local(&self, symbol: u32) -> bool {
        self.symbol_name(symbol).starts_with("local ")
    }

    /// The symbol id of a global symbol name.
    pub fn symbol_id(&self, name: &str) -> Option<u32> {
        self.symbols.get_index_of(name).map(|i| i as u32)
    }

    /// The whole definition's range of a definition occurrence, when known.
    pub fn enclosing_range(&self, occurrence: u32) -> Option<Span> {
        self.enclosing
            .binary_search_by_key(&occurrence, |&(o, _)| o)
            .ok()
            .map(|at| self.enclosing[at].1)
    }

    /// A short name for the symbol: the display name, or the last
    /// descriptor of its SCIP name (`…/Point#norm().` → `norm`).
    pub fn short_name(&self, symbol: u32) -> String {
        if let Some(facts) = self.facts(symbol) {
            if !facts.display_name.is_empty() {
                return facts.display_name.to_string();
            }
        }
        last_descriptor(self.symbol_name(symbol))
    }

    /// Bytes the tables hold (an estimate from lengths and capacities).
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        let strings: usize = self.symbols.iter().map(|s| s.len() + 16 + 16).sum();
        let facts: usize = self
            .facts
            .iter()
            .flatten()
            .map(|f| size_of::<SymbolFacts>() + f.display_name.len() + f.documentation.len())
            .sum();
        self.documents.capacity() * size_of::<Document>()
            + self
                .documents
                .iter()
                .map(|d| d.path.len() + d.language.len())
                .sum::<usize>()
            + self.by_path.capacity() * 4
            + self.occurrences.capacity() * size_of::<Occurrence>()
            + self.by_symbol.capacity() * 4
            + self.symbol_first.capacity() * 4
            + strings
            + self.facts.capacity() * 8
            + facts
            + self.implementations.capacity() * 8
            + self.enclosing.capacity() * size_of::<(u32, Span)>()
    }
}

/// The last descriptor's name of a SCIP symbol: `rust-analyzer cargo x 0.1.0
/// geometry/Point#norm().` → `norm`; a local symbol keeps its name.
pub fn last_descriptor(symbol: &str) -> String {
    if symbol.starts_with("local ") {
        return symbol.to_string();
    }
    let descriptors = descriptors(symbol).unwrap_or(symbol);
    let trimmed = descriptors.trim_end_matches(['.', '#', '/', ':', '!']);
    let trimmed = trimmed.strip_suffix(')').map_or(trimmed, |t| {
        match t.rfind('(') {
            // A parameter: `f().(value)` (after a descriptor's end).
            Some(at) if at == 0 || t[..at].ends_with(['.', '#', '/', ':', '!', ']']) => t,
            // A method's disambiguator: `norm(+1)`.
            Some(at) => &t[..at],
            None => t,
        }
    });
    let trimmed = trimmed.trim_end_matches(['.', '#', '/', ':', '!', ']', ')']);
    let start = trimmed
        .rfind(['.', '#', '/', ':', '!', '[', ']', '('])
        .map_or(0, |at| at + 1);
    let name = &trimmed[start..];
    name.trim_matches('`').to_string()
}

/// Whether a SCIP symbol names a parameter (`f().(x)`) or a type parameter
/// (`f().[T]`): the descriptors an indexer shares between a function's
/// overload signatures, which a live server tells apart.
pub fn is_parameter(symbol: &str) -> bool {
    descriptors(symbol).is_some_and(|descriptors| descriptors.ends_with([')', ']']))
}

/// The descriptors of a global SCIP symbol, what follows its fourth space
/// (scheme, manager, package, version): `geometry/Point#norm().`. `None` for
/// a local symbol, or one with fewer fields.
pub fn descriptors(symbol: &str) -> Option<&str> {
    if symbol.starts_with("local ") {
        return None;
    }
    symbol.splitn(5, ' ').nth(4)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_descriptors_are_names() {
        for (symbol, name) in [
            (
                "rust-analyzer cargo shapes 0.1.0 geometry/Point#norm().",
                "norm",
            ),
            ("rust-analyzer cargo shapes 0.1.0 geometry/Point#", "Point"),
            ("rust-analyzer cargo shapes 0.1.0 geometry/", "geometry"),
            (
                "scip-python python shapes 0.1.0 `shapes.area`/circle_area().",
                "circle_area",
            ),
            ("scip-typescript npm p 1.0.0 src/`a.ts`/f().", "f"),
            ("rust-analyzer cargo x 0.1.0 impl#[Point]norm(+1).", "norm"),
            (
                "scip-typescript npm p 1.0.0 src/`a.ts`/original().(value)",
                "value",
            ),
            ("scip-typescript npm p 1.0.0 src/`a.ts`/freeze().[T]", "T"),
            ("local 7", "local 7"),
        ] {
            assert_eq!(last_descriptor(symbol), name, "{symbol}");
        }
    }

    #[test]
    fn parameters_and_type_parameters_are_told_from_the_rest() {
        for (symbol, parameter) in [
            (
                "scip-typescript npm immer 10.1.1 src/utils/`common.ts`/original().(value)",
                true,
            ),
            (
                "scip-typescript npm immer 10.1.1 src/utils/`common.ts`/freeze().[T]",
                true,
            ),
            (
                "scip-python python packaging 24.2 `packaging.version`/parse().(version)",
                true,
            ),
            (
                "scip-typescript npm immer 10.1.1 src/utils/`common.ts`/original().",
                false,
            ),
            ("rust-analyzer cargo x 0.1.0 impl#[Point]norm(+1).", false),
            ("rust-analyzer cargo shapes 0.1.0 geometry/Point#", false),
            ("scip-typescript npm p 1.0.0 src/`a(b).ts`/", false),
            ("local 7", false),
        ] {
            assert_eq!(is_parameter(symbol), parameter, "{symbol}");
        }
    }

    #[test]
    fn spans_touch_their_end() {
        let span = Span {
            start: Pos {
                line: 1,
                character: 4,
            },
            end: Pos {
                line: 1,
                character: 8,
            },
        };
        assert!(span.touches(Pos {
            line: 1,
            character: 8
        }));
        assert!(!span.touches(Pos {
            line: 1,
            character: 9
        }));
        assert!(!span.touches(Pos {
            line: 0,
            character: 5
        }));
    }
}
