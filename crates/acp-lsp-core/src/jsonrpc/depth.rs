//! Shape scans of JSON text that hostile input must pass before anything acts
//! on it, each one pass over the bytes before any recursive parser sees the
//! text: nesting depth and duplicate object keys.

use super::shallow::{decode, string_end};
use std::borrow::Cow;
use std::collections::HashSet;

/// The deepest nesting of `[`/`{` in `bytes`, ignoring brackets inside strings.
/// Stops counting (and returns `limit + 1`) as soon as `limit` is exceeded.
pub fn max_depth(bytes: &[u8], limit: usize) -> usize {
    let mut depth = 0usize;
    let mut deepest = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in bytes {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > deepest {
                    deepest = depth;
                    if deepest > limit {
                        return deepest;
                    }
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Keys an object may have before its duplicate check switches from
/// comparing each new key with the earlier ones to a hash set: LSP objects
/// have a handful of keys, and for those a few comparisons cost less than
/// hashing (the scan runs on every `lsp/request`).
const LINEAR_KEYS: usize = 16;

/// The first key that occurs twice in one object of `text`, decoded (`"uri"`
/// and `"\u0075ri"` are the same key). `None` when every object's keys are
/// distinct; broken text is scanned as far as it goes.
///
/// serde_json keeps the last of duplicate keys, other parsers the first: a
/// message checked in one reading and forwarded as bytes could be read in the
/// other. A byte scan, like [`max_depth`], so that nothing a parser refuses
/// (a number out of range, a bad escape) can end it early, and with no
/// recursion: the keys of the open objects on one stack on the heap.
pub fn duplicate_key(text: &str) -> Option<String> {
    let b = text.as_bytes();
    // The keys of every open object, innermost last; sized so that an
    // ordinary request's scan never grows them (each growth a `realloc`).
    let mut keys: Vec<Cow<'_, str>> = Vec::with_capacity(32);
    // One frame per open container.
    let mut open: Vec<Frame<'_>> = Vec::with_capacity(8);
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                let end = string_end(b, i)?;
                if let Some(Frame::Object { first, set }) = open.last_mut() {
                    let mut j = end + 1;
                    while j < b.len() && b[j].is_ascii_whitespace() {
                        j += 1;
                    }
                    // In an object, a string followed by a colon is a key.
                    if b.get(j) == Some(&b':') {
                        let key = decode(&text[i + 1..end]);
                        let seen = match set {
                            Some(set) => !set.insert(key.clone()),
                            None => keys[*first..].contains(&key),
                        };
                        if seen {
                            return Some(key.into_owned());
                        }
                        keys.push(key);
                        if set.is_none() && keys.len() - *first > LINEAR_KEYS {
                            *set = Some(keys[*first..].iter().cloned().collect());
                        }
                    }
                }
                i = end + 1;
            }
            b'{' => {
                open.push(Frame::Object {
                    first: keys.len(),
                    set: None,
                });
                i += 1;
            }
            b'[' => {
                open.push(Frame::Array);
                i += 1;
            }
            b'}' | b']' => {
                if let Some(Frame::Object { first, .. }) = open.pop() {
                    keys.truncate(first);
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    None
}

/// An open container of [`duplicate_key`]'s scan.
enum Frame<'a> {
    Array,
    /// An object: its keys are `keys[first..]`, and past [`LINEAR_KEYS`]
    /// also in `set`.
    Object {
        first: usize,
        set: Option<HashSet<Cow<'a, str>>>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_duplicate_keys_at_any_depth_in_any_spelling() {
        assert_eq!(duplicate_key(r#"{"a":1,"b":2}"#), None);
        assert_eq!(duplicate_key(r#"{"a":1,"a":2}"#).as_deref(), Some("a"));
        assert_eq!(
            duplicate_key(r#"{"x":[{"uri":"a","\u0075ri":"b"}]}"#).as_deref(),
            Some("uri")
        );
        // The same key in different objects is fine.
        assert_eq!(duplicate_key(r#"[{"a":1},{"a":{"a":2}}]"#), None);
        // Many keys.
        let many: Vec<String> = (0..40).map(|i| format!(r#""k{i}":{i}"#)).collect();
        let text = format!("{{{},\"k7\":0}}", many.join(","));
        assert_eq!(duplicate_key(&text).as_deref(), Some("k7"));
        assert_eq!(duplicate_key(&format!("{{{}}}", many.join(","))), None);
        // Around the switch from comparisons to a set: a duplicate of the
        // first key, and of the last key before the switch, after it.
        for n in [
            LINEAR_KEYS - 1,
            LINEAR_KEYS,
            LINEAR_KEYS + 1,
            LINEAR_KEYS + 2,
        ] {
            let keys = &many[..n];
            for dup in ["k0", &format!("k{}", n - 1)] {
                let text = format!("{{{},\"{dup}\":0}}", keys.join(","));
                assert_eq!(duplicate_key(&text).as_deref(), Some(dup), "{n} keys");
            }
            assert_eq!(duplicate_key(&format!("{{{}}}", keys.join(","))), None);
        }
        // An inner object's keys are not the outer one's, before or after it.
        assert_eq!(
            duplicate_key(r#"{"a":{"b":1,"c":{"a":1,"b":2}},"b":{"a":1},"c":0}"#),
            None
        );
        assert_eq!(
            duplicate_key(r#"{"a":{"b":1},"b":2,"a":3}"#).as_deref(),
            Some("a")
        );
        // Broken or out-of-range text does not end the scan early.
        assert_eq!(duplicate_key(r#"{"a":1,"b""#), None);
        assert_eq!(duplicate_key(r#"{"a":1,"a":"#).as_deref(), Some("a"));
        assert_eq!(
            duplicate_key(r#"{"n":1e400,"x":{"k":"\q","k":0}}"#).as_deref(),
            Some("k")
        );
        // Strings that are values, and brackets inside strings, are not keys.
        assert_eq!(
            duplicate_key(r#"{"a":"a","b":["a","a"],"c":"{\"a\":1,\"a\":2}"}"#),
            None
        );
    }

    #[test]
    fn counts_nesting_outside_strings() {
        assert_eq!(max_depth(br#"{"a":[1,{"b":2}]}"#, 64), 3);
        assert_eq!(max_depth(br#"{"a":"[[[[{{{{\"]]]"}"#, 64), 1);
        assert_eq!(max_depth(b"1", 64), 0);
    }

    #[test]
    fn stops_past_the_limit() {
        let deep = "[".repeat(1_000_000);
        assert_eq!(max_depth(deep.as_bytes(), 64), 65);
    }
}
