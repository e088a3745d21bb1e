//! How messages name objects, one helper per format, so that every message
//! names an object the same way:
//!
//! - [`describe`]: `Kind ns/name` (or `Kind name`), in reconcile's plans,
//!   summaries and logs;
//! - [`quoted`]: `Kind "ns/name"` (or `Kind "name"`), in errors about an
//!   object's content, as kubectl quotes what it cannot handle;
//! - [`qualified`]: `ns/name` (or `name`), where the kind is already said.

use serde_json::Value;
use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

/// The key of an object; cluster-scoped objects have namespace `""`.
/// Named fields rather than a tuple so that no reader has to remember which
/// of `.0` and `.1` is the name. Fields in this order: keys sort by
/// namespace, then name. A map keyed by it is also looked up by borrowed
/// parts, building no key: [`KeyParts`].
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjectKey {
    pub namespace: String,
    pub name: String,
}

/// A key's namespace and name, borrowed: `HashMap<ObjectKey, _>` is
/// looked up with `map.get(&("ns", "name") as &dyn KeyParts)`, which
/// clones no String. [`ObjectKey`] hashes and compares as its parts do.
pub trait KeyParts {
    /// (namespace, name).
    fn parts(&self) -> (&str, &str);
}

impl KeyParts for ObjectKey {
    fn parts(&self) -> (&str, &str) {
        (&self.namespace, &self.name)
    }
}

impl KeyParts for (&str, &str) {
    fn parts(&self) -> (&str, &str) {
        (self.0, self.1)
    }
}

impl<'a> Borrow<dyn KeyParts + 'a> for ObjectKey {
    fn borrow(&self) -> &(dyn KeyParts + 'a) {
        self
    }
}

impl Hash for dyn KeyParts + '_ {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.parts().hash(state);
    }
}

impl PartialEq for dyn KeyParts + '_ {
    fn eq(&self, other: &Self) -> bool {
        self.parts() == other.parts()
    }
}

impl Eq for dyn KeyParts + '_ {}

/// As its parts hash (the borrowed lookups need the same hash).
impl Hash for ObjectKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (self as &dyn KeyParts).hash(state);
    }
}

impl ObjectKey {
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> ObjectKey {
        ObjectKey {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

/// `ns/name`, or `name` for a cluster-scoped object: [`qualified_key`].
impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.namespace.is_empty() {
            f.write_str(&self.name)
        } else {
            write!(f, "{}/{}", self.namespace, self.name)
        }
    }
}

/// One federated object, the same from the observe step to a round's
/// outcome and in the watch's work queue: its type (the
/// FederatedTypeConfig's name, unique in a federation) and its key. The
/// type's name is shared: a key is cloned for every queue, set and map
/// that holds it, and cloning it copies the key's two Strings only.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FederatedRef {
    pub type_name: Arc<str>,
    pub key: ObjectKey,
}

impl FederatedRef {
    /// Allocates the name once; [`FederatedRef::sharing`] does not.
    pub fn new(type_name: &str, key: ObjectKey) -> FederatedRef {
        FederatedRef::sharing(&Arc::from(type_name), key)
    }

    /// With a name already shared (the observed type's own).
    pub fn sharing(type_name: &Arc<str>, key: ObjectKey) -> FederatedRef {
        FederatedRef {
            type_name: type_name.clone(),
            key,
        }
    }
}

/// What a round worked on: a federated object, or the member copies of
/// one that no longer exists (an orphan, named by the federated object it
/// had; member copies of a cluster-scoped type have the same name).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ObjectRef {
    Federated(FederatedRef),
    Orphan(FederatedRef),
}

impl ObjectRef {
    /// The federated object it is, or was.
    pub fn federated(&self) -> &FederatedRef {
        match self {
            ObjectRef::Federated(r) | ObjectRef::Orphan(r) => r,
        }
    }

    pub fn is_orphan(&self) -> bool {
        matches!(self, ObjectRef::Orphan(_))
    }
}

/// The key of any object.
pub fn key_of(obj: &Value) -> ObjectKey {
    let get = |k: &str| {
        obj.get("metadata")
            .and_then(|m| m.get(k))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    ObjectKey::new(get("namespace"), get("name"))
}

/// `ns/name`, or `name` for a cluster-scoped object.
pub fn qualified_key(key: &ObjectKey) -> String {
    key.to_string()
}

/// `ns/name` of an object, or `name`.
pub fn qualified(obj: &Value) -> String {
    qualified_key(&key_of(obj))
}

/// `Kind ns/name` (or `Kind name`).
pub fn describe(kind: &str, obj: &Value) -> String {
    describe_key(kind, &key_of(obj))
}

/// [`describe`] from a key.
pub fn describe_key(kind: &str, key: &ObjectKey) -> String {
    format!("{kind} {}", qualified_key(key))
}

/// `Kind "ns/name"` of a federated object, for errors about it.
pub fn describe_federated(fed: &Value) -> String {
    quoted(fed, "federated object")
}

/// `Kind "ns/name"` (or `Kind "name"`), the kind read from the object
/// (`default_kind` when it has none).
pub fn quoted(obj: &Value, default_kind: &str) -> String {
    let kind = obj
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or(default_kind);
    format!("{kind} {:?}", qualified(obj))
}

/// One field of an input object that is not what it must be: its path
/// from the object's root (`""`: the object itself) and what is wrong, so
/// that every message names the field the same way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    pub path: String,
    pub problem: FieldProblem,
}

/// What is wrong with a field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FieldProblem {
    /// Absent or empty.
    Required,
    /// Of another type: `NotA("an integer")`.
    NotA(&'static str),
    /// A number outside what the field takes.
    OutOfRange(i64),
    /// A value outside a fixed set.
    NotOneOf { value: String, allowed: String },
    /// What a decoder said of it.
    Invalid(String),
}

impl FieldError {
    pub fn new(path: impl Into<String>, problem: FieldProblem) -> FieldError {
        FieldError {
            path: path.into(),
            problem,
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let path = &self.path;
        match (&self.problem, path.is_empty()) {
            (FieldProblem::Required, _) => write!(f, "{path} is required"),
            (FieldProblem::NotA(kind), true) => write!(f, "not {kind}"),
            (FieldProblem::NotA(kind), false) => write!(f, "{path} is not {kind}"),
            (FieldProblem::OutOfRange(n), _) => write!(f, "{path} {n} is out of range"),
            (FieldProblem::NotOneOf { value, allowed }, _) => {
                write!(f, "{path} {value:?} is not in {allowed}")
            }
            (FieldProblem::Invalid(why), true) => write!(f, "{why}"),
            (FieldProblem::Invalid(why), false) => write!(f, "{path}: {why}"),
        }
    }
}

impl std::error::Error for FieldError {}

/// `value` as a `T`; a type error names the field by its path from `root`
/// (`""`: `value` is the whole object), e.g. `spec.recordTTL: invalid type: ...`.
pub fn typed<'de, T: serde::Deserialize<'de>>(
    value: &'de Value,
    root: &str,
) -> Result<T, FieldError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        let path = match (root, e.path().iter().next()) {
            (_, None) => root.to_string(),
            ("", Some(_)) => e.path().to_string(),
            (_, Some(_)) => format!("{root}.{}", e.path()),
        };
        FieldError::new(path, FieldProblem::Invalid(e.inner().to_string()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_map_of_keys_is_looked_up_by_borrowed_parts() {
        let map: std::collections::HashMap<ObjectKey, u8> = [
            (ObjectKey::new("shop", "web"), 1),
            (ObjectKey::new("", "web"), 2),
            (ObjectKey::new("shop", "db"), 3),
        ]
        .into();
        let get = |ns: &str, name: &str| map.get(&(ns, name) as &dyn KeyParts).copied();
        assert_eq!(get("shop", "web"), Some(1));
        assert_eq!(get("", "web"), Some(2));
        assert_eq!(get("shop", "db"), Some(3));
        assert_eq!(get("shopweb", ""), None);
        assert_eq!(get("web", "shop"), None);
    }

    #[test]
    fn keys_of_one_type_share_its_name() {
        let name: Arc<str> = "configmaps".into();
        let a = FederatedRef::sharing(&name, ObjectKey::new("shop", "a"));
        let b = FederatedRef::sharing(&name, ObjectKey::new("shop", "b"));
        assert!(Arc::ptr_eq(&a.type_name, &b.type_name));
        assert!(Arc::ptr_eq(&a.type_name, &a.clone().type_name));
        assert_eq!(
            a,
            FederatedRef::new("configmaps", ObjectKey::new("shop", "a"))
        );
    }

    #[test]
    fn each_format_names_namespaced_and_cluster_scoped_objects() {
        let ns =
            json!({"kind": "FederatedConfigMap", "metadata": {"name": "web", "namespace": "shop"}});
        let cluster = json!({"kind": "FederatedClusterRole", "metadata": {"name": "admin"}});
        let table = [
            (describe("ConfigMap", &ns), "ConfigMap shop/web"),
            (describe("ClusterRole", &cluster), "ClusterRole admin"),
            (quoted(&ns, "object"), "FederatedConfigMap \"shop/web\""),
            (quoted(&cluster, "object"), "FederatedClusterRole \"admin\""),
            (
                quoted(&json!({"metadata": {"name": "x"}}), "object"),
                "object \"x\"",
            ),
            (qualified(&ns), "shop/web"),
            (qualified(&cluster), "admin"),
        ];
        for (got, want) in table {
            assert_eq!(got, want);
        }
    }
}
