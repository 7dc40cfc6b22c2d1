use super::*;
use crate::scip::fixture::{at, info, project};
use proptest::prelude::*;

const POINT: &str = "rust-analyzer cargo shapes 0.1.0 geometry/Point#";
const NORM: &str = "rust-analyzer cargo shapes 0.1.0 geometry/Point#norm().";
const SHAPE: &str = "rust-analyzer cargo shapes 0.1.0 geometry/Shape#";

pub(crate) const FILES: &[(&str, &str)] = &[
    (
        "src/geometry.rs",
        "pub trait Shape {}\npub struct Point { x: f64 }\nimpl Point {\n    pub fn norm(&self) -> f64 { let v = self.x; v }\n}\nimpl Shape for Point {}\n",
    ),
    ("src/lib.rs", "mod geometry;\npub use geometry::Point;\n"),
    ("src/report.rs", "fn r(p: &Point) -> f64 { p.norm() + p.norm() }\n"),
];

pub(crate) fn occurrences() -> Vec<crate::scip::fixture::Occ<'static>> {
    vec![
        at(FILES, "src/geometry.rs", "Shape", 0, SHAPE, 1),
        at(FILES, "src/geometry.rs", "Point", 0, POINT, 1),
        at(FILES, "src/geometry.rs", "Point", 1, POINT, 0),
        at(FILES, "src/geometry.rs", "norm", 0, NORM, 1),
        at(FILES, "src/geometry.rs", "v", 0, "local 0", 1),
        at(FILES, "src/geometry.rs", "v", 1, "local 0", 0),
        at(FILES, "src/geometry.rs", "Shape", 1, SHAPE, 0),
        at(FILES, "src/geometry.rs", "Point", 2, POINT, 0),
        at(FILES, "src/lib.rs", "Point", 0, POINT, 2),
        at(FILES, "src/report.rs", "Point", 0, POINT, 0),
        at(FILES, "src/report.rs", "norm", 0, NORM, 0),
        at(FILES, "src/report.rs", "norm", 1, NORM, 0),
    ]
}

pub(crate) fn symbols() -> Vec<scip::types::SymbolInformation> {
    vec![
        info(
            POINT,
            "```rust\npub struct Point\n```\n\nA point.",
            Some(SHAPE),
        ),
        info(NORM, "The norm.", None),
    ]
}

fn fixture() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let index = project(&root, FILES, &occurrences(), &symbols(), true);
    (dir, index)
}

#[test]
fn builds_the_tables() {
    let (_dir, path) = fixture();
    let loaded = load(&path, LoadLimits::default(), None).unwrap();
    let index = &loaded.index;
    assert_eq!(loaded.meta.tool, "fixture");
    assert_eq!(index.documents.len(), 3);
    assert_eq!(index.occurrence_count(), 12);
    let geometry = index.document("src/geometry.rs").unwrap();
    let report = index.document("src/report.rs").unwrap();
    assert!(index.document("src/none.rs").is_none());

    // "norm" on line 3 of geometry.rs, at its first and last character and
    // just past it; not before it.
    for character in [11, 14, 15] {
        let found = index
            .occurrence_at(geometry, Pos { line: 3, character })
            .unwrap();
        assert_eq!(index.symbol_name(index.occurrence(found).symbol), NORM);
    }
    assert!(index
        .occurrence_at(
            geometry,
            Pos {
                line: 3,
                character: 10
            }
        )
        .is_none());

    let norm = index.symbol_id(NORM).unwrap();
    let documents: Vec<u32> = index
        .occurrences_of(norm)
        .iter()
        .map(|&o| index.document_of(o))
        .collect();
    assert_eq!(documents, vec![geometry, report, report]);
    assert_eq!(index.definitions_of(norm).count(), 1);

    let point = index.symbol_id(POINT).unwrap();
    let shape = index.symbol_id(SHAPE).unwrap();
    assert_eq!(
        index.implementations_of(shape).collect::<Vec<_>>(),
        vec![point]
    );
    assert!(index
        .facts(point)
        .unwrap()
        .documentation
        .contains("A point."));
    assert_eq!(index.short_name(norm), "norm");

    // A local symbol is one per document.
    let local = index
        .occurrence_at(
            geometry,
            Pos {
                line: 3,
                character: 36,
            },
        )
        .unwrap();
    let local = index.occurrence(local).symbol;
    assert!(index.is_local(local));
    assert_eq!(index.occurrences_of(local).len(), 2);
    assert!(index.symbol_id("local 0").is_none());
}

#[test]
fn the_sidecar_must_describe_the_file() {
    let (_dir, path) = fixture();
    let bytes = std::fs::read(&path).unwrap();
    let expected = Expected {
        bytes: bytes.len() as u64,
        sha256: crate::scip::sidecar::hash(&bytes),
    };
    assert!(load(&path, LoadLimits::default(), Some(expected)).is_ok());
    // Truncated at a message boundary the file is still valid protobuf (an
    // index with fewer documents): only the sidecar can tell.
    let mut cut = bytes.clone();
    cut.truncate(bytes.len() - 1);
    std::fs::write(&path, &cut).unwrap();
    let refused = load(&path, LoadLimits::default(), Some(expected)).unwrap_err();
    assert_eq!(refused.reason(), "corrupt");
    assert!(
        refused
            .to_string()
            .contains("not the index its sidecar describes"),
        "{refused}"
    );
    // Same length, one byte different.
    let mut flipped = bytes.clone();
    let last = flipped.len() - 1;
    flipped[last] ^= 0x20;
    std::fs::write(&path, &flipped).unwrap();
    let refused = load(&path, LoadLimits::default(), Some(expected)).unwrap_err();
    assert!(refused.to_string().contains("SHA-256 differs"), "{refused}");
}

#[test]
fn refuses_what_is_over_the_limits() {
    let (_dir, path) = fixture();
    let limits = LoadLimits {
        max_occurrences: 11,
        ..LoadLimits::default()
    };
    let refused = load(&path, limits, None).unwrap_err();
    assert!(
        matches!(
            refused,
            LoadError::TooManyOccurrences {
                count: 12,
                limit: 11,
                ..
            }
        ),
        "{refused:?}"
    );
    assert!(refused
        .to_string()
        .contains("12 occurrences is over the limit of 11"));
    let limits = LoadLimits {
        max_bytes: 10,
        ..LoadLimits::default()
    };
    assert_eq!(load(&path, limits, None).unwrap_err().reason(), "too_large");
}

#[test]
fn drops_paths_outside_and_bad_ranges() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.scip");
    let mut index = scip::types::Index::new();
    index.metadata.mut_or_insert_default().project_root = "file:///p".into();
    for relative in [
        "../outside.rs",
        "/etc/passwd",
        "a/./b.rs",
        "",
        "ok.rs",
        "ok.rs",
    ] {
        let mut document = scip::types::Document::new();
        document.relative_path = relative.into();
        let mut good = scip::types::Occurrence::new();
        good.range = vec![0, 0, 1];
        good.symbol = "s . . . a.".into();
        let mut bad = scip::types::Occurrence::new();
        bad.range = vec![0, 5, 1];
        bad.symbol = "s . . . a.".into();
        let mut short = scip::types::Occurrence::new();
        short.range = vec![0, 5];
        short.symbol = "s . . . a.".into();
        document.occurrences = vec![good, bad, short];
        index.documents.push(document);
    }
    write_index(&path, &index).unwrap();
    let loaded = load(&path, LoadLimits::default(), None).unwrap();
    assert_eq!(loaded.dropped.unsafe_paths, 4);
    assert_eq!(loaded.dropped.malformed_ranges, 4);
    assert_eq!(loaded.dropped.duplicate_documents, 1);
    assert_eq!(loaded.duplicate, vec![true, true]);
    assert!(loaded
        .index
        .documents
        .iter()
        .all(|d| is_safe_relative_path(&d.path)));
}

#[test]
fn not_an_index_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("index.scip");
    for (bytes, what) in [
        (&b""[..], "no metadata"),
        (
            &b"hello, this is not protobuf at all"[..],
            "not a SCIP index",
        ),
        (&[0x12, 0xff, 0xff, 0xff, 0x0f][..], "not a SCIP index"),
    ] {
        std::fs::write(&path, bytes).unwrap();
        let refused = load(&path, LoadLimits::default(), None).unwrap_err();
        assert_eq!(refused.reason(), "corrupt");
        assert!(refused.to_string().contains(what), "{refused}");
    }
}

#[test]
fn every_truncation_is_an_error_or_a_shorter_index() {
    let (_dir, path) = fixture();
    let bytes = std::fs::read(&path).unwrap();
    for len in 0..bytes.len() {
        std::fs::write(&path, &bytes[..len]).unwrap();
        match load(&path, LoadLimits::default(), None) {
            Ok(loaded) => assert!(loaded.index.occurrence_count() <= 12),
            Err(e) => assert!(matches!(e, LoadError::Corrupt { .. }), "{e:?}"),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Corrupted bytes never panic and never build more than the file holds.
    #[test]
    fn corrupt_bytes_are_errors_not_panics(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
    ) {
        let (_dir, path) = fixture();
        let mut bytes = std::fs::read(&path).unwrap();
        for (at, value) in flips {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        let keep = cut.index(bytes.len() + 1);
        bytes.truncate(keep);
        std::fs::write(&path, &bytes).unwrap();
        if let Ok(loaded) = load(&path, LoadLimits::default(), None) {
            prop_assert!(loaded.index.occurrence_count() as u64 <= bytes.len() as u64);
            for d in &loaded.index.documents {
                prop_assert!(is_safe_relative_path(&d.path));
            }
        }
    }
}

#[test]
fn a_synthetic_index_loads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("synthetic.scip");
    write_synthetic(&path, 3, 2500).unwrap();
    let loaded = load(&path, LoadLimits::default(), None).unwrap();
    assert_eq!(loaded.index.occurrence_count(), 7500);
    assert_eq!(loaded.index.symbol_count(), 3000);
    let symbol = loaded.index.symbol_id("s . . . f1/s7.").unwrap();
    assert_eq!(loaded.index.occurrences_of(symbol).len(), 3);
    assert_eq!(loaded.index.definitions_of(symbol).count(), 1);
}
