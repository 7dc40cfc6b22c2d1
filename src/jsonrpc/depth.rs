//! Nesting depth of JSON text, measured by a byte scan so that hostile input is
//! refused before any recursive parser sees it.

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

#[cfg(test)]
mod tests {
    use super::*;

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
