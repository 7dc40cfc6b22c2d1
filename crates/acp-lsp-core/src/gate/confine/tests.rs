//! Unit tests of `gate/confine.rs`.

use super::*;
use proptest::prelude::*;
use serde_json::{json, Value};
use tempfile::TempDir;

/// `<tmp>/proj` (root, with `src/main.rs` and `sub/`), `<tmp>/proj-evil`,
/// `<tmp>/outside` (with `secret.txt`), `<tmp>/ro` (read-only root).
struct Fixture {
    _dir: TempDir,
    base: PathBuf,
    proj: PathBuf,
    outside: PathBuf,
    ro: PathBuf,
    conf: Confinement,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = canonical(dir.path());
    let proj = base.join("proj");
    let outside = base.join("outside");
    let ro = base.join("ro");
    fs::create_dir_all(proj.join("src")).unwrap();
    fs::create_dir_all(proj.join("sub")).unwrap();
    fs::create_dir_all(base.join("proj-evil")).unwrap();
    fs::create_dir_all(&outside).unwrap();
    fs::create_dir_all(&ro).unwrap();
    fs::write(proj.join("src/main.rs"), "fn main() {}").unwrap();
    fs::write(base.join("proj-evil/x.rs"), "").unwrap();
    fs::write(outside.join("secret.txt"), "secret").unwrap();
    fs::write(ro.join("lib.rs"), "").unwrap();
    let conf = Confinement::new(
        std::slice::from_ref(&proj),
        std::slice::from_ref(&ro),
        &["untitled".to_string()],
    );
    Fixture {
        _dir: dir,
        base,
        proj,
        outside,
        ro,
        conf,
    }
}

/// `fs::canonicalize`, spelled as roots are on Windows: `C:\…`, not the
/// verbatim `\\?\C:\…` it answers there (the gate resolves a root to the
/// plain spelling, so expected paths must use it too).
fn canonical(path: &Path) -> PathBuf {
    let real = fs::canonicalize(path).unwrap();
    #[cfg(windows)]
    if let Some(plain) = real.to_str().and_then(|s| s.strip_prefix(r"\\?\")) {
        return PathBuf::from(plain);
    }
    real
}

/// The path part of a file URI for an absolute path of this OS: `/tmp/x`
/// on Unix, `/C:/Users/x` on Windows (its separators made `/`).
fn uri_path(path: &Path) -> String {
    let text = path.display().to_string();
    if cfg!(windows) {
        format!("/{}", text.replace('\\', "/"))
    } else {
        text
    }
}

fn file_uri(path: &Path) -> String {
    format!("file://{}", uri_path(path))
}

/// A file URI for a fixed absolute path written the Unix way (`/etc/passwd`):
/// on Windows on drive C (`file:///C:/etc/passwd`), since a path with no
/// drive is refused there for another reason than the one under test.
fn abs_uri(unix_path: &str) -> String {
    if cfg!(windows) {
        format!("file:///C:{unix_path}")
    } else {
        format!("file://{unix_path}")
    }
}

fn assert_outside(conf: &Confinement, uri: &str) {
    assert_eq!(
        conf.check_uri(uri),
        Err(ConfineError::OutsideRoots {
            uri: uri.to_string()
        }),
        "{uri}"
    );
}

fn assert_invalid(conf: &Confinement, uri: &str) {
    match conf.check_uri(uri) {
        Err(ConfineError::InvalidUri { uri: got, .. }) => assert_eq!(got, uri),
        other => panic!("{uri:?}: expected InvalidUri, got {other:?}"),
    }
}

#[test]
fn inside_file_is_allowed_and_resolved() {
    let f = fixture();
    let path = f.proj.join("src/main.rs");
    assert_eq!(f.conf.check_uri(&file_uri(&path)), Ok(Some(path.clone())));
    assert_eq!(
        f.conf.check_uri(&file_uri(&f.proj)),
        Ok(Some(f.proj.clone()))
    );
    let params =
        json!({"textDocument": {"uri": file_uri(&path)}, "position": {"line": 0, "character": 3}});
    assert_eq!(f.conf.check_params(&params), Ok(()));
}

#[test]
fn dotdot_escape_is_refused() {
    let f = fixture();
    assert_outside(
        &f.conf,
        &format!("{}/../outside/secret.txt", file_uri(&f.proj)),
    );
    assert_outside(
        &f.conf,
        &format!("{}/src/../../outside/secret.txt", file_uri(&f.proj)),
    );
    assert_outside(&f.conf, &abs_uri("/../../../../etc/passwd"));
    // `..` that stays inside is normalised by `url`, not refused.
    assert_eq!(
        f.conf
            .check_uri(&format!("{}/sub/../src/./main.rs", file_uri(&f.proj))),
        Ok(Some(f.proj.join("src/main.rs")))
    );
}

#[test]
fn encoded_dotdot_escape_is_refused() {
    let f = fixture();
    for dots in ["%2e%2e", "%2E%2E", ".%2e", "%2e."] {
        assert_outside(
            &f.conf,
            &format!("{}/{dots}/outside/secret.txt", file_uri(&f.proj)),
        );
        assert_eq!(
            f.conf
                .check_uri(&format!("{}/sub/{dots}/src/%2e/main.rs", file_uri(&f.proj))),
            Ok(Some(f.proj.join("src/main.rs"))),
            "{dots}"
        );
    }
}

#[test]
fn encoded_separators_are_invalid() {
    let f = fixture();
    for sep in ["%2F", "%2f", "%5C", "%5c"] {
        assert_invalid(
            &f.conf,
            &format!("{}/..{sep}..{sep}outside", file_uri(&f.proj)),
        );
        // Even when the decoded path would stay inside.
        assert_invalid(&f.conf, &format!("{}/src{sep}main.rs", file_uri(&f.proj)));
    }
}

#[test]
fn nul_is_invalid() {
    let f = fixture();
    assert_invalid(
        &f.conf,
        &format!("{}/src/main.rs%00.txt", file_uri(&f.proj)),
    );
    assert_invalid(&f.conf, &format!("{}/src/main.rs\0.txt", file_uri(&f.proj)));
}

#[test]
fn backslash_is_invalid() {
    let f = fixture();
    assert_invalid(
        &f.conf,
        &format!("{}/..\\outside\\secret.txt", file_uri(&f.proj)),
    );
    assert_invalid(&f.conf, &format!("{}/src\\main.rs", file_uri(&f.proj)));
}

#[test]
fn relative_file_uri_is_invalid() {
    let f = fixture();
    assert_invalid(&f.conf, "file:etc/passwd");
    assert_invalid(&f.conf, "file://localhost");
}

#[test]
fn prefix_sibling_is_refused() {
    let f = fixture();
    assert!(f.base.join("proj-evil/x.rs").exists());
    assert_outside(&f.conf, &file_uri(&f.base.join("proj-evil/x.rs")));
    assert_outside(&f.conf, &file_uri(&f.base.join("proj-evil")));
    assert_outside(&f.conf, &file_uri(&f.base.join("proj-evil/new.rs")));
}

/// The documents a request names come out of the check with the path their
/// URI spells and, where the check's own lookup can read it (Linux, no
/// symlink on the way, no dot segments), the file's metadata: the host's
/// sync takes it for its stat.
#[test]
fn named_documents_get_their_path_and_the_lookups_metadata() {
    let f = fixture();
    let main = f.proj.join("src/main.rs");
    let missing = f.proj.join("src/new.rs");
    let dotted = format!("{}/sub/../src/main.rs", file_uri(&f.proj));
    let mut named: Vec<NamedDocument> = [file_uri(&main), file_uri(&missing), dotted.clone()]
        .into_iter()
        .map(NamedDocument::from_uri)
        .collect();
    let params = json!({"textDocument": {"uri": file_uri(&main)},
        "others": [file_uri(&missing), dotted, "untitled:x"]});
    assert_eq!(f.conf.check_params_naming(&params, &mut named), Ok(()));
    assert_eq!(named[0].path.as_deref(), Some(main.as_path()));
    let metadata = named[0].metadata.as_ref();
    if cfg!(target_os = "linux") {
        let metadata = metadata.expect("openat2 gives the metadata");
        assert!(metadata.is_file());
        assert_eq!(metadata.len(), "fn main() {}".len() as u64);
    } else {
        assert!(metadata.is_none());
    }
    // A file not there yet: its path, no metadata.
    assert_eq!(named[1].path.as_deref(), Some(missing.as_path()));
    assert!(named[1].metadata.is_none());
    // Dot segments: two readings of the path, so no metadata for either.
    assert!(named[2].path.is_some());
    assert!(named[2].metadata.is_none());

    // A violation anywhere still fails the whole check.
    let mut named = vec![NamedDocument::from_uri(file_uri(&main))];
    let escape = json!({"textDocument": {"uri": file_uri(&main)},
        "target": file_uri(&f.outside.join("secret.txt"))});
    assert!(f.conf.check_params_naming(&escape, &mut named).is_err());
}

/// Through a symlink inside the root the document is allowed, and its
/// metadata is left to the host (the lookup that reads it follows none).
#[cfg(unix)]
#[test]
fn a_named_document_behind_a_symlink_gets_no_metadata() {
    let f = fixture();
    std::os::unix::fs::symlink("../src", f.proj.join("sub/alias")).unwrap();
    let uri = file_uri(&f.proj.join("sub/alias/main.rs"));
    let mut named = vec![NamedDocument::from_uri(uri.clone())];
    let params = json!({"textDocument": {"uri": uri}});
    assert_eq!(f.conf.check_params_naming(&params, &mut named), Ok(()));
    assert_eq!(
        named[0].path.as_deref(),
        Some(f.proj.join("sub/alias/main.rs").as_path())
    );
    assert!(named[0].metadata.is_none());
}

#[cfg(unix)]
#[test]
fn symlink_pointing_outside_is_refused() {
    let f = fixture();
    std::os::unix::fs::symlink(&f.outside, f.proj.join("escape")).unwrap();
    std::os::unix::fs::symlink(f.outside.join("secret.txt"), f.proj.join("secret")).unwrap();
    assert_outside(&f.conf, &file_uri(&f.proj.join("escape/secret.txt")));
    assert_outside(&f.conf, &file_uri(&f.proj.join("escape/not-yet.txt")));
    assert_outside(&f.conf, &file_uri(&f.proj.join("secret")));
}

#[cfg(unix)]
#[test]
fn symlink_within_root_is_allowed() {
    let f = fixture();
    std::os::unix::fs::symlink("../src", f.proj.join("sub/alias")).unwrap();
    assert_eq!(
        f.conf
            .check_uri(&file_uri(&f.proj.join("sub/alias/main.rs"))),
        Ok(Some(f.proj.join("src/main.rs")))
    );
}

#[cfg(unix)]
#[test]
fn dotdot_after_symlink_is_taken_physically() {
    let f = fixture();
    let deep = f.outside.join("deep/dir");
    fs::create_dir_all(&deep).unwrap();
    std::os::unix::fs::symlink(&deep, f.proj.join("link")).unwrap();
    // Lexically `proj/secret.txt`, but `open()` reaches `outside/deep/secret.txt`.
    assert_outside(
        &f.conf,
        &format!("{}/link/../secret.txt", file_uri(&f.proj)),
    );
    assert_outside(
        &f.conf,
        &format!("{}/link/%2e%2e/secret.txt", file_uri(&f.proj)),
    );
}

#[cfg(unix)]
#[test]
fn dangling_symlink_pointing_outside_is_refused() {
    let f = fixture();
    std::os::unix::fs::symlink(f.outside.join("planted.rs"), f.proj.join("new.rs")).unwrap();
    assert_outside(&f.conf, &file_uri(&f.proj.join("new.rs")));
    // A dangling link whose target would be inside is fine.
    std::os::unix::fs::symlink(f.proj.join("later.rs"), f.proj.join("soon.rs")).unwrap();
    assert_eq!(
        f.conf.check_uri(&file_uri(&f.proj.join("soon.rs"))),
        Ok(Some(f.proj.join("later.rs")))
    );
}

#[cfg(unix)]
#[test]
fn symlink_loop_is_refused() {
    let f = fixture();
    std::os::unix::fs::symlink("b", f.proj.join("a")).unwrap();
    std::os::unix::fs::symlink("a", f.proj.join("b")).unwrap();
    assert_outside(&f.conf, &file_uri(&f.proj.join("a/x.rs")));
}

#[test]
fn nonexistent_file_inside_root_is_allowed() {
    let f = fixture();
    let target = f.proj.join("src/new_dir/renamed.rs");
    assert!(!target.exists());
    assert_eq!(
        f.conf.check_uri(&file_uri(&target)),
        Ok(Some(target.clone()))
    );
    let params = json!({"files": [{"oldUri": file_uri(&f.proj.join("src/main.rs")), "newUri": file_uri(&target)}]});
    assert_eq!(f.conf.check_params(&params), Ok(()));
    let escape = json!({"files": [{"oldUri": file_uri(&f.proj.join("src/main.rs")), "newUri": file_uri(&f.outside.join("x.rs"))}]});
    assert_eq!(
        f.conf.check_params(&escape).map_err(|e| e.reason()),
        Err("uri_outside_roots")
    );
}

#[test]
fn read_only_root_is_allowed_but_not_writable() {
    let f = fixture();
    let lib = f.ro.join("lib.rs");
    assert_eq!(f.conf.check_uri(&file_uri(&lib)), Ok(Some(lib.clone())));
    assert!(!f.conf.is_writable(&lib));
}

#[test]
fn nonexistent_root_is_kept_lexically() {
    let f = fixture();
    let missing = f.base.join("later/./ws/../ws");
    let conf = Confinement::new(&[missing], &[], &[]);
    let inside = f.base.join("later/ws/a.rs");
    assert_eq!(conf.check_uri(&file_uri(&inside)), Ok(Some(inside.clone())));
    assert_outside(&conf, &file_uri(&f.base.join("later/wsx/a.rs")));
    assert!(conf.is_writable(&inside));
}

#[test]
fn is_writable_respects_roots() {
    let f = fixture();
    assert!(f.conf.is_writable(&f.proj.join("src/main.rs")));
    assert!(f.conf.is_writable(&f.proj.join("src/not-yet.rs")));
    assert!(!f.conf.is_writable(&f.outside.join("secret.txt")));
    assert!(!f.conf.is_writable(&f.base.join("proj-evil/x.rs")));
    assert!(!f.conf.is_writable(&f.proj.join("../outside/secret.txt")));
    assert!(!f.conf.is_writable(Path::new("src/main.rs")));

    // A read-only root nested in a session root stays read-only.
    let vendor = f.proj.join("vendor");
    fs::create_dir_all(&vendor).unwrap();
    let conf = Confinement::new(
        std::slice::from_ref(&f.proj),
        std::slice::from_ref(&vendor),
        &[],
    );
    assert!(!conf.is_writable(&vendor.join("dep.rs")));
    assert!(conf.is_writable(&f.proj.join("src/main.rs")));
    assert!(conf.check_uri(&file_uri(&vendor.join("dep.rs"))).is_ok());
    // A session root nested in a read-only root is writable.
    let conf = Confinement::new(
        std::slice::from_ref(&f.proj),
        std::slice::from_ref(&f.base),
        &[],
    );
    assert!(conf.is_writable(&f.proj.join("src/main.rs")));
    assert!(!conf.is_writable(&f.outside.join("secret.txt")));
}

#[cfg(unix)]
#[test]
fn is_writable_follows_symlinks() {
    let f = fixture();
    std::os::unix::fs::symlink(&f.ro, f.proj.join("ro-link")).unwrap();
    std::os::unix::fs::symlink(&f.outside, f.proj.join("out-link")).unwrap();
    assert!(!f.conf.is_writable(&f.proj.join("ro-link/lib.rs")));
    assert!(!f.conf.is_writable(&f.proj.join("out-link/new.rs")));
}

#[test]
fn other_scheme_under_uri_key_is_refused() {
    let f = fixture();
    let params = json!({"textDocument": {"uri": "https://example.com/x.rs"}});
    assert_eq!(
        f.conf.check_params(&params),
        Err(ConfineError::SchemeNotAllowed {
            uri: "https://example.com/x.rs".into(),
            scheme: "https".into()
        })
    );
    let params = json!({"targetUri": "JDT://contents/x.class"});
    assert_eq!(
        f.conf.check_params(&params),
        Err(ConfineError::SchemeNotAllowed {
            uri: "JDT://contents/x.class".into(),
            scheme: "jdt".into()
        })
    );
}

#[test]
fn allowed_scheme_passes() {
    let f = fixture();
    assert_eq!(f.conf.check_uri("untitled:Untitled-1"), Ok(None));
    assert_eq!(f.conf.check_uri("Untitled:Untitled-2"), Ok(None));
    let params = json!({"textDocument": {"uri": "untitled:Untitled-1"}, "scopeUri": "untitled:x"});
    assert_eq!(f.conf.check_params(&params), Ok(()));
    // Allowing "file" does not switch file checks off.
    let conf = Confinement::new(std::slice::from_ref(&f.proj), &[], &["FILE".into()]);
    assert_outside(&conf, &file_uri(&f.outside.join("secret.txt")));
}

#[test]
fn non_uri_under_uri_key_is_invalid() {
    let f = fixture();
    for bad in ["just some text", "", "/etc/passwd", "1abc:x"] {
        let params = json!({"textDocument": {"uri": bad}});
        match f.conf.check_params(&params) {
            Err(e @ ConfineError::InvalidUri { .. }) => {
                assert_eq!(e.uri(), bad);
                assert_eq!(e.reason(), "invalid_uri");
            }
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    // Non-string values under a URI key (e.g. `rootUri: null`) are not URIs.
    assert_eq!(f.conf.check_params(&json!({"rootUri": null})), Ok(()));
}

#[test]
fn remote_host_is_invalid() {
    let f = fixture();
    assert_invalid(&f.conf, "file://otherhost/x");
    assert_invalid(
        &f.conf,
        &format!("file://otherhost{}", uri_path(&f.proj.join("src/main.rs"))),
    );
    assert_invalid(&f.conf, "file://127.0.0.1/etc/passwd");
    let via_localhost = format!("file://localhost{}", uri_path(&f.proj.join("src/main.rs")));
    assert_eq!(
        f.conf.check_uri(&via_localhost),
        Ok(Some(f.proj.join("src/main.rs")))
    );
}

#[test]
fn nested_params_find_the_violation() {
    let f = fixture();
    let good = file_uri(&f.proj.join("src/main.rs"));
    let bad = file_uri(&f.outside.join("secret.txt"));
    let params = json!({
        "textDocument": {"uri": good},
        "items": [
            {"targetUri": good, "range": {}},
            {"targetUri": bad, "range": {}},
        ],
    });
    assert_eq!(
        f.conf.check_params(&params),
        Err(ConfineError::OutsideRoots { uri: bad.clone() })
    );
    let clean = json!({"textDocument": {"uri": good}, "items": [[{"targetUri": good}]]});
    assert_eq!(f.conf.check_params(&clean), Ok(()));
    // Deep inside arrays of arrays, under a key that says nothing about URIs.
    let deep = json!({"a": [[[{"b": [{"c": bad}]}]]]});
    assert_eq!(
        f.conf.check_params(&deep),
        Err(ConfineError::OutsideRoots { uri: bad })
    );
}

#[test]
fn first_violation_in_document_order() {
    let f = fixture();
    let first = file_uri(&f.outside.join("one.txt"));
    let second = file_uri(&f.outside.join("two.txt"));
    let params = json!([{"uri": first}, {"uri": second}]);
    assert_eq!(
        f.conf
            .check_params(&params)
            .map_err(|e| e.uri().to_string()),
        Err(first)
    );
}

#[test]
fn colon_in_new_name_is_not_a_uri() {
    let f = fixture();
    let params = json!({
        "textDocument": {"uri": file_uri(&f.proj.join("src/main.rs"))},
        "newName": "foo:bar",
        "query": "https://example.com",
    });
    assert_eq!(f.conf.check_params(&params), Ok(()));
    // But a file URI is checked wherever it is.
    let sneaky = file_uri(&f.outside.join("secret.txt"));
    let params = json!({"newName": sneaky});
    assert_eq!(
        f.conf.check_params(&params),
        Err(ConfineError::OutsideRoots { uri: sneaky })
    );
}

#[test]
fn file_uri_spellings_are_all_checked() {
    let f = fixture();
    let path = uri_path(&f.outside.join("secret.txt"));
    for s in [
        format!("FILE://{path}"),
        format!("File:{path}"),
        format!("  file://{path}"),
        format!("\u{1}file://{path}"),
        format!("fi\tle://{path}"),
        format!("file:\n//{path}"),
    ] {
        let params = json!({"label": "x", "data": [s]});
        assert_eq!(
            f.conf.check_params(&params),
            Err(ConfineError::OutsideRoots { uri: s.clone() }),
            "{s:?}"
        );
    }
}

#[test]
fn workspace_edit_changes_keys_are_checked() {
    let f = fixture();
    let bad = file_uri(&f.outside.join("secret.txt"));
    let params = json!({"edit": {"changes": {bad.clone(): []}}});
    assert_eq!(
        f.conf.check_params(&params),
        Err(ConfineError::OutsideRoots { uri: bad })
    );
    let params = json!({"edit": {"changes": {"jdt://x/y": []}}});
    assert_eq!(
        f.conf.check_params(&params).map_err(|e| e.reason()),
        Err("uri_scheme_not_allowed")
    );
    let good = file_uri(&f.proj.join("src/main.rs"));
    let params = json!({"edit": {"changes": {good: [{"newText": "x"}]}}});
    assert_eq!(f.conf.check_params(&params), Ok(()));
}

#[test]
fn percent_encoded_names_inside_work() {
    let f = fixture();
    fs::write(f.proj.join("a b.rs"), "").unwrap();
    fs::write(f.proj.join("été.rs"), "").unwrap();
    assert_eq!(
        f.conf.check_uri(&format!("{}/a%20b.rs", file_uri(&f.proj))),
        Ok(Some(f.proj.join("a b.rs")))
    );
    assert_eq!(
        f.conf
            .check_uri(&format!("{}/%C3%A9t%C3%A9.rs", file_uri(&f.proj))),
        Ok(Some(f.proj.join("été.rs")))
    );
    assert_eq!(
        f.conf
            .check_uri(&format!("{}/%c3%a9t%c3%a9.rs", file_uri(&f.proj))),
        Ok(Some(f.proj.join("été.rs")))
    );
}

#[test]
fn reasons_and_uris() {
    let cases = [
        (
            ConfineError::OutsideRoots { uri: "a".into() },
            "uri_outside_roots",
        ),
        (
            ConfineError::SchemeNotAllowed {
                uri: "a".into(),
                scheme: "x".into(),
            },
            "uri_scheme_not_allowed",
        ),
        (
            ConfineError::InvalidUri {
                uri: "a".into(),
                why: "w".into(),
            },
            "invalid_uri",
        ),
    ];
    for (error, reason) in cases {
        assert_eq!(error.reason(), reason);
        assert_eq!(error.uri(), "a");
    }
}

#[test]
fn url_normalises_dot_segments() {
    // The lexical reading relies on this; pin it rather than assume it.
    for (raw, path) in [
        ("file:///a/b/../c", "/a/c"),
        ("file:///a/b/%2e%2e/c", "/a/c"),
        ("file:///a/b/%2E./c", "/a/c"),
        ("file:///a/b/.%2E/c", "/a/c"),
        ("file:///a/./b/%2e/c", "/a/b/c"),
        ("file:///../../a", "/a"),
        ("file:///a/b%2F..%2F../c", "/a/b%2F..%2F../c"),
    ] {
        let url = Url::parse(raw).unwrap();
        assert_eq!(url.path(), path, "{raw}");
    }
}

#[test]
fn lexical_normalisation() {
    assert_eq!(
        normalize_lexically(Path::new("/a/./b/../c")),
        PathBuf::from("/a/c")
    );
    assert_eq!(
        normalize_lexically(Path::new("/../../a")),
        PathBuf::from("/a")
    );
    assert_eq!(
        normalize_lexically(Path::new("a/../../b")),
        PathBuf::from("../b")
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn dot_segments_match_lexical_normalisation(
        segments in proptest::collection::vec(
            prop_oneof![
                Just("."), Just(".."), Just("%2e%2e"), Just("%2E"),
                Just("a"), Just("b"), Just("proj"), Just("proj-evil"),
            ],
            0..10,
        )
    ) {
        let f = fixture();
        fs::create_dir_all(f.proj.join("a/b")).unwrap();
        let uri = format!("{}/{}", file_uri(&f.proj), segments.join("/"));
        let decoded: Vec<&str> = segments
            .iter()
            .map(|s| match *s { "%2e%2e" => "..", "%2E" => ".", other => other })
            .collect();
        let expected = normalize_lexically(&f.proj.join(decoded.join("/")));
        let verdict = f.conf.check_uri(&uri);
        if expected.starts_with(&f.proj) {
            prop_assert_eq!(verdict, Ok(Some(expected)));
        } else {
            prop_assert_eq!(verdict, Err(ConfineError::OutsideRoots { uri }));
        }
    }
}

/// The kernel's lookups (`resolve`'s fast paths) land where the walk does,
/// on every shape of path: plain, `..`, symlinks in the middle and at the
/// end, out of the root and back, dangling, a loop, a file used as a
/// directory, missing parts, a FIFO.
#[cfg(unix)]
#[test]
fn kernel_lookups_agree_with_the_walk() {
    use std::os::unix::fs::symlink;
    let f = fixture();
    let deep = f.outside.join("deep/dir");
    fs::create_dir_all(&deep).unwrap();
    symlink(&deep, f.proj.join("link")).unwrap();
    symlink("../src", f.proj.join("sub/alias")).unwrap();
    symlink(f.outside.join("secret.txt"), f.proj.join("secret")).unwrap();
    symlink(f.outside.join("planted.rs"), f.proj.join("dangling")).unwrap();
    symlink("b", f.proj.join("a")).unwrap();
    symlink("a", f.proj.join("b")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(f.proj.join("fifo"))
        .status()
        .unwrap();
    assert!(made.success());
    let paths = [
        "src/main.rs",
        "src/../src/main.rs",
        "src/./main.rs",
        "sub/../../outside/secret.txt",
        "sub/alias/main.rs",
        "sub/alias/../sub",
        "link/../secret.txt",
        "link/../../secret.txt",
        "secret",
        "dangling",
        "a/x.rs",
        "src/main.rs/x",
        "src/main.rs/..",
        "src/new_dir/renamed.rs",
        "link/new.rs",
        "fifo",
        "",
        "../../../..",
    ];
    for rel in paths {
        let path = f.proj.join(rel);
        let (fast, walked) = (resolve(&path), resolve_walk(&path));
        match (&fast, &walked) {
            (Ok(a), Ok(b)) => assert_eq!(a, b, "{rel}"),
            (Err(_), Err(_)) => {}
            _ => panic!("{rel}: {fast:?} vs the walk's {walked:?}"),
        }
    }
    // And the verdicts that follow from them.
    assert_outside(&f.conf, &file_uri(&f.proj.join("secret")));
    assert_outside(
        &f.conf,
        &format!("{}/link/../secret.txt", file_uri(&f.proj)),
    );
    assert_eq!(
        f.conf
            .check_uri(&file_uri(&f.proj.join("src/../src/main.rs"))),
        Ok(Some(f.proj.join("src/main.rs")))
    );
}

/// The gate checks a request's params in the borrowed reading
/// (`gate::tree::Json`); it must find what a `Value` walk finds, escaped
/// strings and keys included.
#[test]
fn borrowed_params_are_checked_like_values() {
    use crate::gate::tree::Json;
    let f = fixture();
    let inside = file_uri(&f.proj.join("src/main.rs"));
    let outside = file_uri(&f.outside.join("secret.txt"));
    let escaped = outside.replace('/', "\\/");
    let cases = [
        (
            format!(r#"{{"textDocument": {{"uri": "{inside}"}}}}"#),
            Ok(()),
        ),
        (
            format!(r#"{{"textDocument": {{"uri": "{outside}"}}}}"#),
            Err("uri_outside_roots"),
        ),
        (
            format!(r#"{{"textDocument": {{"uri": "{escaped}"}}}}"#),
            Err("uri_outside_roots"),
        ),
        (
            format!(r#"{{"edit": {{"changes": {{"{escaped}": []}}}}}}"#),
            Err("uri_outside_roots"),
        ),
        (
            format!(r#"{{"list": [1, null, {{"x": ["{outside}"]}}]}}"#),
            Err("uri_outside_roots"),
        ),
        (
            r#"{"targetUri": "https://example.com/x"}"#.to_string(),
            Err("uri_scheme_not_allowed"),
        ),
        (r#"{"uri": 42}"#.to_string(), Ok(())),
        (
            r#"{"query": "not a uri", "n": 1.5, "b": true}"#.to_string(),
            Ok(()),
        ),
    ];
    for (text, want) in cases {
        let value: Value = serde_json::from_str(&text).unwrap();
        let json: Json = serde_json::from_str(&text).unwrap();
        let by_value = f.conf.check_params(&value).map_err(|e| e.reason());
        let by_json = f.conf.check_params(&json).map_err(|e| e.reason());
        assert_eq!(by_value, want, "{text}");
        assert_eq!(by_json, want, "{text}");
    }
}

/// The authority is checked as written: `url` reads `file://./…` (and
/// `file://.`-like hosts) as local, which a Windows server opens as the
/// device path `\\.\…`. Found by tests/fuzz.rs's Windows spellings.
#[test]
fn a_dot_host_is_invalid() {
    let f = fixture();
    let path = f.proj.join("src/main.rs").display().to_string();
    let path = path.replace('\\', "/");
    let path = path.trim_start_matches('/');
    for host in [".", "..", "%2e", "LOCALHOST.", "?"] {
        assert_invalid(&f.conf, &format!("file://{host}/{path}"));
    }
}

// Drive letters (Windows; run under wine in CI). The fixture's root is a
// temporary directory on drive C, spelled `C:\…`.

/// A path's drive letter (`C`) and the rest of its URI path after `C:`
/// (`/users/…`), so a test can spell the drive as it likes.
#[cfg(windows)]
fn drive_and_rest(path: &Path) -> (char, String) {
    let text = uri_path(path);
    let mut chars = text.chars().skip(1);
    let drive = chars.next().unwrap();
    assert_eq!(chars.next(), Some(':'), "{text}");
    (drive, chars.collect())
}

#[cfg(windows)]
#[test]
fn a_drive_letter_uri_inside_the_root_is_allowed() {
    let f = fixture();
    let main = f.proj.join("src").join("main.rs");
    let (drive, rest) = drive_and_rest(&main);
    assert_eq!(drive, 'C', "the fixture lives on drive C");
    let uri = format!("file:///C:{rest}");
    assert_eq!(f.conf.check_uri(&uri), Ok(Some(main.clone())));
    // `file://localhost/C:/…` is the same file.
    let via_localhost = format!("file://localhost/C:{rest}");
    assert_eq!(f.conf.check_uri(&via_localhost), Ok(Some(main.clone())));
    let params = json!({"textDocument": {"uri": uri}});
    assert_eq!(f.conf.check_params(&params), Ok(()));
}

#[cfg(windows)]
#[test]
fn another_drive_is_refused() {
    let f = fixture();
    let (_, rest) = drive_and_rest(&f.proj.join("src").join("main.rs"));
    // The same path on other drives: Z: is wine's view of `/`, D: is
    // usually nothing at all; neither is the root.
    for drive in ['D', 'Z', 'd'] {
        assert_outside(&f.conf, &format!("file:///{drive}:{rest}"));
    }
    assert_outside(&f.conf, "file:///D:/");
    assert!(!f.conf.is_writable(Path::new(r"D:\ws\a.rs")));
}

/// Windows file systems compare names without case: `c:` is `C:`, and a
/// name in another case is the same file, resolved to the case it is
/// stored in, so it is inside exactly when the stored one is.
#[cfg(windows)]
#[test]
fn drive_letter_and_name_case_do_not_matter() {
    let f = fixture();
    let main = f.proj.join("src").join("main.rs");
    let (_, rest) = drive_and_rest(&main);
    assert_eq!(
        f.conf.check_uri(&format!("file:///c:{rest}")),
        Ok(Some(main.clone()))
    );
    assert_eq!(
        f.conf
            .check_uri(&format!("file:///c:{}", rest.to_uppercase())),
        Ok(Some(main.clone()))
    );
    let (_, outside) = drive_and_rest(&f.outside.join("secret.txt"));
    assert_outside(&f.conf, &format!("file:///c:{}", outside.to_uppercase()));
    let (_, evil) = drive_and_rest(&f.base.join("PROJ-EVIL").join("x.rs"));
    assert_outside(&f.conf, &format!("file:///c:{evil}"));
    // A root given in another case than the disk's is the same root.
    let upper = PathBuf::from(f.proj.display().to_string().to_uppercase());
    let conf = Confinement::new(&[upper], &[], &[]);
    assert_eq!(
        conf.check_uri(&format!("file:///C:{rest}")),
        Ok(Some(main.clone()))
    );
    assert!(conf.is_writable(&main));
    assert_outside(&conf, &format!("file:///C:{outside}"));
}

#[cfg(windows)]
#[test]
fn dotdot_escapes_from_a_drive_root_are_refused() {
    let f = fixture();
    let (_, proj) = drive_and_rest(&f.proj);
    for escape in [
        format!("file:///C:{proj}/../outside/secret.txt"),
        format!("file:///C:{proj}/src/../../outside/secret.txt"),
        format!("file:///C:{proj}/%2e%2e/outside/secret.txt"),
        format!("file:///C:{proj}/.%2E/proj-evil/x.rs"),
        // `..` past the drive's root stays on the drive, outside the root.
        "file:///C:/../../../../Windows/win.ini".to_string(),
    ] {
        assert_outside(&f.conf, &escape);
    }
    // `..` cannot climb from `C:` to another drive: `D:` after it is a
    // name with a colon (a stream), refused before any look-up.
    assert_invalid(&f.conf, "file:///C:/../D:/x");
    assert_invalid(&f.conf, &format!("file:///C:{proj}/..\\..\\outside"));
    // A `..` that stays inside is normalised, not refused.
    assert_eq!(
        f.conf
            .check_uri(&format!("file:///C:{proj}/sub/../src/main.rs")),
        Ok(Some(f.proj.join("src").join("main.rs")))
    );
    assert!(!f.conf.is_writable(&f.proj.join(r"..\outside\secret.txt")));
}

/// What is no path on a drive is refused before any look-up: a share (it
/// would send the user's credentials to that server), a path with no
/// drive, a device, a stream, a name Windows trims.
#[cfg(windows)]
#[test]
fn what_is_no_path_on_a_drive_is_invalid() {
    let f = fixture();
    let (_, proj) = drive_and_rest(&f.proj);
    for bad in [
        "file:////server/share/x.rs".to_string(),
        "file:///ws/proj/a.rs".to_string(),
        "file://server/C:/x".to_string(),
        format!("file:///C:{proj}/src/CON"),
        format!("file:///C:{proj}/src/nul.txt"),
        format!("file:///C:{proj}/src/main.rs:stream"),
        format!("file:///C:{proj}/src/main.rs."),
        format!("file:///C:{proj}/..%20/outside/secret.txt"),
    ] {
        assert_invalid(&f.conf, &bad);
    }
}
