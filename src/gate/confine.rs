//! URI confinement: every file URI a request names must lie inside the session roots.
//!
//! A language server runs with the user's privileges, so a `file:` URI the
//! agent puts in `lsp/request` params is as good as an `open()` on the user's
//! behalf. Before a request is forwarded, every URI in it must resolve inside
//! the session's roots.
//!
//! Servers do not agree on how to turn a URI into a path: WHATWG-style parsers
//! (the `url` crate, Node's `URL`) remove `.`/`..` segments lexically before
//! the path reaches the kernel, while RFC 3986-style parsers often just
//! percent-decode and hand the path to `open()`, where `..` is resolved
//! physically (after following symlinks). A file URI is accepted only if
//! *both* readings land inside a root, with symlinks resolved in each.

use percent_encoding::percent_decode_str;
use serde_json::Value;
use std::borrow::Cow;
use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};
use url::Url;

/// Linux's `MAXSYMLINKS`: beyond this many links a path is treated as a loop.
const MAX_SYMLINK_HOPS: usize = 40;

/// Why a URI may not be forwarded to a language server.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum ConfineError {
    /// The URI names a file outside every root (or one whose location could
    /// not be established, e.g. a symlink loop: refusing is the safe answer).
    #[error("URI is outside the session roots: {uri}")]
    OutsideRoots { uri: String },
    /// A URI field carries a scheme the configuration does not let through.
    #[error("URI scheme {scheme:?} is not allowed: {uri}")]
    SchemeNotAllowed { uri: String, scheme: String },
    /// The string cannot be read as a URI safely (malformed, remote host,
    /// encoded separators or NULs that would change its meaning on decoding).
    #[error("invalid URI {uri:?}: {why}")]
    InvalidUri { uri: String, why: String },
}

impl ConfineError {
    /// Stable machine-readable code for the agent-facing error data.
    pub fn reason(&self) -> &'static str {
        match self {
            ConfineError::OutsideRoots { .. } => "uri_outside_roots",
            ConfineError::SchemeNotAllowed { .. } => "uri_scheme_not_allowed",
            ConfineError::InvalidUri { .. } => "invalid_uri",
        }
    }

    /// The offending URI exactly as the agent sent it, so it can fix that one.
    pub fn uri(&self) -> &str {
        match self {
            ConfineError::OutsideRoots { uri }
            | ConfineError::SchemeNotAllowed { uri, .. }
            | ConfineError::InvalidUri { uri, .. } => uri,
        }
    }
}

/// The set of places a session's requests may name.
#[derive(Debug, Clone)]
pub struct Confinement {
    /// Session roots, canonical, so containment is a plain component-wise prefix test.
    roots: Vec<PathBuf>,
    /// Extra roots that may be read (navigated into) but never edited.
    read_only_roots: Vec<PathBuf>,
    /// Lowercase non-file schemes that carry no filesystem path we could check.
    allowed_schemes: Vec<String>,
}

impl Confinement {
    /// Roots are canonicalized once here so every check compares like with
    /// like; a root that does not exist (yet) is kept lexically normalised.
    ///
    /// `roots`: session roots (writable); `read_only_roots`: extra roots
    /// configuration adds (e.g. toolchain sources); `allowed_schemes`: non-file
    /// schemes let through unchecked (e.g. `untitled`). `file` in
    /// `allowed_schemes` is ignored: file URIs are always checked.
    pub fn new(
        roots: &[PathBuf],
        read_only_roots: &[PathBuf],
        allowed_schemes: &[String],
    ) -> Confinement {
        Confinement {
            roots: roots.iter().map(|r| canonical_root(r)).collect(),
            read_only_roots: read_only_roots.iter().map(|r| canonical_root(r)).collect(),
            allowed_schemes: allowed_schemes
                .iter()
                .map(|s| s.to_ascii_lowercase())
                .filter(|s| s != "file")
                .collect(),
        }
    }

    /// Checks one URI string, so callers can vet a single URI without a
    /// params tree. `Ok(Some(path))` is the resolved (symlink-free) path of an
    /// allowed file URI; `Ok(None)` means an allowed non-file scheme.
    pub fn check_uri(&self, uri: &str) -> Result<Option<PathBuf>, ConfineError> {
        let cleaned = clean(uri);
        let Some(scheme) = scheme_of(&cleaned) else {
            return Err(invalid(uri, "no URI scheme"));
        };
        let scheme = scheme.to_ascii_lowercase();
        if scheme == "file" {
            return self.check_file_uri(uri, &cleaned).map(Some);
        }
        if self.allowed_schemes.contains(&scheme) {
            Ok(None)
        } else {
            Err(ConfineError::SchemeNotAllowed {
                uri: uri.to_string(),
                scheme,
            })
        }
    }

    /// Vets a whole `lsp/request` params tree, since URIs hide at any depth
    /// (locations, workspace edits, rename targets). Returns the first
    /// violation in document order.
    ///
    /// Checked: every string (value or object key) that starts with `file:`;
    /// every string under a key `uri`, `…Uri` (`targetUri`, `rootUri`, …),
    /// which must be a URI of an allowed scheme; and the keys of an object
    /// under `changes` (a `WorkspaceEdit` map keyed by URI). Other strings are
    /// left alone. The walk uses an explicit stack, so depth costs heap, not
    /// call stack.
    pub fn check_params(&self, params: &Value) -> Result<(), ConfineError> {
        let mut stack: Vec<(&Value, Slot)> = vec![(params, Slot::Plain)];
        while let Some((value, slot)) = stack.pop() {
            match value {
                Value::String(s) => self.check_string(s, slot == Slot::UriValue)?,
                Value::Array(items) => {
                    stack.extend(items.iter().rev().map(|v| (v, Slot::Plain)));
                }
                Value::Object(map) => {
                    for key in map.keys() {
                        self.check_string(key, slot == Slot::UriKeys)?;
                    }
                    stack.extend(map.iter().rev().map(|(k, v)| (v, slot_for_key(k))));
                }
                Value::Null | Value::Bool(_) | Value::Number(_) => {}
            }
        }
        Ok(())
    }

    /// Whether an edit may be written at `path` (absolute): it must lie in a
    /// session root, and read-only roots (toolchain sources) stay read-only
    /// even when nested in one. The most specific root decides; on a tie the
    /// read-only root wins. Both the lexical and the physical reading of
    /// `..` must be writable, and an unresolvable path is not writable.
    pub fn is_writable(&self, path: &Path) -> bool {
        if !path.is_absolute() {
            return false;
        }
        let lexical = resolve(&normalize_lexically(path));
        let physical = resolve(path);
        match (lexical, physical) {
            (Ok(a), Ok(b)) => self.writable_at(&a) && self.writable_at(&b),
            _ => false,
        }
    }

    fn check_string(&self, s: &str, must_be_uri: bool) -> Result<(), ConfineError> {
        if must_be_uri || looks_like_file_uri(s) {
            self.check_uri(s)?;
        }
        Ok(())
    }

    fn check_file_uri(&self, uri: &str, cleaned: &str) -> Result<PathBuf, ConfineError> {
        if uri.contains('\0') {
            return Err(invalid(uri, "contains a NUL"));
        }
        if cleaned.contains("%00") {
            return Err(invalid(uri, "contains an encoded NUL (%00)"));
        }
        // `scheme_of` found "file:" (ASCII), so byte 5 is a char boundary.
        let after_scheme = cleaned.get(5..).unwrap_or("");
        let hier = after_scheme
            .split(['?', '#'])
            .next()
            .unwrap_or(after_scheme);
        if hier.contains('\\') {
            // WHATWG reads `\` as `/` in file URLs, the kernel as a name byte.
            return Err(invalid(uri, "contains a backslash"));
        }
        let raw_path = match hier.strip_prefix("//") {
            Some(rest) => rest.find('/').map_or("", |i| &rest[i..]),
            None => hier,
        };
        let lower = raw_path.to_ascii_lowercase();
        if lower.contains("%2f") || lower.contains("%5c") {
            return Err(invalid(uri, "contains an encoded path separator"));
        }
        if !raw_path.starts_with('/') {
            return Err(invalid(uri, "file URI path is not absolute"));
        }

        // WHATWG reading: `url` removes dot segments (also `%2e`) lexically.
        let url = Url::parse(uri).map_err(|e| invalid(uri, &e.to_string()))?;
        if url.scheme() != "file" {
            return Err(invalid(uri, "not a file URI"));
        }
        match url.host_str() {
            None | Some("") | Some("localhost") => {}
            Some(host) => return Err(invalid(uri, &format!("host {host:?} is not localhost"))),
        }
        let path = url
            .to_file_path()
            .map_err(|()| invalid(uri, "not a local file path"))?;
        let outside = || ConfineError::OutsideRoots {
            uri: uri.to_string(),
        };
        let normalized = normalize_lexically(&path);
        let lexical = resolve(&normalized).map_err(|_| outside())?;
        if !self.inside_any(&lexical) {
            return Err(outside());
        }

        // Kernel reading: decode as-is and let `..` follow symlinks.
        let decoded = decode_path(raw_path).ok_or_else(|| invalid(uri, "path is not UTF-8"))?;
        // The same components resolve to the same path: when the readings
        // agree (no dot segments; the common case), the walk above (one
        // lstat per component) already checked this one.
        if decoded != normalized {
            let physical = resolve(&decoded).map_err(|_| outside())?;
            if !self.inside_any(&physical) {
                return Err(outside());
            }
        }
        Ok(lexical)
    }

    /// Whether `real`, a path with no symlink left in it (where an opened
    /// file really is), lies in a root or a read-only root: the check of
    /// every read made on behalf of a server (`crate::read`).
    pub fn contains(&self, real: &Path) -> bool {
        real.is_absolute() && self.inside_any(real)
    }

    fn inside_any(&self, path: &Path) -> bool {
        self.roots
            .iter()
            .chain(&self.read_only_roots)
            .any(|root| path.starts_with(root))
    }

    fn writable_at(&self, path: &Path) -> bool {
        let deepest = |roots: &[PathBuf]| {
            roots
                .iter()
                .filter(|root| path.starts_with(root))
                .map(|root| root.components().count())
                .max()
        };
        match (deepest(&self.roots), deepest(&self.read_only_roots)) {
            (Some(writable), Some(read_only)) => writable > read_only,
            (Some(_), None) => true,
            (None, _) => false,
        }
    }
}

/// How a JSON value's position decides whether it must be a URI.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Slot {
    Plain,
    /// Under `uri` / `…Uri`: a string here must be a URI.
    UriValue,
    /// Under `changes`: an object here is keyed by URIs.
    UriKeys,
}

fn slot_for_key(key: &str) -> Slot {
    if key == "uri" || key.ends_with("Uri") {
        Slot::UriValue
    } else if key == "changes" {
        Slot::UriKeys
    } else {
        Slot::Plain
    }
}

fn invalid(uri: &str, why: &str) -> ConfineError {
    ConfineError::InvalidUri {
        uri: uri.to_string(),
        why: why.to_string(),
    }
}

/// What a WHATWG parser sees: leading/trailing C0 controls and spaces
/// trimmed, tabs and newlines removed anywhere. Matching it means
/// `" file:///etc"` or `"fi\tle:///etc"` cannot slip past as a non-URI.
fn clean(s: &str) -> Cow<'_, str> {
    let trimmed = s.trim_matches(|c: char| c <= ' ');
    if trimmed.contains(['\t', '\n', '\r']) {
        Cow::Owned(
            trimmed
                .chars()
                .filter(|c| !matches!(c, '\t' | '\n' | '\r'))
                .collect(),
        )
    } else {
        Cow::Borrowed(trimmed)
    }
}

/// Cheap pre-filter (no allocation) for rule 1: would a URL parser read
/// this string as a `file:` URI?
fn looks_like_file_uri(s: &str) -> bool {
    let mut chars = s
        .trim_start_matches(|c: char| c <= ' ')
        .chars()
        .filter(|c| !matches!(c, '\t' | '\n' | '\r'));
    "file:"
        .chars()
        .all(|want| chars.next().is_some_and(|c| c.eq_ignore_ascii_case(&want)))
}

/// RFC 3986 scheme: `ALPHA *( ALPHA / DIGIT / "+" / "-" / "." )` before `:`.
fn scheme_of(cleaned: &str) -> Option<&str> {
    let (scheme, _) = cleaned.split_once(':')?;
    let mut chars = scheme.chars();
    let first_ok = chars.next().is_some_and(|c| c.is_ascii_alphabetic());
    let rest_ok = chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    (first_ok && rest_ok).then_some(scheme)
}

/// Percent-decodes a raw URI path segment by segment, without touching
/// dot segments: the path an RFC 3986 parser would pass to `open()`.
fn decode_path(raw_path: &str) -> Option<PathBuf> {
    let mut bytes = Vec::with_capacity(raw_path.len());
    for (i, segment) in raw_path.split('/').enumerate() {
        if i > 0 {
            bytes.push(b'/');
        }
        bytes.extend(percent_decode_str(segment));
    }
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStringExt;
        Some(PathBuf::from(OsString::from_vec(bytes)))
    }
    #[cfg(not(unix))]
    {
        String::from_utf8(bytes).ok().map(PathBuf::from)
    }
}

/// Removes `.` and `..` without touching the filesystem (`..` at the root
/// stays at the root), as a WHATWG parser would.
fn normalize_lexically(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if matches!(out.components().next_back(), Some(Component::Normal(_))) {
                    out.pop();
                } else if !out.has_root() {
                    out.push(Component::ParentDir);
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// One step of an absolute path still to be resolved.
enum Step {
    Prefix(OsString),
    Root,
    Up,
    Name(OsString),
}

fn steps_of(path: &Path) -> impl DoubleEndedIterator<Item = Step> + '_ {
    path.components().filter_map(|component| match component {
        Component::Prefix(p) => Some(Step::Prefix(p.as_os_str().to_owned())),
        Component::RootDir => Some(Step::Root),
        Component::CurDir => None,
        Component::ParentDir => Some(Step::Up),
        Component::Normal(name) => Some(Step::Name(name.to_owned())),
    })
}

/// Why a path could not be resolved; any of these refuses the URI.
#[derive(Debug)]
enum ResolveError {
    NotAbsolute,
    TooManyLinks,
    Io,
}

/// `realpath` that tolerates missing components: the existing part is
/// resolved physically (symlinks followed, `..` taken after them, dangling
/// links followed to their target) and the missing rest is appended, so a
/// file that does not exist yet (a rename target) is still checked.
/// `fs::canonicalize` on the longest existing ancestor would get a dangling
/// link wrong: writing through it creates the file wherever it points.
fn resolve(path: &Path) -> Result<PathBuf, ResolveError> {
    if !path.is_absolute() {
        return Err(ResolveError::NotAbsolute);
    }
    let mut pending: Vec<Step> = steps_of(path).rev().collect();
    let mut resolved = PathBuf::new();
    let mut hops = 0;
    while let Some(step) = pending.pop() {
        match step {
            Step::Prefix(prefix) => resolved = PathBuf::from(prefix),
            Step::Root => {
                let mut base = PathBuf::new();
                if let Some(prefix @ Component::Prefix(_)) = resolved.components().next() {
                    base.push(prefix);
                }
                base.push(Component::RootDir);
                resolved = base;
            }
            Step::Up => {
                // `resolved` is symlink-free, so its lexical parent is its
                // physical parent; `pop` at the root stays there.
                resolved.pop();
            }
            Step::Name(name) => {
                let candidate = resolved.join(&name);
                match fs::symlink_metadata(&candidate) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        hops += 1;
                        if hops > MAX_SYMLINK_HOPS {
                            return Err(ResolveError::TooManyLinks);
                        }
                        let target = fs::read_link(&candidate).map_err(|_| ResolveError::Io)?;
                        // A relative target continues from the link's directory,
                        // which is `resolved` as it stands.
                        pending.extend(steps_of(&target).rev());
                    }
                    Ok(_) => resolved = candidate,
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::NotFound | io::ErrorKind::NotADirectory
                        ) =>
                    {
                        resolved = candidate;
                    }
                    Err(_) => return Err(ResolveError::Io),
                }
            }
        }
    }
    Ok(resolved)
}

/// Canonical form of a configured root: resolved when possible, otherwise
/// lexically normalised (relative roots are taken from the current directory).
fn canonical_root(root: &Path) -> PathBuf {
    let absolute = if root.is_absolute() {
        root.to_path_buf()
    } else {
        std::path::absolute(root).unwrap_or_else(|_| root.to_path_buf())
    };
    resolve(&absolute).unwrap_or_else(|_| normalize_lexically(&absolute))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;
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
        let base = fs::canonicalize(dir.path()).unwrap();
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

    fn file_uri(path: &Path) -> String {
        format!("file://{}", path.display())
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
        let params = json!({"textDocument": {"uri": file_uri(&path)}, "position": {"line": 0, "character": 3}});
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
        assert_outside(&f.conf, "file:///../../../../etc/passwd");
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
        let params =
            json!({"textDocument": {"uri": "untitled:Untitled-1"}, "scopeUri": "untitled:x"});
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
            &format!("file://otherhost{}", f.proj.join("src/main.rs").display()),
        );
        assert_invalid(&f.conf, "file://127.0.0.1/etc/passwd");
        let via_localhost = format!("file://localhost{}", f.proj.join("src/main.rs").display());
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
        let path = f.outside.join("secret.txt").display().to_string();
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
}
