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

use super::document::NamedDocument;
use super::tree::JsonTree;
use percent_encoding::percent_decode_str;
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
    OutsideRoots {
        /// The URI as sent.
        uri: String,
    },
    /// A URI field carries a scheme the configuration does not let through.
    #[error("URI scheme {scheme:?} is not allowed: {uri}")]
    SchemeNotAllowed {
        /// The URI as sent.
        uri: String,
        /// Its scheme, lowercase.
        scheme: String,
    },
    /// The string cannot be read as a URI safely (malformed, remote host,
    /// encoded separators or NULs that would change its meaning on decoding).
    #[error("invalid URI {uri:?}: {why}")]
    InvalidUri {
        /// The string as sent.
        uri: String,
        /// What is wrong with it.
        why: String,
    },
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
        self.check_uri_with(uri, false)
            .map(|checked| checked.map(|file| file.real))
    }

    /// [`Confinement::check_uri`], with what the check of a file URI found
    /// (and, with `want_metadata`, the file's metadata when the lookup can
    /// give it).
    fn check_uri_with(
        &self,
        uri: &str,
        want_metadata: bool,
    ) -> Result<Option<CheckedFile>, ConfineError> {
        let cleaned = clean(uri);
        let Some(scheme) = scheme_of(&cleaned) else {
            return Err(invalid(uri, "no URI scheme"));
        };
        let scheme = scheme.to_ascii_lowercase();
        if scheme == "file" {
            return self.check_file(uri, &cleaned, want_metadata).map(Some);
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
    #[cfg(test)]
    pub(crate) fn check_params<T: JsonTree>(&self, params: &T) -> Result<(), ConfineError> {
        self.check_params_naming(params, &mut [])
    }

    /// [`Confinement::check_params`], filling in `named` (the documents the
    /// request names) as their URIs are checked: the path each URI spells,
    /// and the metadata the check's lookup read on the way.
    pub(crate) fn check_params_naming<T: JsonTree>(
        &self,
        params: &T,
        named: &mut [NamedDocument],
    ) -> Result<(), ConfineError> {
        // Room for a position request's params without growing.
        let mut stack: Vec<(&T, Slot)> = Vec::with_capacity(16);
        stack.push((params, Slot::Plain));
        while let Some((value, slot)) = stack.pop() {
            if let Some(s) = value.as_str() {
                self.check_string(s, slot == Slot::UriValue, named)?;
            } else if let Some(items) = value.items() {
                stack.extend(items.iter().rev().map(|v| (v, Slot::Plain)));
            } else if let Some(members) = value.members() {
                for (key, _) in members {
                    self.check_string(key, slot == Slot::UriKeys, named)?;
                }
                if let Some(members) = value.members() {
                    stack.extend(members.rev().map(|(k, v)| (v, slot_for_key(k))));
                }
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

    fn check_string(
        &self,
        s: &str,
        must_be_uri: bool,
        named: &mut [NamedDocument],
    ) -> Result<(), ConfineError> {
        if !(must_be_uri || looks_like_file_uri(s)) {
            return Ok(());
        }
        match named.iter_mut().find(|d| d.uri == s) {
            // The same text, checked already.
            Some(document) if document.path.is_some() => {}
            Some(document) => {
                if let Some(checked) = self.check_uri_with(s, true)? {
                    document.path = Some(checked.spelled);
                    document.metadata = checked.metadata;
                }
            }
            None => {
                self.check_uri(s)?;
            }
        }
        Ok(())
    }

    fn check_file(
        &self,
        uri: &str,
        cleaned: &str,
        want_metadata: bool,
    ) -> Result<CheckedFile, ConfineError> {
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
        let (authority, raw_path) = match hier.strip_prefix("//") {
            Some(rest) => rest.find('/').map_or((rest, ""), |i| rest.split_at(i)),
            None => ("", hier),
        };
        // The host as written decides, before any parser reads it. WHATWG
        // drops the host of a file URL whose path starts with a drive letter
        // (`file://server/C:/x` is `file:///C:/x` to `url`), and the `url`
        // crate takes `file://./C:/x` as local: a server reading either
        // another way opens a share (`\\server\C:\x`, sending the user's
        // credentials to that host) or the device path `\\.\C:\x`.
        if !(authority.is_empty() || authority.eq_ignore_ascii_case("localhost")) {
            return Err(invalid(
                uri,
                &format!("host {authority:?} is not localhost"),
            ));
        }
        let lower = raw_path.to_ascii_lowercase();
        if lower.contains("%2f") || lower.contains("%5c") {
            return Err(invalid(uri, "contains an encoded path separator"));
        }
        if !raw_path.starts_with('/') {
            return Err(invalid(uri, "file URI path is not absolute"));
        }
        #[cfg(windows)]
        if let Some(why) = windows_name_trouble(raw_path) {
            return Err(invalid(uri, why));
        }

        // WHATWG reading: `url` removes dot segments (also `%2e`) lexically.
        let url = Url::parse(uri).map_err(|e| invalid(uri, &e.to_string()))?;
        if url.scheme() != "file" {
            return Err(invalid(uri, "not a file URI"));
        }
        // The parser's reading of the host. The written check above already
        // refuses every host but localhost, so this cannot fire today; it is
        // kept so that loosening that check can never let a host through.
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
        let (lexical, metadata) =
            resolve_with(&normalized, want_metadata).map_err(|_| outside())?;
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
            // Two readings: the metadata is of the lexical one only.
            return Ok(CheckedFile {
                real: lexical,
                spelled: path,
                metadata: None,
            });
        }
        Ok(CheckedFile {
            real: lexical,
            spelled: path,
            metadata,
        })
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

/// What the check of one allowed file URI found.
struct CheckedFile {
    /// Where the file really is (symlink-free): what is inside a root.
    real: PathBuf,
    /// The path as the URI spells it (`Url::to_file_path`).
    spelled: PathBuf,
    /// The file's metadata from the check's own lookup, when it had one.
    metadata: Option<std::fs::Metadata>,
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
        // `/C:/x` is `C:/x` to the Windows API, as to WHATWG parsers.
        let text = String::from_utf8(bytes).ok()?;
        let drive = text.as_bytes();
        let path = if drive.len() >= 3
            && drive[0] == b'/'
            && drive[1].is_ascii_alphabetic()
            && drive[2] == b':'
        {
            &text[1..]
        } else {
            &text[..]
        };
        Some(PathBuf::from(path))
    }
}

/// Why the Windows API would not open the file a URI's path names, or
/// would open another one: the names it rewrites or reads specially. A
/// component with a trailing dot or space loses it (`.. ` is `..`, which
/// climbs out of the root that `..␠` seemed to stay in); `CON`, `NUL`, `COM1`
/// and their like (with any extension) are devices in every directory; a
/// `:` after the drive names a stream of another file; `<>"|?*` and control
/// characters are no names at all. Checked on the decoded path, before
/// either reading, so nothing outside a drive (a network share) is ever
/// looked up.
#[cfg(windows)]
fn windows_name_trouble(raw_path: &str) -> Option<&'static str> {
    /// DOS device names, reserved in every directory (compared upper case).
    const DEVICES: &[&str] = &[
        "CON",
        "PRN",
        "AUX",
        "NUL",
        "CONIN$",
        "CONOUT$",
        "CLOCK$",
        "COM0",
        "COM1",
        "COM2",
        "COM3",
        "COM4",
        "COM5",
        "COM6",
        "COM7",
        "COM8",
        "COM9",
        "COM\u{b9}",
        "COM\u{b2}",
        "COM\u{b3}",
        "LPT0",
        "LPT1",
        "LPT2",
        "LPT3",
        "LPT4",
        "LPT5",
        "LPT6",
        "LPT7",
        "LPT8",
        "LPT9",
        "LPT\u{b9}",
        "LPT\u{b2}",
        "LPT\u{b3}",
    ];
    let decoded = decode_path(raw_path)?;
    let text = decoded.to_str()?;
    // A path on a drive, nothing else: `//server/share` would send the
    // user's credentials to that server at the first look-up, and `/x`
    // is relative to whichever drive is current.
    let drive = text.as_bytes();
    if !(drive.len() >= 3 && drive[0].is_ascii_alphabetic() && drive[1] == b':' && drive[2] == b'/')
    {
        return Some("the path does not start with a drive letter (C:/…)");
    }
    for (i, name) in text.split(['/', '\\']).enumerate() {
        if name.is_empty() || name == "." || name == ".." {
            continue;
        }
        // The drive (`C:`) is the first name after `/C:/` was made `C:/`.
        if i == 0 && name.len() == 2 && name.ends_with(':') {
            continue;
        }
        if name.ends_with(['.', ' ']) {
            return Some("a file name ends with a dot or a space (Windows drops it)");
        }
        if name.contains(':') {
            return Some("a file name holds a colon (a stream of another file on Windows)");
        }
        if name
            .chars()
            .any(|c| c < ' ' || matches!(c, '<' | '>' | '"' | '|' | '?' | '*'))
        {
            return Some("a file name holds a character Windows does not allow");
        }
        let stem = name.split('.').next().unwrap_or(name).trim_end_matches(' ');
        if DEVICES
            .iter()
            .any(|device| stem.eq_ignore_ascii_case(device))
        {
            return Some("a file name is a Windows device (CON, NUL, COM1, …)");
        }
    }
    None
}

/// Removes `.` and `..` without touching the filesystem (`..` at the root
/// stays at the root), as a WHATWG parser would.
fn normalize_lexically(path: &Path) -> PathBuf {
    let mut out = PathBuf::with_capacity(path.as_os_str().len());
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
    resolve_with(path, false).map(|(real, _)| real)
}

/// [`resolve`], and with `want_metadata` the metadata of what the path
/// names when the kernel's lookup found it with no symlink on the way (read
/// from that lookup's own descriptor; `None` on every other way through).
fn resolve_with(
    path: &Path,
    want_metadata: bool,
) -> Result<(PathBuf, Option<std::fs::Metadata>), ResolveError> {
    if !path.is_absolute() {
        return Err(ResolveError::NotAbsolute);
    }
    // The kernel's lookup, a system call or two at any depth, where its
    // answer is the walk's: a path that exists with no symlink on the way
    // (the common case) resolves to itself with its `..` taken lexically; one
    // with symlinks to where the kernel lands. What it cannot resolve
    // (missing, dangling, a loop, a file used as a directory) is walked.
    use crate::sys::PlainLookup;
    let (lookup, metadata) = if want_metadata {
        crate::sys::lookup_without_symlinks_with_metadata(path)
    } else {
        (crate::sys::lookup_without_symlinks(path), None)
    };
    match lookup {
        PlainLookup::Exists => {
            // Most paths come here already normalised (no `.` or `..`).
            let plain = path
                .components()
                .all(|c| !matches!(c, Component::CurDir | Component::ParentDir));
            let real = if plain {
                path.to_path_buf()
            } else {
                normalize_lexically(path)
            };
            return Ok((real, metadata));
        }
        PlainLookup::Missing => return resolve_walk(path).map(|real| (real, None)),
        PlainLookup::Unknown => {}
    }
    if let Ok(real) = crate::sys::real_path(path) {
        return Ok((real, None));
    }
    resolve_walk(path).map(|real| (real, None))
}

/// [`resolve`] one component at a time (one `lstat` each).
fn resolve_walk(path: &Path) -> Result<PathBuf, ResolveError> {
    let mut pending: Vec<Step> = steps_of(path).rev().collect();
    let mut resolved = PathBuf::new();
    let mut hops = 0;
    while let Some(step) = pending.pop() {
        match step {
            Step::Prefix(prefix) => resolved = plain_prefix(&prefix).ok_or(ResolveError::Io)?,
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
    Ok(stored_names(resolved))
}

/// A path prefix as the roots spell it: a link's target may be verbatim
/// (`\\?\C:`, `\\?\UNC\server\share`), which is the same place as `C:` or
/// `\\server\share`. Any other verbatim or device prefix (`\\?\Volume{…}`,
/// `\\.\pipe`) is not resolved: the URI is refused.
fn plain_prefix(prefix: &std::ffi::OsStr) -> Option<PathBuf> {
    let Some(Component::Prefix(parsed)) = Path::new(prefix).components().next() else {
        return Some(PathBuf::from(prefix));
    };
    match parsed.kind() {
        std::path::Prefix::VerbatimDisk(drive) | std::path::Prefix::Disk(drive) => {
            Some(PathBuf::from(format!("{}:", char::from(drive))))
        }
        std::path::Prefix::VerbatimUNC(server, share) | std::path::Prefix::UNC(server, share) => {
            let mut unc = OsString::from(r"\\");
            unc.push(server);
            unc.push(r"\");
            unc.push(share);
            Some(PathBuf::from(unc))
        }
        std::path::Prefix::Verbatim(_) | std::path::Prefix::DeviceNS(_) => None,
    }
}

/// The walk's answer with its existing part named as the file system
/// stores it, where names are not compared byte for byte by the file
/// system (macOS, Windows: case, 8.3 short names): the deepest existing
/// ancestor (symlink-free: the walk resolved every link in it) is asked of
/// the kernel, and the missing rest appended. Roots are resolved the same
/// way, so containment stays a plain prefix test with no case folding
/// (which would accept a sibling that differs only in case on a volume
/// that tells them apart). Linux compares names byte for byte: unchanged.
fn stored_names(resolved: PathBuf) -> PathBuf {
    if cfg!(target_os = "linux") {
        return resolved;
    }
    let mut existing = resolved.as_path();
    let mut missing = Vec::new();
    loop {
        if let Ok(real) = crate::sys::real_path(existing) {
            let mut out = real;
            out.extend(missing.iter().rev());
            return out;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                missing.push(name.to_owned());
                existing = parent;
            }
            _ => return resolved,
        }
    }
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
mod tests;
