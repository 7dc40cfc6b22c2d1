//! A last-resort scan of a message's top level, for lines the parser refuses
//! (too deep, or broken further in): finds the `id` and `method` so that a
//! request of ours still gets an error response rather than being forwarded.
//!
//! A line that does not parse may still be read by a lenient peer, in ways
//! the scan must anticipate: invalid UTF-8 replaced by U+FFFD, the first or
//! the last of duplicate members, escapes in keys and values. So
//! [`member_strings`] reads every such way at once and returns all readings.

use memchr::memmem;
use std::borrow::Cow;
use std::sync::LazyLock;

/// The raw text of top-level member `key` when its value is a string, number
/// or literal. Returns `None` when the key is absent or the scan gets lost.
pub fn top_level_scalar<'a>(bytes: &'a [u8], key: &str) -> Option<&'a str> {
    let text = std::str::from_utf8(bytes).ok()?;
    let b = text.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                let end = string_end(b, i)?;
                if depth == 1 {
                    // A key at the top level is followed by a colon.
                    let mut j = end + 1;
                    while j < b.len() && b[j].is_ascii_whitespace() {
                        j += 1;
                    }
                    if j < b.len() && b[j] == b':' && &text[i + 1..end] == key {
                        j += 1;
                        while j < b.len() && b[j].is_ascii_whitespace() {
                            j += 1;
                        }
                        return scalar_at(text, j);
                    }
                }
                i = end + 1;
            }
            b'{' | b'[' => {
                depth += 1;
                i += 1;
            }
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                i += 1;
            }
            _ => i += 1,
        }
    }
    None
}

/// Index of the closing quote of the string starting at `start`.
pub(crate) fn string_end(b: &[u8], start: usize) -> Option<usize> {
    let mut i = start + 1;
    while i < b.len() {
        match b[i] {
            b'\\' => i += 2,
            b'"' => return Some(i),
            _ => i += 1,
        }
    }
    None
}

fn scalar_at(text: &str, start: usize) -> Option<&str> {
    let b = text.as_bytes();
    match *b.get(start)? {
        b'"' => Some(&text[start..=string_end(b, start)?]),
        b'{' | b'[' => None,
        _ => {
            let end = b[start..]
                .iter()
                .position(|c| matches!(c, b',' | b'}' | b']') || c.is_ascii_whitespace())
                .map_or(b.len(), |p| start + p);
            Some(&text[start..end])
        }
    }
}

/// A top-level string member, unquoted (escapes are not decoded; method names have none).
pub fn top_level_string<'a>(bytes: &'a [u8], key: &str) -> Option<&'a str> {
    let raw = top_level_scalar(bytes, key)?;
    raw.strip_prefix('"')?.strip_suffix('"')
}

/// Every string value of a member named `key`, at any depth, in every
/// reading a lenient parser could make: the text read as UTF-8 with invalid
/// bytes replaced, keys and values with their escapes decoded (a lone
/// surrogate becomes U+FFFD), every duplicate. Broken input is scanned as far
/// as it goes.
pub fn member_strings(bytes: &[u8], key: &str) -> Vec<String> {
    let text = String::from_utf8_lossy(bytes);
    let b = text.as_bytes();
    let mut found = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'"' {
            i += 1;
            continue;
        }
        let Some(end) = string_end(b, i) else { break };
        let mut j = end + 1;
        while j < b.len() && b[j].is_ascii_whitespace() {
            j += 1;
        }
        let is_key = j < b.len() && b[j] == b':';
        if is_key && decode(&text[i + 1..end]) == key {
            j += 1;
            while j < b.len() && b[j].is_ascii_whitespace() {
                j += 1;
            }
            if j < b.len() && b[j] == b'"' {
                let Some(value_end) = string_end(b, j) else {
                    break;
                };
                found.push(decode(&text[j + 1..value_end]).into_owned());
                i = value_end + 1;
                continue;
            }
        }
        i = end + 1;
    }
    found
}

/// Whether a line is plainly none of the messages a relay acts on, decided
/// in one pass without parsing: true only when it has no `"id"` member (so
/// it is no request or response), no `/` after `lsp`, `fs` or `$` (no gate
/// method in any spelling, no `fs/*` request, no `$/cancel_request`), and no
/// escape but `\n \t \r \b \f \" \\`. Those escapes decode to none of the
/// letters of those names, so no reading of the line ([`member_strings`],
/// with every other escape decoded and invalid UTF-8 replaced) can name one
/// either. False means "maybe": parse the line.
pub fn plainly_not_ours(line: &[u8]) -> bool {
    // `"id"` inside a string is `\"id\"`, so a hit is a key or a false
    // alarm (a parse), never a miss. Searching for it alone is much cheaper
    // than stopping at every quote.
    static ID_KEY: LazyLock<memmem::Finder<'static>> =
        LazyLock::new(|| memmem::Finder::new(b"\"id\""));
    if ID_KEY.find(line).is_some() {
        return false;
    }
    // The end of the escape pair last seen: its second byte is not a
    // delimiter.
    let mut escaped_until = 0;
    for i in memchr::memchr2_iter(b'\\', b'/', line) {
        if i < escaped_until {
            continue;
        }
        if line[i] == b'\\' {
            match line.get(i + 1) {
                Some(b'n' | b't' | b'r' | b'b' | b'f' | b'"' | b'\\') => escaped_until = i + 2,
                _ => return false,
            }
        } else {
            let before = &line[..i];
            if before.ends_with(b"lsp") || before.ends_with(b"fs") || before.ends_with(b"$") {
                return false;
            }
        }
    }
    true
}

/// The top-level `id` of a line that may not be UTF-8, as JSON text: the
/// raw scalar of the lossy reading (what a lenient peer would echo).
pub fn lossy_top_level_id(bytes: &[u8]) -> Option<String> {
    let text = String::from_utf8_lossy(bytes);
    let start = text.find('{')?;
    top_level_scalar(&text.as_bytes()[start..], "id").map(str::to_string)
}

/// A JSON string body with its escapes decoded; what cannot be decoded
/// (a lone surrogate, a bad escape) becomes U+FFFD.
pub(crate) fn decode(body: &str) -> Cow<'_, str> {
    if !body.contains('\\') {
        return Cow::Borrowed(body);
    }
    let mut out = String::with_capacity(body.len());
    let mut chars = body.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('b') => out.push('\u{8}'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let unit = hex4(&mut chars);
                match unit {
                    Some(high @ 0xD800..=0xDBFF) => {
                        let mut ahead = chars.clone();
                        let low = (ahead.next() == Some('\\') && ahead.next() == Some('u'))
                            .then(|| hex4(&mut ahead))
                            .flatten()
                            .filter(|low| (0xDC00..=0xDFFF).contains(low));
                        match low {
                            Some(low) => {
                                chars = ahead;
                                let code = 0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00);
                                out.push(char::from_u32(code).unwrap_or('\u{FFFD}'));
                            }
                            None => out.push('\u{FFFD}'),
                        }
                    }
                    Some(unit) => out.push(char::from_u32(unit).unwrap_or('\u{FFFD}')),
                    None => out.push('\u{FFFD}'),
                }
            }
            Some(other) => out.push(other),
            None => out.push('\u{FFFD}'),
        }
    }
    Cow::Owned(out)
}

fn hex4(chars: &mut std::str::Chars<'_>) -> Option<u32> {
    let mut value = 0;
    for _ in 0..4 {
        value = value * 16 + chars.next()?.to_digit(16)?;
    }
    Some(value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_strings_reads_every_duplicate_and_spelling() {
        let line = b"{\"method\":\"a\",\"\\u006dethod\":\"lsp\\/request\",\"x\":\"\xff\",\"p\":{\"method\":\"\\ud83d\\ude00\\ud800\"}";
        assert_eq!(
            member_strings(line, "method"),
            vec!["a", "lsp/request", "\u{1F600}\u{FFFD}"]
        );
        // A value that is not a string, and a string that is not a key.
        assert!(member_strings(br#"{"method":1,"x":"method"}"#, "method").is_empty());
    }

    #[test]
    fn plainly_not_ours_passes_only_lines_no_reading_makes_ours() {
        let plain: &[&[u8]] = &[
            br#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"text":"a \"id\": 1\n\\"}}}"#,
            b"not json at all",
            b"",
            br#"[{"method":"session/update"}]"#,
            // Invalid UTF-8 is replaced, never read as a letter.
            b"{\"method\":\"lsp\xff/request\"}",
        ];
        for line in plain {
            assert!(plainly_not_ours(line), "{}", String::from_utf8_lossy(line));
            // And the full reading agrees: no gate method anywhere.
            assert!(member_strings(line, "method")
                .iter()
                .all(|m| !m.contains("lsp/")));
        }
        let maybe: &[&[u8]] = &[
            br#"{"method":"session/update","id":1}"#,
            br#"{"id" :1,"result":{}}"#,
            br#"{"method":"lsp/request"}"#,
            br#"{"method":"_acp-lsp/diagnostics"}"#,
            br#"{"method":"lsp/request"}"#,
            br#"{"method":"l\sp/request"}"#,
            br#"{"method":"lsp\/request"}"#,
            br#"{"method":"x","id":1}"#,
            br#"{"method":"$/cancel_request","params":{}}"#,
            br#"{"method":"fs/write_text_file"}"#,
            b"trailing backslash \\",
        ];
        for line in maybe {
            assert!(!plainly_not_ours(line), "{}", String::from_utf8_lossy(line));
        }
    }

    #[test]
    fn a_span_of_lines_passes_only_if_each_line_would() {
        // The relay scans a whole read at once: "not ours" for the span
        // must imply it for each of its lines, whatever the neighbours.
        let lines: &[&[u8]] = &[
            br#"{"method":"session/update","params":{"t":"a"b"}}"#,
            br#"{"method":"lsp/request"}"#,
            br#"{"id":1}"#,
            b"ends in ls",
            b"p/request",
            b"ends in an escape \\",
            b"n and more",
            b"$",
            b"/x",
            b"fs",
            b"",
        ];
        for a in lines {
            for b in lines {
                for c in lines {
                    let span = [*a, *b, *c].join(&b'\n');
                    if plainly_not_ours(&span) {
                        for line in [a, b, c] {
                            assert!(
                                plainly_not_ours(line),
                                "span passed, line did not: {:?}",
                                String::from_utf8_lossy(&span)
                            );
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn lossy_id_survives_invalid_utf8() {
        assert_eq!(
            lossy_top_level_id(b"\xef\xbb\xbf{\"id\":\"a\xffb\",\"method\":\"x\"}").as_deref(),
            Some("\"a\u{FFFD}b\"")
        );
    }

    #[test]
    fn finds_id_and_method_past_deep_params() {
        let deep = format!(
            r#"{{"jsonrpc":"2.0","params":{}{},"id":"x\"y","method":"lsp/request"}}"#,
            "[".repeat(500),
            "]".repeat(500)
        );
        assert_eq!(top_level_scalar(deep.as_bytes(), "id"), Some(r#""x\"y""#));
        assert_eq!(
            top_level_string(deep.as_bytes(), "method"),
            Some("lsp/request")
        );
    }

    #[test]
    fn ignores_nested_keys() {
        let text = br#"{"params":{"id":5,"method":"inner"},"id":7}"#;
        assert_eq!(top_level_scalar(text, "id"), Some("7"));
        assert_eq!(top_level_string(text, "method"), None);
    }

    #[test]
    fn survives_broken_input() {
        assert_eq!(
            top_level_scalar(br#"{"id":1,"method":"lsp/request","params":{"#, "id"),
            Some("1")
        );
        assert_eq!(top_level_scalar(b"not json", "id"), None);
        assert_eq!(top_level_scalar(br#"{"id":"unterminated"#, "id"), None);
    }
}
