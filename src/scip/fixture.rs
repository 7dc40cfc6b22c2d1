//! Test support: a project on disk, a SCIP index of it written with the
//! `scip` crate's types, and its sidecar.

use super::load::write_index;
use super::sidecar::{self, Sidecar, FORMAT};
use scip::types;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One occurrence: file, 0-based line and UTF-8 column, length, symbol, roles.
pub struct Occ<'a> {
    pub file: &'a str,
    pub line: i32,
    pub column: i32,
    pub len: i32,
    pub symbol: &'a str,
    pub roles: i32,
}

/// An occurrence of `symbol` at the first `needle` on line `line` of `file`.
pub fn at<'a>(
    files: &[(&str, &str)],
    file: &'a str,
    needle: &str,
    nth: usize,
    symbol: &'a str,
    roles: i32,
) -> Occ<'a> {
    let text = files
        .iter()
        .find(|(f, _)| *f == file)
        .expect("a fixture file")
        .1;
    let mut seen = 0;
    for (n, line) in text.lines().enumerate() {
        let mut from = 0;
        while let Some(at) = line[from..].find(needle) {
            if seen == nth {
                return Occ {
                    file,
                    line: n as i32,
                    column: (from + at) as i32,
                    len: needle.len() as i32,
                    symbol,
                    roles,
                };
            }
            seen += 1;
            from += at + needle.len();
        }
    }
    panic!("{needle:?} #{nth} not in {file}");
}

/// Writes `files` under `root`, the index of `occurrences` at `root/index.scip`
/// and (with `sidecar`) its sidecar. Returns the index path.
pub fn project(
    root: &Path,
    files: &[(&str, &str)],
    occurrences: &[Occ<'_>],
    symbols: &[types::SymbolInformation],
    sidecar: bool,
) -> PathBuf {
    for (file, text) in files {
        let path = root.join(file);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("a directory");
        std::fs::write(&path, text).expect("a file");
    }
    let mut index = types::Index::new();
    index.metadata.mut_or_insert_default().project_root = format!("file://{}", root.display());
    index
        .metadata
        .mut_or_insert_default()
        .tool_info
        .mut_or_insert_default()
        .name = "fixture".into();
    for (file, _) in files {
        let mut document = types::Document::new();
        document.relative_path = file.to_string();
        document.position_encoding =
            types::PositionEncoding::UTF8CodeUnitOffsetFromLineStart.into();
        for o in occurrences.iter().filter(|o| o.file == *file) {
            let mut occurrence = types::Occurrence::new();
            occurrence.range = vec![o.line, o.column, o.column + o.len];
            occurrence.symbol = o.symbol.to_string();
            occurrence.symbol_roles = o.roles;
            document.occurrences.push(occurrence);
        }
        index.documents.push(document);
    }
    index.external_symbols = symbols.to_vec();
    let path = root.join("index.scip");
    write_index(&path, &index).expect("the index");
    if sidecar {
        write_sidecar(&path, root, files.iter().map(|(f, _)| *f));
    }
    path
}

/// A sidecar for `index` with the current bytes of `files` under `root`.
pub fn write_sidecar<'a>(index: &Path, root: &Path, files: impl Iterator<Item = &'a str>) {
    let bytes = std::fs::read(index).expect("the index");
    let documents: BTreeMap<String, String> = files
        .map(|f| {
            let text = std::fs::read(root.join(f)).expect("a file");
            (f.to_string(), sidecar::to_hex(&sidecar::hash(&text)))
        })
        .collect();
    sidecar::write(
        index,
        &Sidecar {
            format: FORMAT.into(),
            commit: Some("0123456789abcdef".into()),
            root: ".".into(),
            indexer: "fixture".into(),
            index_bytes: bytes.len() as u64,
            index_sha256: sidecar::to_hex(&sidecar::hash(&bytes)),
            documents,
        },
    )
    .expect("the sidecar");
}

/// A symbol description.
pub fn info(
    symbol: &str,
    documentation: &str,
    implements: Option<&str>,
) -> types::SymbolInformation {
    let mut info = types::SymbolInformation::new();
    info.symbol = symbol.into();
    if !documentation.is_empty() {
        info.documentation = vec![documentation.into()];
    }
    if let Some(target) = implements {
        let mut relationship = types::Relationship::new();
        relationship.symbol = target.into();
        relationship.is_implementation = true;
        info.relationships.push(relationship);
    }
    info
}
