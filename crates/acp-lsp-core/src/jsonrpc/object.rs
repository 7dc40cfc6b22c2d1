//! Order-preserving edits of JSON objects held as raw text: members that are not
//! touched keep their exact bytes (so big integers and key order survive).

use serde::de::{Deserializer, MapAccess, Visitor};
use serde_json::value::RawValue;
use std::fmt;

/// The members of a JSON object, in order, values kept raw.
#[derive(Debug, Clone)]
pub struct RawObject<'a> {
    members: Vec<(String, Member<'a>)>,
}

#[derive(Debug, Clone)]
enum Member<'a> {
    Raw(&'a RawValue),
    Owned(String),
}

impl<'a> RawObject<'a> {
    /// Parses an object's top level. Fails when `raw` is not an object.
    pub fn parse(raw: &'a RawValue) -> Result<RawObject<'a>, serde_json::Error> {
        struct ObjectVisitor;
        impl<'de> Visitor<'de> for ObjectVisitor {
            type Value = Vec<(String, Member<'de>)>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut members = Vec::new();
                while let Some((key, value)) = map.next_entry::<String, &'de RawValue>()? {
                    members.push((key, Member::Raw(value)));
                }
                Ok(members)
            }
        }
        let mut de = serde_json::Deserializer::from_str(raw.get());
        let members = (&mut de).deserialize_map(ObjectVisitor)?;
        de.end()?;
        Ok(RawObject { members })
    }

    /// An empty object.
    pub fn empty() -> RawObject<'static> {
        RawObject {
            members: Vec::new(),
        }
    }

    /// A member's raw text.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.members
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| match v {
                Member::Raw(raw) => raw.get(),
                Member::Owned(text) => text.as_str(),
            })
    }

    /// A member's raw value, when it was not replaced.
    pub fn get_raw(&self, key: &str) -> Option<&'a RawValue> {
        self.members
            .iter()
            .find(|(k, _)| k == key)
            .and_then(|(_, v)| match v {
                Member::Raw(raw) => Some(*raw),
                Member::Owned(_) => None,
            })
    }

    /// Whether the member exists and is not `null`.
    pub fn has_non_null(&self, key: &str) -> bool {
        self.get(key).is_some_and(|text| text.trim() != "null")
    }

    /// Sets a member to JSON text (assumed valid), in place if it exists, else at the end.
    pub fn set(&mut self, key: &str, json_text: String) {
        match self.members.iter_mut().find(|(k, _)| k == key) {
            Some((_, value)) => *value = Member::Owned(json_text),
            None => self
                .members
                .push((key.to_string(), Member::Owned(json_text))),
        }
    }

    /// Serializes the object; untouched members are copied byte for byte.
    pub fn to_json(&self) -> String {
        let mut out = String::from("{");
        for (i, (key, value)) in self.members.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(&serde_json::to_string(key).expect("BUG: a string always serializes"));
            out.push(':');
            match value {
                Member::Raw(raw) => out.push_str(raw.get()),
                Member::Owned(text) => out.push_str(text),
            }
        }
        out.push('}');
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untouched_members_keep_their_bytes_and_order() {
        let raw: &RawValue =
            serde_json::from_str(r#"{"z":18446744073709551616,"a":{"x" : 1.50},"m":null}"#)
                .unwrap();
        let mut obj = RawObject::parse(raw).unwrap();
        assert!(!obj.has_non_null("m"));
        assert!(obj.has_non_null("a"));
        obj.set("m", "{}".into());
        obj.set("new", "[1]".into());
        assert_eq!(
            obj.to_json(),
            r#"{"z":18446744073709551616,"a":{"x" : 1.50},"m":{},"new":[1]}"#
        );
    }

    #[test]
    fn rejects_non_objects() {
        let raw: &RawValue = serde_json::from_str("[1,2]").unwrap();
        assert!(RawObject::parse(raw).is_err());
    }
}
