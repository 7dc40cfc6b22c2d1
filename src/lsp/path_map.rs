//! `path_map`: the translation between the local roots a session names and
//! the roots a remote language server sees. A byte-level rewrite of the JSON
//! strings of one message that start with a mapped root (as a `file:` URI or
//! as a plain absolute path); every other byte of the message is kept.
//!
//! This is the one place acp-lsp reads (and changes) what a server answers:
//! results, notifications and the server's own requests of a mapped server
//! pass through [`PathMap::to_local`]. A string outside every mapped root is
//! left untouched.

use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::path::{Path, PathBuf};

/// One `{ local = "...", remote = "..." }` entry of a server's `path_map`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathMapping {
    pub local: PathBuf,
    pub remote: PathBuf,
}

impl PathMapping {
    /// Both roots absolute, neither `/` (which would map every path).
    pub fn validate(&self) -> Result<(), String> {
        for (key, path) in [("local", &self.local), ("remote", &self.remote)] {
            if !path.is_absolute() {
                return Err(format!(
                    "{key} must be an absolute path: {}",
                    path.display()
                ));
            }
            if path.parent().is_none() {
                return Err(format!("{key} must not be the file-system root"));
            }
            if path.to_str().is_none() {
                return Err(format!("{key} must be valid UTF-8: {}", path.display()));
            }
        }
        Ok(())
    }
}

/// One prefix replacement: `from` and what follows it at a boundary.
#[derive(Debug, Clone)]
struct Rule {
    from: String,
    to: String,
    /// `file:` URIs may go on with a query or fragment; paths only with `/`.
    uri: bool,
}

/// The compiled mappings of one server, both directions.
#[derive(Debug, Clone, Default)]
pub struct PathMap {
    to_remote: Vec<Rule>,
    to_local: Vec<Rule>,
}

impl PathMap {
    pub fn new(mappings: &[PathMapping]) -> PathMap {
        let mut map = PathMap::default();
        for m in mappings {
            let (Some(local), Some(remote)) = (root_text(&m.local), root_text(&m.remote)) else {
                continue;
            };
            let (Some(local_uri), Some(remote_uri)) = (root_uri(&m.local), root_uri(&m.remote))
            else {
                continue;
            };
            map.to_remote.push(Rule {
                from: local_uri.clone(),
                to: remote_uri.clone(),
                uri: true,
            });
            map.to_remote.push(Rule {
                from: local.clone(),
                to: remote.clone(),
                uri: false,
            });
            map.to_local.push(Rule {
                from: remote_uri,
                to: local_uri,
                uri: true,
            });
            map.to_local.push(Rule {
                from: remote,
                to: local,
                uri: false,
            });
        }
        // The longest root wins where roots nest.
        map.to_remote
            .sort_by_key(|r| std::cmp::Reverse(r.from.len()));
        map.to_local
            .sort_by_key(|r| std::cmp::Reverse(r.from.len()));
        map
    }

    pub fn is_empty(&self) -> bool {
        self.to_remote.is_empty()
    }

    /// A message toward the server, with local roots replaced by remote ones.
    pub fn to_remote<'a>(&self, message: &'a [u8]) -> Cow<'a, [u8]> {
        rewrite(message, &self.to_remote)
    }

    /// A message from the server, with remote roots replaced by local ones.
    pub fn to_local<'a>(&self, message: &'a [u8]) -> Cow<'a, [u8]> {
        rewrite(message, &self.to_local)
    }
}

fn root_text(path: &Path) -> Option<String> {
    let text = path.to_str()?;
    Some(text.trim_end_matches(std::path::is_separator).to_string())
}

/// The root as a `file:` URI without its trailing slash, encoded as
/// acp-lsp encodes every URI it sends (the `url` crate).
fn root_uri(path: &Path) -> Option<String> {
    let url = url::Url::from_file_path(path).ok()?;
    Some(url.as_str().trim_end_matches('/').to_string())
}

/// `value` with the first rule whose root it starts with applied, if any.
fn map_value(value: &str, rules: &[Rule]) -> Option<String> {
    rules.iter().find_map(|rule| {
        let rest = value.strip_prefix(rule.from.as_str())?;
        let at_boundary = match rest.as_bytes().first() {
            None | Some(b'/') => true,
            Some(b'?' | b'#') => rule.uri,
            // A Windows path goes on with either separator (`C:\p\a.py`).
            Some(b'\\') => cfg!(windows) && !rule.uri,
            Some(_) => false,
        };
        at_boundary.then(|| format!("{}{rest}", rule.to))
    })
}

/// Rewrites every JSON string of `message` (member names too: a
/// `WorkspaceEdit`'s `changes` is keyed by URI) that a rule maps, except
/// the value of a `text` member: a document's contents (`didOpen`,
/// `didChange`) go as they are on disk, even when they begin with a path.
/// A string
/// with escapes is decoded to be compared and re-encoded if mapped; the
/// bytes between strings are copied. Text that is not valid JSON is
/// returned as it came from the point where it stops making sense.
fn rewrite<'a>(message: &'a [u8], rules: &[Rule]) -> Cow<'a, [u8]> {
    if rules.is_empty() {
        return Cow::Borrowed(message);
    }
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0;
    let mut at = 0;
    // Just after the `:` of a `"text"` member name, until the next string.
    let mut text_value_from: Option<usize> = None;
    while let Some(offset) = memchr::memchr(b'"', &message[at..]) {
        let start = at + offset;
        // The closing quote: the first `"` not taken by a backslash escape.
        let mut scan = start + 1;
        let mut escaped = false;
        let end = loop {
            match memchr::memchr2(b'"', b'\\', &message[scan..]) {
                None => return finish(out, message, copied),
                Some(i) if message[scan + i] == b'\\' => {
                    escaped = true;
                    scan += i + 2;
                    if scan > message.len() {
                        return finish(out, message, copied);
                    }
                }
                Some(i) => break scan + i,
            }
        };
        at = end + 1;
        let token = &message[start..=end];
        let content = &token[1..token.len() - 1];
        let is_text_value = text_value_from
            .take()
            .is_some_and(|from| message[from..start].iter().all(u8::is_ascii_whitespace));
        let after = end
            + 1
            + message[end + 1..]
                .iter()
                .take_while(|b| b.is_ascii_whitespace())
                .count();
        if content == b"text" && message.get(after) == Some(&b':') {
            text_value_from = Some(after + 1);
        }
        if is_text_value {
            continue;
        }
        // Only strings that can start with a root (`f…`, `/…`, or an
        // escape; on Windows also a drive letter, `C:\…`).
        let candidate = match content.first() {
            Some(b'f' | b'/' | b'\\') => true,
            Some(first) => cfg!(windows) && first.is_ascii_alphabetic(),
            None => false,
        };
        if !candidate {
            continue;
        }
        let value: Cow<'_, str> = if escaped {
            match serde_json::from_slice::<String>(token) {
                Ok(v) => Cow::Owned(v),
                Err(_) => continue,
            }
        } else {
            match std::str::from_utf8(content) {
                Ok(v) => Cow::Borrowed(v),
                Err(_) => continue,
            }
        };
        let Some(mapped) = map_value(&value, rules) else {
            continue;
        };
        let Ok(encoded) = serde_json::to_string(&mapped) else {
            continue;
        };
        let buffer = out.get_or_insert_with(|| Vec::with_capacity(message.len() + 64));
        buffer.extend_from_slice(&message[copied..start]);
        buffer.extend_from_slice(encoded.as_bytes());
        copied = end + 1;
    }
    finish(out, message, copied)
}

fn finish<'a>(out: Option<Vec<u8>>, message: &'a [u8], copied: usize) -> Cow<'a, [u8]> {
    match out {
        None => Cow::Borrowed(message),
        Some(mut buffer) => {
            buffer.extend_from_slice(&message[copied..]);
            Cow::Owned(buffer)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_paths::os_pathbuf;

    /// A fixture message for this OS: itself on Unix; on Windows with its
    /// roots on drive C, in URIs (`file:///srv/p` → `file:///C:/srv/p`, also
    /// with `\/` escapes) and in strings that are paths (`"/srv/p/x"` →
    /// `"C:\\srv\\p\\x"`, JSON-escaped), so one expectation fits both.
    fn os(text: &str) -> String {
        if !cfg!(windows) {
            return text.to_string();
        }
        let text = text
            .replace("file:///", "file:///C:/")
            .replace(r"file:\/\/\/", r"file:\/\/\/C:\/");
        let mut out = String::new();
        let mut rest = text.as_str();
        while let Some(i) = rest.find("\"/") {
            out.push_str(&rest[..i]);
            out.push_str("\"C:");
            rest = &rest[i + 1..];
            let end = rest.find('"').unwrap_or(rest.len());
            out.push_str(&rest[..end].replace('/', r"\\"));
            rest = &rest[end..];
        }
        out.push_str(rest);
        out
    }

    fn mapping(local: &str, remote: &str) -> PathMapping {
        PathMapping {
            local: os_pathbuf(local),
            remote: os_pathbuf(remote),
        }
    }

    fn map() -> PathMap {
        PathMap::new(&[mapping("/home/me/proj", "/srv/proj")])
    }

    fn local(text: &str) -> String {
        String::from_utf8(map().to_local(os(text).as_bytes()).into_owned()).unwrap()
    }

    fn remote(text: &str) -> String {
        String::from_utf8(map().to_remote(os(text).as_bytes()).into_owned()).unwrap()
    }

    #[test]
    fn maps_uris_and_paths_both_ways_keeping_other_bytes() {
        let from_server = r#"{"jsonrpc":"2.0","id":3,"result":[{"uri":"file:///srv/proj/a.py","range":{"start":{"line":0,"character":4}}}, {"uri" : "file:///srv/other/b.py"}]}"#;
        assert_eq!(
            local(from_server),
            os(
                r#"{"jsonrpc":"2.0","id":3,"result":[{"uri":"file:///home/me/proj/a.py","range":{"start":{"line":0,"character":4}}}, {"uri" : "file:///srv/other/b.py"}]}"#
            )
        );
        let to_server = r#"{"rootUri":"file:///home/me/proj","rootPath":"/home/me/proj","x":"/home/me/project2"}"#;
        assert_eq!(
            remote(to_server),
            os(r#"{"rootUri":"file:///srv/proj","rootPath":"/srv/proj","x":"/home/me/project2"}"#)
        );
    }

    #[test]
    fn document_text_is_never_rewritten() {
        let open = r#"{"textDocument":{"uri":"file:///home/me/proj/paths.txt","text":"/home/me/proj/listed\n"}}"#;
        assert_eq!(
            remote(open),
            os(
                r#"{"textDocument":{"uri":"file:///srv/proj/paths.txt","text":"/home/me/proj/listed\n"}}"#
            )
        );
        let change =
            r#"{"contentChanges":[{"text" :  "file:///home/me/proj"}],"o":"/home/me/proj"}"#;
        assert_eq!(
            remote(change),
            os(r#"{"contentChanges":[{"text" :  "file:///home/me/proj"}],"o":"/srv/proj"}"#)
        );
        // Only the value right after `"text":` is kept.
        assert_eq!(
            remote(r#"{"text":1,"b":"/home/me/proj","text2":"/home/me/proj"}"#),
            os(r#"{"text":1,"b":"/srv/proj","text2":"/srv/proj"}"#)
        );
    }

    #[test]
    fn member_names_are_mapped_too() {
        let edit = r#"{"changes":{"file:///srv/proj/a.py":[{"newText":"file:///srv/proj"}]}}"#;
        assert_eq!(
            local(edit),
            os(r#"{"changes":{"file:///home/me/proj/a.py":[{"newText":"file:///home/me/proj"}]}}"#)
        );
    }

    #[test]
    fn escaped_strings_are_decoded_compared_and_reencoded() {
        // `\/` is a legal escape of `/`; `\"` inside must survive.
        let text = r#"{"uri":"file:\/\/\/srv\/proj\/q\"x.py","s":"a\"b","t":"\\srv\\proj"}"#;
        let mapped = local(text);
        assert_eq!(
            mapped,
            os(r#"{"uri":"file:///home/me/proj/q\"x.py","s":"a\"b","t":"\\srv\\proj"}"#)
        );
        let value: serde_json::Value = serde_json::from_str(&mapped).unwrap();
        assert_eq!(value["uri"], os("file:///home/me/proj/q\"x.py"));
    }

    #[test]
    fn unmapped_messages_are_borrowed_not_copied() {
        let text = os(r#"{"result":null,"m":"file:///srv/projects/x","n":"/srv/proj2"}"#);
        let text = text.as_bytes();
        assert!(matches!(map().to_local(text), Cow::Borrowed(_)));
        assert!(matches!(
            PathMap::default().to_local(text),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn percent_encoded_roots_and_uri_suffixes() {
        let map = PathMap::new(&[mapping("/home/me/my proj", "/srv/p")]);
        let text = os(r#"["file:///home/me/my%20proj/a b.py","file:///home/me/my%20proj#L1"]"#);
        let out = map.to_remote(text.as_bytes());
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            os(r#"["file:///srv/p/a b.py","file:///srv/p#L1"]"#)
        );
    }

    #[test]
    fn the_longest_root_wins() {
        let map = PathMap::new(&[mapping("/l", "/r"), mapping("/l/sub", "/elsewhere")]);
        let text = os(r#"["/l/sub/x","/l/x"]"#);
        let out = map.to_remote(text.as_bytes());
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            os(r#"["/elsewhere/x","/r/x"]"#)
        );
    }

    #[test]
    fn truncated_text_is_left_as_it_came() {
        let text = os(r#"{"a":"file:///srv/proj/x","b":"unterminated"#);
        assert_eq!(
            map().to_local(text.as_bytes()).as_ref(),
            os(r#"{"a":"file:///home/me/proj/x","b":"unterminated"#).as_bytes()
        );
        let text = br#"{"a":"\"#;
        assert_eq!(map().to_local(text).as_ref(), text);
    }

    #[test]
    fn validation_refuses_relative_and_root_paths() {
        let bad =
            |local: PathBuf, remote: PathBuf| PathMapping { local, remote }.validate().is_err();
        assert!(bad("rel".into(), os_pathbuf("/srv")));
        assert!(bad(os_pathbuf("/"), os_pathbuf("/srv")));
        assert!(bad(os_pathbuf("/home"), "srv".into()));
        assert!(!bad(os_pathbuf("/home/me"), os_pathbuf("/srv/x")));
        // On Windows a path without a drive is not absolute.
        assert_eq!(bad("/home/me".into(), "/srv/x".into()), cfg!(windows));
    }
}
