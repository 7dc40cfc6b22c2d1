//! LSP positions in a text: line ends, position encodings, and the conversion
//! of a `{line, character}` to a byte offset, with LSP's clamping rules.
//!
//! Pure functions over `&str`; no I/O.

/// The unit a `Position.character` counts, as negotiated with the server
/// (`positionEncoding`): UTF-8 bytes, UTF-16 code units (LSP's default) or
/// Unicode scalar values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PositionEncoding {
    Utf8,
    Utf16,
    Utf32,
}

impl PositionEncoding {
    /// Reads LSP's `PositionEncodingKind` string (`"utf-8"`, `"utf-16"`,
    /// `"utf-32"`). `None` for anything else: the caller decides whether an
    /// unknown kind is an error or means LSP's default, UTF-16.
    pub fn from_lsp(kind: &str) -> Option<PositionEncoding> {
        match kind {
            "utf-8" => Some(PositionEncoding::Utf8),
            "utf-16" => Some(PositionEncoding::Utf16),
            "utf-32" => Some(PositionEncoding::Utf32),
            _ => None,
        }
    }

    /// The `PositionEncodingKind` string LSP uses for this encoding.
    pub fn as_lsp(self) -> &'static str {
        match self {
            PositionEncoding::Utf8 => "utf-8",
            PositionEncoding::Utf16 => "utf-16",
            PositionEncoding::Utf32 => "utf-32",
        }
    }

    /// How many units of this encoding `c` takes.
    fn units(self, c: char) -> u64 {
        match self {
            PositionEncoding::Utf8 => c.len_utf8() as u64,
            PositionEncoding::Utf16 => c.len_utf16() as u64,
            PositionEncoding::Utf32 => 1,
        }
    }
}

/// Why a position cannot be turned into an offset.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PositionError {
    /// The character offset falls inside one character (between the two
    /// halves of a surrogate pair, or inside a multi-byte UTF-8 sequence).
    /// Rounding would silently move the edit, so this is refused.
    #[error("position {line}:{character} falls inside a character")]
    InsideCharacter { line: u64, character: u64 },
}

/// Byte offsets of where each line starts, for one text. LSP counts `\r\n`,
/// a lone `\r` and `\n` as line ends, so all three are recognised here (a
/// `str::lines` split would miss the lone `\r`).
#[derive(Debug, Clone)]
pub struct LineIndex {
    /// `starts[i]` is the byte offset of line `i`; there is always line 0.
    starts: Vec<usize>,
    /// `ends[i]` is the byte offset where line `i`'s content ends (its
    /// terminator, or the end of the text for the last line).
    ends: Vec<usize>,
}

impl LineIndex {
    pub fn new(text: &str) -> LineIndex {
        let bytes = text.as_bytes();
        let mut starts = vec![0];
        let mut ends = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            match bytes[i] {
                b'\r' if bytes.get(i + 1) == Some(&b'\n') => {
                    ends.push(i);
                    starts.push(i + 2);
                    i += 2;
                }
                b'\r' | b'\n' => {
                    ends.push(i);
                    starts.push(i + 1);
                    i += 1;
                }
                _ => i += 1,
            }
        }
        ends.push(bytes.len());
        LineIndex { starts, ends }
    }

    /// Number of lines; a text ending in a line terminator has an empty last line.
    pub(crate) fn line_count(&self) -> usize {
        self.starts.len()
    }

    /// The LSP `character` of the `column`-th Unicode character (0-based) of
    /// `line`, in `encoding`: how editors' columns become LSP positions.
    /// A column past the line's end is the line's end.
    pub fn character_of_column(
        &self,
        text: &str,
        line: u64,
        column: usize,
        encoding: PositionEncoding,
    ) -> Result<u64, PositionError> {
        let start = self.offset(text, line, 0, PositionEncoding::Utf8)?;
        let end = self.offset(text, line, u64::MAX, PositionEncoding::Utf8)?;
        let units: usize = text[start..end]
            .chars()
            .take(column)
            .map(|c| match encoding {
                PositionEncoding::Utf8 => c.len_utf8(),
                PositionEncoding::Utf16 => c.len_utf16(),
                PositionEncoding::Utf32 => 1,
            })
            .sum();
        Ok(units as u64)
    }

    /// The byte offset of `{line, character}` in `text` (the text this index
    /// was built from). LSP's clamping applies: a character past the line's
    /// length means the line's end (before its terminator), and a line past
    /// the last one means the end of the document.
    pub fn offset(
        &self,
        text: &str,
        line: u64,
        character: u64,
        encoding: PositionEncoding,
    ) -> Result<usize, PositionError> {
        let Some(index) = usize::try_from(line)
            .ok()
            .filter(|&l| l < self.starts.len())
        else {
            return Ok(text.len());
        };
        let (start, end) = (self.starts[index], self.ends[index]);
        let content = &text[start..end];
        let mut counted = 0u64;
        for (at, c) in content.char_indices() {
            if counted == character {
                return Ok(start + at);
            }
            counted += encoding.units(c);
            if counted > character {
                return Err(PositionError::InsideCharacter { line, character });
            }
        }
        // `character` reached exactly at the line end, or past it: clamp.
        Ok(end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn editor_columns_become_lsp_characters_in_each_encoding() {
        let text = "a\r\n😀é x\nlast";
        let index = LineIndex::new(text);
        // Column 2 of line 1 is after the emoji: 2 UTF-16 units, 4 bytes, 1 char.
        assert_eq!(
            index.character_of_column(text, 1, 1, PositionEncoding::Utf16),
            Ok(2)
        );
        assert_eq!(
            index.character_of_column(text, 1, 1, PositionEncoding::Utf8),
            Ok(4)
        );
        assert_eq!(
            index.character_of_column(text, 1, 1, PositionEncoding::Utf32),
            Ok(1)
        );
        assert_eq!(
            index.character_of_column(text, 1, 3, PositionEncoding::Utf16),
            Ok(4)
        );
        // Past the end: the line's end (the terminator is not counted).
        assert_eq!(
            index.character_of_column(text, 0, 9, PositionEncoding::Utf16),
            Ok(1)
        );
        assert_eq!(
            index.character_of_column(text, 2, 9, PositionEncoding::Utf16),
            Ok(4)
        );
    }
    use PositionEncoding::{Utf16, Utf32, Utf8};

    fn at(text: &str, line: u64, character: u64, enc: PositionEncoding) -> usize {
        LineIndex::new(text)
            .offset(text, line, character, enc)
            .expect("valid position")
    }

    #[test]
    fn from_lsp_reads_the_three_kinds() {
        assert_eq!(PositionEncoding::from_lsp("utf-8"), Some(Utf8));
        assert_eq!(PositionEncoding::from_lsp("utf-16"), Some(Utf16));
        assert_eq!(PositionEncoding::from_lsp("utf-32"), Some(Utf32));
        assert_eq!(PositionEncoding::from_lsp("UTF-16"), None);
        for e in [Utf8, Utf16, Utf32] {
            assert_eq!(PositionEncoding::from_lsp(e.as_lsp()), Some(e));
        }
    }

    #[test]
    fn line_ends_crlf_cr_lf() {
        let text = "a\r\nb\rc\nd";
        let idx = LineIndex::new(text);
        assert_eq!(idx.line_count(), 4);
        assert_eq!(at(text, 1, 0, Utf16), 3);
        assert_eq!(at(text, 2, 0, Utf16), 5);
        assert_eq!(at(text, 3, 0, Utf16), 7);
        // Past the line end clamps before the terminator, never inside `\r\n`.
        assert_eq!(at(text, 0, 9, Utf16), 1);
    }

    #[test]
    fn final_newline_gives_an_empty_last_line() {
        let text = "ab\n";
        assert_eq!(LineIndex::new(text).line_count(), 2);
        assert_eq!(at(text, 1, 0, Utf16), 3);
        assert_eq!(at(text, 1, 5, Utf16), 3);
        assert_eq!(at(text, 7, 5, Utf16), 3);
    }

    #[test]
    fn lines_past_the_end_clamp_to_the_document_end() {
        assert_eq!(at("ab\ncd", 2, 0, Utf8), 5);
        assert_eq!(at("ab\ncd", u64::MAX, u64::MAX, Utf8), 5);
        assert_eq!(at("", 0, 3, Utf8), 0);
    }

    #[test]
    fn encodings_count_their_units() {
        // 'é' is 2 UTF-8 bytes, 1 UTF-16 unit; '😀' 4 bytes, 2 units, 1 scalar.
        let text = "é😀x";
        assert_eq!(at(text, 0, 6, Utf8), 6);
        assert_eq!(at(text, 0, 3, Utf16), 6);
        assert_eq!(at(text, 0, 2, Utf32), 6);
    }

    #[test]
    fn inside_a_character_is_refused() {
        let text = "😀";
        let idx = LineIndex::new(text);
        assert_eq!(
            idx.offset(text, 0, 1, Utf16),
            Err(PositionError::InsideCharacter {
                line: 0,
                character: 1
            })
        );
        assert!(idx.offset(text, 0, 2, Utf8).is_err());
        assert_eq!(idx.offset(text, 0, 4, Utf8), Ok(4));
    }

    #[test]
    fn combining_marks_are_their_own_units() {
        // "e\u{301}" is one grapheme but two scalars; LSP counts code units.
        let text = "e\u{301}x";
        assert_eq!(at(text, 0, 1, Utf16), 1);
        assert_eq!(at(text, 0, 2, Utf16), 3);
    }
}
