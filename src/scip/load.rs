//! Reading a SCIP index file into [`Index`] tables, streamed and bounded.
//!
//! Two passes over a buffered read of the file, never the whole file in
//! memory: the first walks the protobuf tags only and counts documents,
//! occurrences and symbols, so an index over the limits is refused before
//! anything is built and the tables are allocated once at their final size;
//! the second parses one `Document` message at a time with the `scip`
//! crate's types and moves what answers need into the tables, dropping the
//! message. Wire errors (a truncated file, a wrong wire type, a length past
//! the end) are errors with the byte offset, never panics.

use super::index::{Document, Encoding, Index, Occurrence, Pos, Span, SymbolFacts};
use indexmap::IndexSet;
use protobuf::rt::WireType;
use protobuf::{CodedInputStream, Message};
use scip::types;
use std::fs::File;
use std::io::{BufReader, Seek};
use std::path::{Path, PathBuf};

/// Default [`LoadLimits::max_occurrences`]: 10 million occurrences is about
/// 250 MB of tables (see BENCHMARKS.md for the measured RSS per million).
pub const DEFAULT_MAX_OCCURRENCES: u64 = 10_000_000;
/// Default [`LoadLimits::max_bytes`]: the largest index file read.
pub const DEFAULT_MAX_INDEX_BYTES: u64 = 2 * 1024 * 1024 * 1024;
/// One `Document` message larger than this is refused (the message is
/// parsed whole before it is moved into the tables).
pub const MAX_DOCUMENT_MESSAGE_BYTES: u64 = 256 * 1024 * 1024;
/// Documentation kept per symbol (hover text); the rest is cut.
pub const MAX_DOCUMENTATION_BYTES: usize = 64 * 1024;
/// Read buffer of both passes.
const READ_BUFFER: usize = 1 << 20;

/// What a load may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LoadLimits {
    /// Most occurrences (and most symbol descriptions) in one index.
    pub max_occurrences: u64,
    /// Largest index file.
    pub max_bytes: u64,
}

impl Default for LoadLimits {
    fn default() -> Self {
        LoadLimits {
            max_occurrences: DEFAULT_MAX_OCCURRENCES,
            max_bytes: DEFAULT_MAX_INDEX_BYTES,
        }
    }
}

/// Why an index was not loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: {bytes} bytes is over the limit of {limit} bytes ([indexes] max_bytes)", path.display())]
    TooLarge {
        path: PathBuf,
        bytes: u64,
        limit: u64,
    },
    #[error("{}: {count} {what} is over the limit of {limit} ([indexes] max_occurrences)", path.display())]
    TooManyOccurrences {
        path: PathBuf,
        what: &'static str,
        count: u64,
        limit: u64,
    },
    #[error("{}: not a SCIP index, or truncated or corrupt at byte {offset}: {message}", path.display())]
    Corrupt {
        path: PathBuf,
        offset: u64,
        message: String,
    },
}

impl LoadError {
    /// The machine-readable reason (the entry's `lastError` starts with it
    /// in words; tests match on this).
    pub fn reason(&self) -> &'static str {
        match self {
            LoadError::Io { .. } => "unreadable",
            LoadError::TooLarge { .. } => "too_large",
            LoadError::TooManyOccurrences { .. } => "too_many_occurrences",
            LoadError::Corrupt { .. } => "corrupt",
        }
    }
}

/// The index's own description of itself (SCIP `Metadata`).
#[derive(Debug, Clone, Default)]
pub struct IndexMeta {
    /// `rust-analyzer`, `scip-python`, …
    pub tool: String,
    pub tool_version: String,
    /// The `project_root` URI the indexer recorded (where it ran).
    pub project_root: String,
}

/// What the load dropped, and why; none of it is ever answered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Dropped {
    /// Documents whose `relative_path` is absolute, has `..`, or is empty.
    pub unsafe_paths: u64,
    /// Occurrences whose range is not 3 or 4 non-negative numbers in order.
    pub malformed_ranges: u64,
    /// Documents that appear more than once (their parts are not answered).
    pub duplicate_documents: u64,
}

/// A loaded index.
#[derive(Debug)]
pub struct Loaded {
    pub meta: IndexMeta,
    pub index: Index,
    pub dropped: Dropped,
    /// Documents marked duplicate: never answered.
    pub duplicate: Vec<bool>,
}

/// Counts of the first pass.
#[derive(Debug, Default)]
struct Counts {
    documents: u64,
    occurrences: u64,
    symbols: u64,
}

/// The bytes an index file must be (from its sidecar).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expected {
    pub bytes: u64,
    pub sha256: [u8; 32],
}

/// A reader that hashes what passes through it.
struct Hashing<R> {
    inner: R,
    hasher: Option<sha2::Sha256>,
}

impl<R: std::io::Read> std::io::Read for Hashing<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        if let Some(hasher) = &mut self.hasher {
            sha2::Digest::update(hasher, &buf[..n]);
        }
        Ok(n)
    }
}

/// Loads `path` within `limits`; with `expected`, the file's length and
/// SHA-256 must be those (a truncated or replaced index is refused).
pub fn load(
    path: &Path,
    limits: LoadLimits,
    expected: Option<Expected>,
) -> Result<Loaded, LoadError> {
    let io = |source| LoadError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut file = File::open(path).map_err(io)?;
    let bytes = file.metadata().map_err(io)?.len();
    if bytes > limits.max_bytes {
        return Err(LoadError::TooLarge {
            path: path.to_path_buf(),
            bytes,
            limit: limits.max_bytes,
        });
    }
    let not_described = |what: String| {
        LoadError::Corrupt {
        path: path.to_path_buf(),
        offset: 0,
        message: format!(
            "{what}: not the index its sidecar describes (truncated, or replaced without its sidecar)"
        ),
    }
    };
    if let Some(expected) = expected {
        if expected.bytes != bytes {
            return Err(not_described(format!(
                "{bytes} bytes where the sidecar says {}",
                expected.bytes
            )));
        }
    }
    let counts = {
        // The first pass reads every byte: the hash is taken on the way.
        let mut hashing = Hashing {
            inner: &mut file,
            hasher: expected.map(|_| <sha2::Sha256 as sha2::Digest>::new()),
        };
        let (counts, hasher) = {
            let mut reader = BufReader::with_capacity(READ_BUFFER, &mut hashing);
            let mut input = CodedInputStream::from_buf_read(&mut reader);
            let counts = count(&mut input, bytes).map_err(|e| corrupt(path, &input, e))?;
            drop(input);
            drop(reader);
            (counts, hashing.hasher.take())
        };
        if let (Some(expected), Some(hasher)) = (expected, hasher) {
            let got: [u8; 32] = sha2::Digest::finalize(hasher).into();
            if got != expected.sha256 {
                return Err(not_described("its SHA-256 differs".to_string()));
            }
        }
        counts
    };
    for (what, count) in [
        ("occurrences", counts.occurrences),
        ("symbol descriptions", counts.symbols),
    ] {
        if count > limits.max_occurrences {
            return Err(LoadError::TooManyOccurrences {
                path: path.to_path_buf(),
                what,
                count,
                limit: limits.max_occurrences,
            });
        }
    }
    file.rewind().map_err(io)?;
    let mut reader = BufReader::with_capacity(READ_BUFFER, &mut file);
    let mut input = CodedInputStream::from_buf_read(&mut reader);
    let mut builder = Builder::with_capacity(&counts, limits.max_occurrences);
    build(&mut input, bytes, &mut builder).map_err(|e| corrupt(path, &input, e))?;
    let meta = builder.meta.take().ok_or_else(|| LoadError::Corrupt {
        path: path.to_path_buf(),
        offset: 0,
        message: "no metadata (an index starts with its tool and project root)".into(),
    })?;
    let (index, dropped, duplicate) = builder.finish();
    Ok(Loaded {
        meta,
        index,
        dropped,
        duplicate,
    })
}

fn corrupt(path: &Path, input: &CodedInputStream<'_>, error: protobuf::Error) -> LoadError {
    LoadError::Corrupt {
        path: path.to_path_buf(),
        offset: input.pos(),
        message: error.to_string(),
    }
}

/// A field's number and wire type.
fn read_tag(input: &mut CodedInputStream<'_>) -> protobuf::Result<Option<(u32, WireType)>> {
    let Some(tag) = input.read_raw_tag_or_eof()? else {
        return Ok(None);
    };
    let wire =
        WireType::new(tag & 7).ok_or_else(|| wire_error(format!("wire type {}", tag & 7)))?;
    let field = tag >> 3;
    if field == 0 {
        return Err(wire_error("field number 0".into()));
    }
    Ok(Some((field, wire)))
}

fn wire_error(what: String) -> protobuf::Error {
    protobuf::Error::from(std::io::Error::new(
        std::io::ErrorKind::InvalidData,
        format!("invalid protobuf: {what}"),
    ))
}

/// A length-delimited field where the schema wants one.
fn expect_delimited(field: u32, wire: WireType) -> protobuf::Result<()> {
    if wire == WireType::LengthDelimited {
        Ok(())
    } else {
        Err(wire_error(format!(
            "field {field} has wire type {wire:?}, not length-delimited"
        )))
    }
}

/// The first pass: counts, and the wire checked down to the fields of a document.
fn count(input: &mut CodedInputStream<'_>, bytes: u64) -> protobuf::Result<Counts> {
    let mut counts = Counts::default();
    // Nothing may claim to be longer than the file.
    let outer = input.push_limit(bytes)?;
    while let Some((field, wire)) = read_tag(input)? {
        match field {
            // Index.documents
            2 => {
                expect_delimited(field, wire)?;
                counts.documents += 1;
                let len = input.read_raw_varint64()?;
                if len > MAX_DOCUMENT_MESSAGE_BYTES {
                    return Err(wire_error(format!(
                        "a document of {len} bytes (at most {MAX_DOCUMENT_MESSAGE_BYTES})"
                    )));
                }
                let old = input.push_limit(len)?;
                while let Some((field, wire)) = read_tag(input)? {
                    match field {
                        2 => counts.occurrences += 1,
                        3 => counts.symbols += 1,
                        _ => {}
                    }
                    input.skip_field(wire)?;
                }
                input.pop_limit(old);
            }
            // Index.external_symbols
            3 => {
                expect_delimited(field, wire)?;
                counts.symbols += 1;
                input.skip_field(wire)?;
            }
            _ => input.skip_field(wire)?,
        }
    }
    input.pop_limit(outer);
    Ok(counts)
}

/// The second pass: every message parsed and moved into `builder`.
fn build(
    input: &mut CodedInputStream<'_>,
    bytes: u64,
    builder: &mut Builder,
) -> protobuf::Result<()> {
    let outer = input.push_limit(bytes)?;
    while let Some((field, wire)) = read_tag(input)? {
        match field {
            1 => {
                expect_delimited(field, wire)?;
                let metadata: types::Metadata = input.read_message()?;
                builder.meta = Some(IndexMeta {
                    tool: metadata.tool_info.name.clone(),
                    tool_version: metadata.tool_info.version.clone(),
                    project_root: metadata.project_root,
                });
            }
            2 => {
                expect_delimited(field, wire)?;
                // Checked again here: the file may have been replaced since
                // the first pass counted it.
                let len = input.read_raw_varint64()?;
                if len > MAX_DOCUMENT_MESSAGE_BYTES {
                    return Err(wire_error(format!(
                        "a document of {len} bytes (at most {MAX_DOCUMENT_MESSAGE_BYTES})"
                    )));
                }
                let old = input.push_limit(len)?;
                let mut document = types::Document::new();
                document.merge_from(input)?;
                input.pop_limit(old);
                builder.add_document(document);
                if builder.occurrences.len() as u64 > builder.max_occurrences {
                    return Err(wire_error(format!(
                        "more occurrences than the first pass counted (over {})",
                        builder.max_occurrences
                    )));
                }
            }
            3 => {
                expect_delimited(field, wire)?;
                let symbol: types::SymbolInformation = input.read_message()?;
                builder.add_facts(&symbol, None);
            }
            _ => input.skip_field(wire)?,
        }
    }
    input.pop_limit(outer);
    Ok(())
}

/// A relative path an index may name: not absolute, no `.`, `..` or empty
/// component, no backslash or NUL. Anything else is never read.
pub fn is_safe_relative_path(path: &str) -> bool {
    !path.is_empty()
        && !path.starts_with('/')
        && !path.contains(['\\', '\0'])
        && path
            .split('/')
            .all(|c| !c.is_empty() && c != "." && c != "..")
}

/// SCIP's range: `[line, start, end]` or `[startLine, start, endLine, end]`.
fn span(range: &[i32]) -> Option<Span> {
    let n = |v: i32| u32::try_from(v).ok();
    let (start, end) = match *range {
        [line, start, end] => (
            Pos {
                line: n(line)?,
                character: n(start)?,
            },
            Pos {
                line: n(line)?,
                character: n(end)?,
            },
        ),
        [line, start, end_line, end] => (
            Pos {
                line: n(line)?,
                character: n(start)?,
            },
            Pos {
                line: n(end_line)?,
                character: n(end)?,
            },
        ),
        _ => return None,
    };
    (start <= end).then_some(Span { start, end })
}

fn encoding(document: &types::Document) -> Encoding {
    use types::PositionEncoding as P;
    match document.position_encoding.enum_value() {
        Ok(P::UTF8CodeUnitOffsetFromLineStart) => Encoding::Utf8,
        Ok(P::UTF32CodeUnitOffsetFromLineStart) => Encoding::Utf32,
        // Unspecified: the indexers that leave it out (scip-python,
        // older scip-typescript) count in UTF-16, as the LSP does.
        _ => Encoding::Utf16,
    }
}

/// The tables as they are built.
struct Builder {
    meta: Option<IndexMeta>,
    documents: Vec<Document>,
    paths: std::collections::HashMap<Box<str>, u32>,
    duplicate: Vec<bool>,
    occurrences: Vec<Occurrence>,
    symbols: IndexSet<Box<str>>,
    facts: Vec<Option<Box<SymbolFacts>>>,
    implementations: Vec<(u32, u32)>,
    enclosing: Vec<(u32, Span)>,
    dropped: Dropped,
    /// The limit the first pass checked, checked again as the tables grow.
    max_occurrences: u64,
    /// One document's occurrences before sorting (reused).
    pending: Vec<(Occurrence, Option<Span>)>,
}

impl Builder {
    fn with_capacity(counts: &Counts, max_occurrences: u64) -> Builder {
        Builder {
            meta: None,
            documents: Vec::with_capacity(counts.documents as usize),
            paths: std::collections::HashMap::with_capacity(counts.documents as usize),
            duplicate: Vec::with_capacity(counts.documents as usize),
            occurrences: Vec::with_capacity(counts.occurrences as usize),
            symbols: IndexSet::new(),
            facts: Vec::new(),
            implementations: Vec::new(),
            enclosing: Vec::new(),
            dropped: Dropped::default(),
            max_occurrences,
            pending: Vec::new(),
        }
    }

    /// The id of a symbol; a local one is per document.
    fn intern(&mut self, name: &str, document: Option<u32>) -> u32 {
        let id = if name.starts_with("local ") {
            let key = format!("{name}\0{}", document.unwrap_or(u32::MAX));
            self.symbols.insert_full(key.into_boxed_str()).0
        } else if let Some(id) = self.symbols.get_index_of(name) {
            id
        } else {
            self.symbols.insert_full(name.into()).0
        };
        id as u32
    }

    fn add_document(&mut self, document: types::Document) {
        if !is_safe_relative_path(&document.relative_path) {
            self.dropped.unsafe_paths += 1;
            tracing::warn!(path = %document.relative_path.escape_debug(), "SCIP index: document path refused");
            return;
        }
        let number = self.documents.len() as u32;
        let path: Box<str> = document.relative_path.as_str().into();
        let mut duplicate = false;
        if let Some(&first) = self.paths.get(&path) {
            self.dropped.duplicate_documents += 1;
            self.duplicate[first as usize] = true;
            duplicate = true;
        } else {
            self.paths.insert(path.clone(), number);
        }
        let encoding = encoding(&document);
        let mut pending = std::mem::take(&mut self.pending);
        pending.clear();
        for occurrence in &document.occurrences {
            if occurrence.symbol.is_empty() {
                continue;
            }
            let Some(span) = span(&occurrence.range) else {
                self.dropped.malformed_ranges += 1;
                continue;
            };
            let symbol = self.intern(&occurrence.symbol, Some(number));
            let roles = (occurrence.symbol_roles & 0x7f) as u8;
            let enclosing = span_if_any(&occurrence.enclosing_range);
            pending.push((
                Occurrence {
                    span,
                    symbol,
                    roles,
                },
                enclosing,
            ));
        }
        pending.sort_by_key(|(o, _)| (o.span.start, o.span.end));
        let first = self.occurrences.len() as u32;
        for (i, (occurrence, enclosing)) in pending.iter().enumerate() {
            if let (Some(range), true) = (enclosing, occurrence.is_definition()) {
                self.enclosing.push((first + i as u32, *range));
            }
            self.occurrences.push(*occurrence);
        }
        self.pending = pending;
        for symbol in &document.symbols {
            self.add_facts(symbol, Some(number));
        }
        self.documents.push(Document {
            path,
            language: document.language.as_str().into(),
            encoding,
            first,
            end: self.occurrences.len() as u32,
        });
        self.duplicate.push(duplicate);
    }

    fn add_facts(&mut self, info: &types::SymbolInformation, document: Option<u32>) {
        if info.symbol.is_empty() {
            return;
        }
        let id = self.intern(&info.symbol, document);
        let mut documentation = String::new();
        if let Some(signature) = info.signature_documentation.as_ref() {
            if !signature.text.is_empty() {
                documentation.push_str(&format!(
                    "```{}\n{}\n```",
                    signature.language, signature.text
                ));
            }
        }
        for item in &info.documentation {
            if !documentation.is_empty() {
                documentation.push_str("\n\n---\n\n");
            }
            documentation.push_str(item);
        }
        if documentation.len() > MAX_DOCUMENTATION_BYTES {
            let mut cut = MAX_DOCUMENTATION_BYTES;
            while !documentation.is_char_boundary(cut) {
                cut -= 1;
            }
            documentation.truncate(cut);
            documentation.push_str("\n\n…");
        }
        let enclosing = (!info.enclosing_symbol.is_empty())
            .then(|| self.intern(&info.enclosing_symbol, document));
        for relationship in &info.relationships {
            if relationship.is_implementation && !relationship.symbol.is_empty() {
                let target = self.intern(&relationship.symbol, document);
                self.implementations.push((target, id));
            }
        }
        let facts = SymbolFacts {
            kind: info.kind.value(),
            display_name: info.display_name.as_str().into(),
            documentation: documentation.into_boxed_str(),
            enclosing,
        };
        let slot = id as usize;
        if self.facts.len() <= slot {
            self.facts.resize_with(slot + 1, || None);
        }
        // The first description of a symbol wins (an index may repeat
        // external symbols per document).
        if self.facts[slot].is_none() {
            self.facts[slot] = Some(Box::new(facts));
        }
    }

    fn finish(mut self) -> (Index, Dropped, Vec<bool>) {
        let symbols = self.symbols.len();
        self.facts.resize_with(symbols, || None);
        // The by-symbol permutation, by counting.
        let mut symbol_first = vec![0u32; symbols + 1];
        for o in &self.occurrences {
            symbol_first[o.symbol as usize + 1] += 1;
        }
        for s in 0..symbols {
            symbol_first[s + 1] += symbol_first[s];
        }
        let mut next = symbol_first.clone();
        let mut by_symbol = vec![0u32; self.occurrences.len()];
        for (i, o) in self.occurrences.iter().enumerate() {
            let slot = &mut next[o.symbol as usize];
            by_symbol[*slot as usize] = i as u32;
            *slot += 1;
        }
        self.implementations.sort_unstable();
        self.implementations.dedup();
        let mut by_path: Vec<u32> = (0..self.documents.len() as u32).collect();
        by_path.sort_by(|&a, &b| {
            self.documents[a as usize]
                .path
                .cmp(&self.documents[b as usize].path)
        });
        self.occurrences.shrink_to_fit();
        self.implementations.shrink_to_fit();
        self.enclosing.shrink_to_fit();
        self.symbols.shrink_to_fit();
        self.facts.shrink_to_fit();
        let index = Index {
            documents: self.documents,
            by_path,
            occurrences: self.occurrences,
            by_symbol,
            symbol_first,
            symbols: self.symbols,
            facts: self.facts,
            implementations: self.implementations,
            enclosing: self.enclosing,
        };
        (index, self.dropped, self.duplicate)
    }
}

fn span_if_any(range: &[i32]) -> Option<Span> {
    if range.is_empty() {
        None
    } else {
        span(range)
    }
}

/// Writes `index` to `path` (tests).
pub fn write_index(path: &Path, index: &types::Index) -> std::io::Result<()> {
    let bytes = index.write_to_bytes().map_err(std::io::Error::other)?;
    std::fs::write(path, bytes)
}

/// Writes a synthetic index of `documents` documents (`src/f<N>.rs`) with
/// `per_document` occurrences each, one document at a time (the 10-million
/// occurrence tests and the benchmark's RSS figure). Every occurrence names
/// one of 1,000 symbols per document; each symbol's first one defines it.
pub fn write_synthetic(path: &Path, documents: u32, per_document: u32) -> std::io::Result<()> {
    use std::io::Write;
    let file = File::create(path)?;
    let mut out = std::io::BufWriter::with_capacity(READ_BUFFER, file);
    let field = |out: &mut std::io::BufWriter<File>, number: u32, bytes: &[u8]| {
        let mut head = Vec::with_capacity(12);
        let mut stream = protobuf::CodedOutputStream::vec(&mut head);
        stream.write_raw_varint32(number << 3 | 2)?;
        stream.write_raw_varint64(bytes.len() as u64)?;
        stream.flush()?;
        drop(stream);
        out.write_all(&head)?;
        out.write_all(bytes)
    };
    let mut metadata = types::Metadata::new();
    metadata.tool_info.mut_or_insert_default().name = "synthetic".into();
    metadata.project_root = "file:///synthetic".into();
    let bytes = metadata.write_to_bytes().map_err(std::io::Error::other)?;
    field(&mut out, 1, &bytes)?;
    for d in 0..documents {
        let mut document = types::Document::new();
        document.relative_path = format!("src/f{d}.rs");
        document.language = "rust".into();
        for i in 0..per_document {
            let mut occurrence = types::Occurrence::new();
            let symbol = i % 1000;
            occurrence.range = vec![
                (i / 10) as i32,
                ((i % 10) * 8) as i32,
                ((i % 10) * 8 + 6) as i32,
            ];
            occurrence.symbol = format!("s . . . f{d}/s{symbol}.");
            occurrence.symbol_roles = i32::from(i < 1000);
            document.occurrences.push(occurrence);
        }
        let bytes = document.write_to_bytes().map_err(std::io::Error::other)?;
        field(&mut out, 2, &bytes)?;
    }
    out.flush()
}

#[cfg(test)]
mod tests;
