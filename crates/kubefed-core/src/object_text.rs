//! An object held as its JSON text. A `serde_json::Value` costs a B-tree
//! node and a `String` per map key: several times the text for the small
//! maps Kubernetes objects are made of. Member listings (a whole type in
//! every member) are held this way from the moment they are read until
//! decide parses the one copy it looks at, so that a run's or a watch's
//! memory follows the text, not the parsed tree. Clones share the text.

use serde_json::Value;
use std::sync::Arc;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectText(Arc<str>);

impl ObjectText {
    /// The text of `v`.
    pub fn of(v: &Value) -> ObjectText {
        ObjectText(serde_json::to_string(v).unwrap_or_default().into())
    }

    /// The object parsed again; text this type made always parses.
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.0).unwrap_or_default()
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_round_trips_and_clones_share_it() {
        let v = json!({"metadata": {"name": "a", "labels": {"x": "1"}}, "data": {"k": ""}});
        let t = ObjectText::of(&v);
        assert_eq!(t.value(), v);
        let c = t.clone();
        assert!(std::ptr::eq(t.as_str(), c.as_str()));
        assert_ne!(ObjectText::of(&json!({"a": 1})), t);
    }
}
