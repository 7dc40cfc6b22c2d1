//! The Windows side of the URI fuzzing: a tree on a drive with symlinks in
//! and out of the root and a directory with an 8.3 short name, adversarial
//! `file:` URIs in Windows spellings around it (`C:\`, `c:`, `%5C`,
//! `\\?\`, `\\.\`, `\\server\share`, `CON`, `NUL`, streams, trailing dots,
//! mixed case), and the oracle that says whether an accepted URI names a
//! place inside the root.
//!
//! The oracle reads a URI as the Windows API would open it, with no code
//! shared with `gate::confine`: RFC 8089's `file:` forms (an empty or
//! `localhost` authority, or a drive letter where WHATWG puts one), the
//! percent-decoded path with `/` and `\` both separators, then
//! `GetFullPathNameW` (dot segments, as every Win32 open does; names ending
//! in a dot or a space, which Win32 rewrites, are never vouched for) and the longest existing prefix canonicalized (links
//! and short names resolved), compared without regard to case. Device names
//! and streams never name a place in the root.

use std::os::windows::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use proptest::prelude::*;

pub struct Tree {
    pub base: PathBuf,
    pub root: PathBuf,
    /// The short (8.3) name of `root\LongDirectoryName`, when the file
    /// system gives one.
    pub short: Option<String>,
    /// Whether the links can be followed (not under wine 8.0).
    pub links: bool,
}

/// `\\?\C:\x` → `C:\x`: the session root is given as users write it.
fn plain(path: PathBuf) -> PathBuf {
    let text = path.display().to_string();
    match text.strip_prefix(r"\\?\") {
        Some(rest) if !rest.starts_with("UNC") => PathBuf::from(rest),
        _ => path,
    }
}

fn wide(path: &Path) -> Vec<u16> {
    path.as_os_str().encode_wide().chain([0]).collect()
}

/// A Win32 call that fills a UTF-16 buffer and returns its length, or the
/// length it needs.
fn with_buffer(call: impl Fn(*mut u16, u32) -> u32) -> Option<PathBuf> {
    let mut buffer = vec![0u16; 512];
    loop {
        let n = call(buffer.as_mut_ptr(), buffer.len() as u32) as usize;
        if n == 0 {
            return None;
        }
        if n < buffer.len() {
            return Some(PathBuf::from(std::ffi::OsString::from_wide(&buffer[..n])));
        }
        buffer.resize(n + 1, 0);
    }
}

fn full_path_name(path: &Path) -> Option<PathBuf> {
    let name = wide(path);
    with_buffer(|buffer, len| unsafe {
        windows_sys::Win32::Storage::FileSystem::GetFullPathNameW(
            name.as_ptr(),
            len,
            buffer,
            std::ptr::null_mut(),
        )
    })
}

fn short_path_name(path: &Path) -> Option<PathBuf> {
    let name = wide(path);
    with_buffer(|buffer, len| unsafe {
        windows_sys::Win32::Storage::FileSystem::GetShortPathNameW(name.as_ptr(), buffer, len)
    })
}

/// A tree under the temporary directory, made once per test process:
/// `root` (the session root) with `sub\file.rs` and `LongDirectoryName\`,
/// links inside (`link_in` → `sub`) and out (`link_out` → `outside`,
/// `sub\up.rs` → `..\..\outside\secret.rs`); a sibling `root-evil` and an
/// `outside` with `secret.rs`.
pub fn tree() -> &'static Tree {
    static TREE: std::sync::OnceLock<Tree> = std::sync::OnceLock::new();
    TREE.get_or_init(|| {
        let base = std::env::temp_dir().join("acp-lsp-fuzz-tree");
        let root = base.join("root");
        std::fs::create_dir_all(root.join("sub")).expect("mkdir");
        std::fs::create_dir_all(root.join("LongDirectoryName")).expect("mkdir");
        std::fs::write(root.join("sub/file.rs"), "fn main() {}\n").expect("write");
        std::fs::create_dir_all(base.join("outside")).expect("mkdir");
        std::fs::write(base.join("outside/secret.rs"), "secret\n").expect("write");
        std::fs::create_dir_all(base.join("root-evil")).expect("mkdir");
        use std::os::windows::fs::{symlink_dir, symlink_file};
        let absent = |link: &Path| std::fs::symlink_metadata(link).is_err();
        let (link_out, link_in, up) = (
            root.join("link_out"),
            root.join("link_in"),
            root.join(r"sub\up.rs"),
        );
        if absent(&link_out) {
            symlink_dir(base.join("outside"), &link_out).expect("a directory symlink");
        }
        if absent(&link_in) {
            symlink_dir(root.join("sub"), &link_in).expect("a directory symlink");
        }
        if absent(&up) {
            symlink_file(r"..\..\outside\secret.rs", &up).expect("a file symlink");
        }
        // Wine 8.0 makes the links but cannot follow them (every open
        // through one is "not found"): there the link cases are dangling
        // links, which must be refused or stay inside just the same.
        let links = std::fs::metadata(&link_in).is_ok();
        if !links {
            eprintln!(
                "symlinks cannot be followed here (wine?): the link cases are dangling links"
            );
        }
        let base = plain(base.canonicalize().expect("canonical"));
        let root = base.join("root");
        let short = short_path_name(&root.join("LongDirectoryName"))
            .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
            .filter(|n| n != "LongDirectoryName");
        Tree {
            base,
            root,
            short,
            links,
        }
    })
}

/// `path` as the path of a `file:///C:/…` URI.
fn slashed(path: &Path) -> String {
    path.display().to_string().replace('\\', "/")
}

/// `file:///` and the path of `relative` under `root`.
pub fn file_uri_in(root: &Path, relative: &str) -> String {
    format!("file:///{}/{relative}", slashed(root))
}

/// Adversarial file URIs around `tree`, in Windows spellings.
pub fn uri(tree: &'static Tree) -> impl Strategy<Value = String> {
    let root = slashed(&tree.root);
    let base = slashed(&tree.base);
    let other_drive = if root.starts_with(['D', 'd']) {
        "E"
    } else {
        "D"
    };
    let starts = prop::sample::select(vec![
        format!("/{root}"),
        format!("/{root}"),
        format!("/{root}"),
        // The drive letter lower case, the whole path upper case: the same
        // place on a case-insensitive file system.
        format!("/{}{}", root[..1].to_ascii_lowercase(), &root[1..]),
        format!("/{}", root.to_uppercase()),
        // As WHATWG reads `file://C:/…`: the drive where the host would be.
        root.clone(),
        format!("/{base}"),
        format!("/{base}/root-evil"),
        format!("/{}", root.replace('/', "%5C")),
        format!("/{}", root.replacen(':', "%3A", 1)),
        format!("/{}", root.replacen(':', "|", 1)),
        format!("/%5C%5C%3F%5C{}", root.replace('/', "%5C")),
        format!("/%5C%5C.%5C{}", root.replace('/', "%5C")),
        format!("//?/{root}"),
        format!("//./{root}"),
        "//server/share".to_string(),
        "/%5C%5Cserver%5Cshare".to_string(),
        format!("/{other_drive}:{}", &root[2..]),
        "/C:/Windows".to_string(),
        root[2..].to_string(),
        String::new(),
    ]);
    let prefixes = prop::sample::select(vec![
        "file://",
        "file://",
        "file://",
        "file:",
        "FILE://",
        "file://localhost",
        "file://LocalHost",
        "file://evil.example",
        "file://server",
        " file://",
        "file:/",
        "file:////",
    ]);
    let mut names: Vec<String> = [
        "sub",
        "SUB",
        "file.rs",
        "File.RS",
        "..",
        ".",
        "%2e%2e",
        "..%5C..",
        "%5C",
        "link_out",
        "link_in",
        "up.rs",
        "secret.rs",
        "root",
        "root-evil",
        "outside",
        "new.rs",
        "",
        "CON",
        "nul",
        "con.txt",
        "COM1",
        "LPT9.rs",
        "CONIN$",
        "file.rs::$DATA",
        "file.rs:x",
        "file.rs.",
        "file.rs%20",
        "..%20",
        "...",
        "LongDirectoryName",
        "LONGDI~1",
        "%00",
        "a%20b",
        "é",
        "%C3%A9",
        "a%3Cb",
        "%2A",
    ]
    .map(str::to_string)
    .to_vec();
    names.extend(tree.short.clone());
    let parts = prop::collection::vec(prop::sample::select(names), 0..7);
    let tails = prop::sample::select(vec!["", "", "", "?x=..", "#..", "/", "%"]);
    (prefixes, starts, parts, tails).prop_map(|(prefix, start, parts, tail)| {
        let mut text = format!("{prefix}{start}");
        for part in parts {
            text.push('/');
            text.push_str(&part);
        }
        text.push_str(tail);
        text
    })
}

/// Names the Windows API opens as devices in every directory, whatever
/// their extension (compared upper case).
fn is_device(name: &str) -> bool {
    let stem = name
        .split('.')
        .next()
        .unwrap_or(name)
        .trim_end_matches(' ')
        .to_uppercase();
    let numbered = |prefix: &str| {
        stem.strip_prefix(prefix).is_some_and(|n| {
            n.chars().count() == 1 && n.chars().all(|c| c.is_ascii_digit() || "¹²³".contains(c))
        })
    };
    matches!(
        stem.as_str(),
        "CON" | "PRN" | "AUX" | "NUL" | "CONIN$" | "CONOUT$" | "CLOCK$"
    ) || numbered("COM")
        || numbered("LPT")
}

/// The oracle: whether a URI the gate accepted really names a place inside
/// `root` when the Windows API opens it.
pub fn inside(uri: &str, root: &Path) -> Result<(), String> {
    let text = uri.trim_start_matches(|c: char| c.is_whitespace() || c.is_control());
    let rest = text
        .get(..5)
        .filter(|s| s.eq_ignore_ascii_case("file:"))
        .map(|_| &text[5..])
        .ok_or("not a file URI")?;
    let path = match rest.strip_prefix("//") {
        Some(after) => {
            let end = after.find('/').unwrap_or(after.len());
            let host = &after[..end];
            let drive = host.len() == 2
                && host.as_bytes()[0].is_ascii_alphabetic()
                && matches!(host.as_bytes()[1], b':' | b'|');
            if drive {
                after
            } else if host.is_empty() || host.eq_ignore_ascii_case("localhost") {
                &after[end..]
            } else {
                return Err(format!("host {host:?} accepted"));
            }
        }
        None => rest,
    };
    let path = &path[..path.find(['?', '#']).unwrap_or(path.len())];
    let decoded: Vec<u8> = percent_encoding::percent_decode_str(path).collect();
    if decoded.contains(&0) {
        return Err("a NUL accepted".into());
    }
    let decoded = String::from_utf8(decoded).map_err(|_| "a path that is not UTF-8 accepted")?;
    let windows = decoded.replace('/', "\\");
    let windows = windows.strip_prefix('\\').unwrap_or(&windows);
    // WHATWG's legacy drive spelling: `C|` is `C:`.
    let windows = match windows.as_bytes() {
        [drive, b'|', ..] if drive.is_ascii_alphabetic() => {
            format!("{}:{}", *drive as char, &windows[2..])
        }
        _ => windows.to_string(),
    };
    let windows = windows.as_str();
    let bytes = windows.as_bytes();
    let on_a_drive =
        bytes.len() >= 3 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':' && bytes[2] == b'\\';
    if !on_a_drive {
        return Err(format!("{windows:?} is not a path on a drive"));
    }
    for name in windows[3..].split('\\') {
        if is_device(name) {
            return Err(format!("the device {name:?} accepted"));
        }
        if name.contains(':') {
            return Err(format!("a stream {name:?} accepted"));
        }
        // Win32 drops a name's trailing dots and spaces (`..␠` may be
        // `..`); wine's GetFullPathNameW does not always, so the oracle
        // takes no side: such a name never names a place it can vouch for.
        if name != "." && name != ".." && name.ends_with(['.', ' ']) {
            return Err(format!("the name {name:?} accepted (Windows rewrites it)"));
        }
    }
    let full = full_path_name(Path::new(windows)).ok_or("GetFullPathNameW failed")?;
    let resolved = resolve_links(&full);
    let (resolved, root) = (lower(&resolved), lower(root));
    if !resolved.starts_with(&root) {
        return Err(format!("{} is outside", resolved.display()));
    }
    Ok(())
}

fn lower(path: &Path) -> PathBuf {
    PathBuf::from(path.display().to_string().to_lowercase())
}

/// The longest existing prefix of a full path canonicalized (links and
/// short names resolved), the rest appended.
fn resolve_links(path: &Path) -> PathBuf {
    let components: Vec<_> = path.components().collect();
    for cut in (1..=components.len()).rev() {
        let prefix: PathBuf = components[..cut].iter().collect();
        if let Ok(real) = prefix.canonicalize() {
            let rest: PathBuf = components[cut..].iter().collect();
            return plain(real).join(rest);
        }
    }
    path.to_path_buf()
}

#[test]
fn the_oracle_refuses_what_it_should() {
    let tree = tree();
    let root = slashed(&tree.root);
    assert!(inside(&format!("file:///{root}/sub/file.rs"), &tree.root).is_ok());
    assert!(inside(&format!("file:///{}/sub", root.to_uppercase()), &tree.root).is_ok());
    if tree.links {
        for bad in [
            format!("file:///{root}/link_out/secret.rs"),
            format!("file:///{root}/sub/up.rs"),
        ] {
            assert!(inside(&bad, &tree.root).is_err(), "{bad}");
        }
    }
    for bad in [
        format!("file:///{root}/link_in/../../outside"),
        format!("file:///{root}/../root-evil"),
        format!("file:///{root}-evil"),
        format!("file:///{root}/sub%5C..%5C..%5Coutside"),
        format!("file:///{root}/CON"),
        format!("file:///{root}/sub/nul.txt"),
        format!("file:///{root}/sub/file.rs:stream"),
        format!("file:///{root}/sub/..%20/..%20/outside"),
        format!("file://evil/{root}"),
        format!("file://./{root}/sub/file.rs"),
        "file://server/share/x".to_string(),
        "file:///C:/Windows/win.ini".to_string(),
    ] {
        assert!(inside(&bad, &tree.root).is_err(), "{bad}");
    }
}
