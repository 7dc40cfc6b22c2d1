//! The ids the gate deals in, as types: a `ServerId` (what `lsp/servers`
//! lists and `lsp/request` names) is not a `SessionId`. Both are the exact
//! string of the wire (`#[serde(transparent)]`) and read as `&str`
//! (`Deref`, `AsRef`, `Borrow`), so callers holding strings convert at the
//! boundary with `.into()`.

use serde::{Deserialize, Serialize};
use std::borrow::Borrow;
use std::fmt;
use std::ops::Deref;

macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(String);

        impl $name {
            /// The id's string.
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        /// As the string (`"id"`), so messages that quote an id with `{:?}`
        /// read as they did when it was a `String`.
        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(&self.0, f)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl Deref for $name {
            type Target = str;
            fn deref(&self) -> &str {
                &self.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl Borrow<str> for $name {
            fn borrow(&self) -> &str {
                &self.0
            }
        }

        impl From<String> for $name {
            fn from(id: String) -> Self {
                $name(id)
            }
        }

        impl From<&str> for $name {
            fn from(id: &str) -> Self {
                $name(id.to_string())
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }
    };
}

string_id!(
    /// A language server's id in `lsp/servers` and `lsp/request`.
    ServerId
);
string_id!(
    /// An ACP session's id.
    SessionId
);

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn an_id_is_its_string_on_the_wire_and_in_maps() {
        let id = ServerId::from("rust-analyzer-1");
        assert_eq!(serde_json::to_string(&id).unwrap(), "\"rust-analyzer-1\"");
        let back: ServerId = serde_json::from_str("\"rust-analyzer-1\"").unwrap();
        assert_eq!(back, id);
        assert_eq!(id.to_string(), "rust-analyzer-1");
        assert_eq!(format!("{id:?}"), "\"rust-analyzer-1\"");
        let map = HashMap::from([(SessionId::from("s"), 1)]);
        assert_eq!(map.get("s"), Some(&1));
    }
}
