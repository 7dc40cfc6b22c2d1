//! A last-resort scan of a message's top level, for lines the parser refuses
//! (too deep, or broken further in): finds the `id` and `method` so that a
//! request of ours still gets an error response rather than being forwarded.

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
fn string_end(b: &[u8], start: usize) -> Option<usize> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
