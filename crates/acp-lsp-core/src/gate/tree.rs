//! A borrowed reading of an `lsp/request`'s inner params, and the view of a
//! JSON tree that confinement and the gate's checks walk (over it, or over
//! a `serde_json::Value`).
//!
//! The inner params are read once per request, only to be checked (URIs,
//! the named documents, an `executeCommand`'s command) and then forwarded
//! as the agent's bytes. A `Value` copies every string and builds a map per
//! object; this tree borrows each string without escapes from the request's
//! text and keeps an object's members in a `Vec`, in document order.
//! Duplicate keys never reach it: the gate refuses them before parsing.

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use std::borrow::Cow;
use std::fmt;

/// What a walk over JSON needs to see of a node.
pub(crate) trait JsonTree: Sized {
    /// The string, if this is one.
    fn as_str(&self) -> Option<&str>;
    /// The items, if this is an array.
    fn items(&self) -> Option<&[Self]>;
    /// The members in order, if this is an object.
    fn members(&self) -> Option<impl DoubleEndedIterator<Item = (&str, &Self)>>;

    /// The member `key` of an object.
    fn get(&self, key: &str) -> Option<&Self> {
        self.members()?.find(|(k, _)| *k == key).map(|(_, v)| v)
    }
}

impl JsonTree for Value {
    fn as_str(&self) -> Option<&str> {
        Value::as_str(self)
    }

    fn items(&self) -> Option<&[Value]> {
        self.as_array().map(Vec::as_slice)
    }

    fn members(&self) -> Option<impl DoubleEndedIterator<Item = (&str, &Value)>> {
        self.as_object()
            .map(|map| map.iter().map(|(k, v)| (k.as_str(), v)))
    }

    fn get(&self, key: &str) -> Option<&Value> {
        Value::get(self, key)
    }
}

/// JSON borrowed from its text where it can be: what the checks read of an
/// `lsp/request`'s params. Numbers, booleans and null are all `Other`.
#[derive(Debug, PartialEq)]
pub(crate) enum Json<'a> {
    Other,
    Str(Cow<'a, str>),
    Array(Vec<Json<'a>>),
    Object(Vec<(Cow<'a, str>, Json<'a>)>),
}

impl JsonTree for Json<'_> {
    fn as_str(&self) -> Option<&str> {
        match self {
            Json::Str(s) => Some(s),
            _ => None,
        }
    }

    fn items(&self) -> Option<&[Self]> {
        match self {
            Json::Array(items) => Some(items),
            _ => None,
        }
    }

    fn members(&self) -> Option<impl DoubleEndedIterator<Item = (&str, &Self)>> {
        match self {
            Json::Object(members) => Some(members.iter().map(|(k, v)| (k.as_ref(), v))),
            _ => None,
        }
    }
}

impl<'de: 'a, 'a> Deserialize<'de> for Json<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(JsonVisitor)
    }
}

/// A key, borrowed when it has no escapes.
struct Key<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Key<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_str(JsonVisitor)
            .and_then(|json| match json {
                Json::Str(s) => Ok(Key(s)),
                _ => Err(serde::de::Error::custom("an object key is not a string")),
            })
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json<'de>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Json<'de>, E> {
        Ok(Json::Other)
    }

    fn visit_i64<E>(self, _: i64) -> Result<Json<'de>, E> {
        Ok(Json::Other)
    }

    fn visit_u64<E>(self, _: u64) -> Result<Json<'de>, E> {
        Ok(Json::Other)
    }

    fn visit_f64<E>(self, _: f64) -> Result<Json<'de>, E> {
        Ok(Json::Other)
    }

    fn visit_unit<E>(self) -> Result<Json<'de>, E> {
        Ok(Json::Other)
    }

    fn visit_none<E>(self) -> Result<Json<'de>, E> {
        Ok(Json::Other)
    }

    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Json<'de>, E> {
        Ok(Json::Str(Cow::Borrowed(s)))
    }

    fn visit_str<E>(self, s: &str) -> Result<Json<'de>, E> {
        Ok(Json::Str(Cow::Owned(s.to_owned())))
    }

    fn visit_string<E>(self, s: String) -> Result<Json<'de>, E> {
        Ok(Json::Str(Cow::Owned(s)))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json<'de>, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0));
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json<'de>, A::Error> {
        let mut members = Vec::with_capacity(map.size_hint().unwrap_or(0));
        while let Some((Key(key), value)) = map.next_entry()? {
            members.push((key, value));
        }
        Ok(Json::Object(members))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_borrowed_unless_escaped_and_members_keep_their_order() {
        let text = r#"{"z": "plain", "a\u0041": ["x\"y", 1, null, true, {"k": 2.5}]}"#;
        let json: Json = serde_json::from_str(text).unwrap();
        let Json::Object(members) = &json else {
            panic!("not an object: {json:?}")
        };
        assert_eq!(members[0].0, "z");
        assert!(matches!(members[0].0, Cow::Borrowed(_)));
        assert!(matches!(&members[0].1, Json::Str(Cow::Borrowed("plain"))));
        assert_eq!(members[1].0, "aA");
        assert!(matches!(members[1].0, Cow::Owned(_)));
        let items = members[1].1.items().unwrap();
        assert_eq!(items[0].as_str(), Some("x\"y"));
        assert_eq!(items[1..4], [Json::Other, Json::Other, Json::Other]);
        assert_eq!(items[4].get("k"), Some(&Json::Other));
        assert_eq!(json.get("missing"), None);
    }

    #[test]
    fn reads_what_a_value_reads() {
        // Same shape through both views.
        let text = r#"{"textDocument": {"uri": "file:///a"}, "list": ["b", {"c": "d"}]}"#;
        let json: Json = serde_json::from_str(text).unwrap();
        let value: Value = serde_json::from_str(text).unwrap();
        fn strings<T: JsonTree>(node: &T, out: &mut Vec<String>) {
            if let Some(s) = node.as_str() {
                out.push(s.to_string());
            }
            for item in node.items().into_iter().flatten() {
                strings(item, out);
            }
            for (key, value) in node.members().into_iter().flatten() {
                out.push(key.to_string());
                strings(value, out);
            }
        }
        let (mut a, mut b) = (Vec::new(), Vec::new());
        strings(&json, &mut a);
        strings(&value, &mut b);
        // A `Value`'s members come sorted unless `preserve_order` is on.
        a.sort();
        b.sort();
        assert_eq!(a, b);
        assert_eq!(
            json.get("textDocument")
                .and_then(|d| d.get("uri"))
                .and_then(JsonTree::as_str),
            Some("file:///a")
        );
    }
}
