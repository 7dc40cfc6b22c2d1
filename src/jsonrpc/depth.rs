//! Shape scans of JSON text that hostile input must pass before anything acts
//! on it: nesting depth (a byte scan, before any recursive parser sees the
//! text) and duplicate object keys (one pass, after the depth is known to be
//! bounded).

use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, SeqAccess, Visitor};
use std::borrow::Cow;
use std::collections::HashSet;
use std::fmt;

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

/// The first key that occurs twice in one object of `text`, decoded (`"uri"`
/// and `"\u0075ri"` are the same key). `None` when every object's keys are
/// distinct, or when `text` stops being JSON before a duplicate (the
/// caller's parser reports that).
///
/// serde_json keeps the last of duplicate keys, other parsers the first: a
/// message checked in one reading and forwarded as bytes could be read in the
/// other. Recursive: call it only on text whose depth [`max_depth`] bounded.
pub fn duplicate_key(text: &str) -> Option<String> {
    let mut found = None;
    let mut de = serde_json::Deserializer::from_str(text);
    // An error is either the duplicate (recorded in `found`) or bad JSON.
    let _ = Scan { found: &mut found }.deserialize(&mut de);
    found
}

/// One value of the duplicate scan; stops (with an error) at the first duplicate.
struct Scan<'f> {
    found: &'f mut Option<String>,
}

/// Objects with at most this many keys are checked by a linear search.
const LINEAR_KEYS: usize = 16;

impl<'de> DeserializeSeed<'de> for Scan<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Scan<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while seq
            .next_element_seed(Scan {
                found: &mut *self.found,
            })?
            .is_some()
        {}
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut keys: Vec<Cow<'de, str>> = Vec::new();
        let mut many: HashSet<Cow<'de, str>> = HashSet::new();
        while let Some(key) = map.next_key_seed(Key)? {
            let repeated = if many.is_empty() && keys.len() < LINEAR_KEYS {
                let repeated = keys.contains(&key);
                keys.push(key.clone());
                repeated
            } else {
                many.extend(keys.drain(..));
                !many.insert(key.clone())
            };
            if repeated {
                *self.found = Some(key.into_owned());
                return Err(A::Error::custom("duplicate key"));
            }
            map.next_value_seed(Scan {
                found: &mut *self.found,
            })?;
        }
        Ok(())
    }
}

/// An object key, borrowed from the text when it has no escapes.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an object key")
    }

    fn visit_borrowed_str<E>(self, key: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(key))
    }

    fn visit_str<E>(self, key: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(key.to_string()))
    }
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
        // Past the linear search.
        let many: Vec<String> = (0..40).map(|i| format!(r#""k{i}":{i}"#)).collect();
        let text = format!("{{{},\"k7\":0}}", many.join(","));
        assert_eq!(duplicate_key(&text).as_deref(), Some("k7"));
        assert_eq!(duplicate_key(&format!("{{{}}}", many.join(","))), None);
        // Not JSON: left to the parser (unless a duplicate came first).
        assert_eq!(duplicate_key(r#"{"a":1,"b""#), None);
        assert_eq!(duplicate_key(r#"{"a":1,"a""#).as_deref(), Some("a"));
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
