//! Federated CRDs before the objects of the types they define
//! (kubefed#774, which KubeFed left open): when a run holds a federated
//! `CustomResourceDefinition` and federated objects of the type it defines,
//! a member cannot take the objects until it serves the type. The run then
//! goes in two phases: the CRD types first, then (once the members' copies
//! are `Established`) every other type. Which types wait on which CRD is
//! decided here; the waiting is the shell's.

use std::collections::{BTreeMap, BTreeSet};

/// The group and kind of the type that defines other types.
pub const CRD_GROUP: &str = "apiextensions.k8s.io";
pub const CRD_KIND: &str = "CustomResourceDefinition";

/// A type's target, as far as ordering needs it.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    pub group: &'a str,
    pub kind: &'a str,
    pub plural: &'a str,
}

impl Target<'_> {
    /// This type's objects are CRDs.
    pub fn defines_types(&self) -> bool {
        self.group == CRD_GROUP && self.kind == CRD_KIND
    }

    /// The name of the CRD that would define this type (`plural.group`);
    /// the core group's types are built in.
    pub fn crd_name(&self) -> Option<String> {
        (!self.group.is_empty()).then(|| format!("{}.{}", self.plural, self.group))
    }
}

/// A run's types in two phases, by index into the run's types.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Phases {
    /// The CRD types: propagated first.
    pub first: Vec<usize>,
    /// Every other type, in the run's order.
    pub then: Vec<usize>,
    /// The types of `then` that a federated CRD defines, with its name:
    /// where a member does not serve one yet, the run waits for that CRD.
    pub awaits: BTreeMap<usize, String>,
}

/// The phases of a run over `targets`, given the names of the federated
/// CRDs it holds; `None` when no type is defined by one of them (one phase,
/// as before).
pub fn phases(targets: &[Target], federated_crds: &BTreeSet<String>) -> Option<Phases> {
    let awaits: BTreeMap<usize, String> = targets
        .iter()
        .enumerate()
        .filter(|(_, t)| !t.defines_types())
        .filter_map(|(i, t)| t.crd_name().map(|n| (i, n)))
        .filter(|(_, n)| federated_crds.contains(n))
        .collect();
    if awaits.is_empty() {
        return None;
    }
    let (first, then) = (0..targets.len()).partition(|&i| targets[i].defines_types());
    Some(Phases {
        first,
        then,
        awaits,
    })
}

/// A CRD whose type its API server serves (the `Established` condition).
pub fn established(crd: &serde_json::Value) -> bool {
    crd["status"]["conditions"].as_array().is_some_and(|c| {
        c.iter()
            .any(|c| c["type"] == "Established" && c["status"] == "True")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t<'a>(group: &'a str, kind: &'a str, plural: &'a str) -> Target<'a> {
        Target {
            group,
            kind,
            plural,
        }
    }

    fn names(n: &[&str]) -> BTreeSet<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_type_defined_by_a_federated_crd_waits_for_it() {
        let types = [
            t("", "ConfigMap", "configmaps"),
            t("example.com", "Widget", "widgets"),
            t(CRD_GROUP, CRD_KIND, "customresourcedefinitions"),
            t("apps", "Deployment", "deployments"),
        ];
        let p = phases(
            &types,
            &names(&["widgets.example.com", "other.example.com"]),
        )
        .unwrap();
        assert_eq!(p.first, vec![2]);
        assert_eq!(p.then, vec![0, 1, 3]);
        assert_eq!(
            p.awaits,
            BTreeMap::from([(1, "widgets.example.com".to_string())])
        );
    }

    #[test]
    fn one_phase_when_no_type_waits() {
        let types = [
            t("", "ConfigMap", "configmaps"),
            t("example.com", "Widget", "widgets"),
            t(CRD_GROUP, CRD_KIND, "customresourcedefinitions"),
        ];
        // Federated CRDs of other types, or none at all.
        assert_eq!(phases(&types, &names(&["gadgets.example.com"])), None);
        assert_eq!(phases(&types, &names(&[])), None);
        // The core group is never a CRD's, whatever the names say.
        let core = [
            t("", "Widget", "widgets"),
            t(CRD_GROUP, CRD_KIND, "customresourcedefinitions"),
        ];
        assert_eq!(phases(&core, &names(&["widgets."])), None);
    }

    #[test]
    fn established_is_the_condition_true() {
        let crd = |status: &str| {
            serde_json::json!({"status": {"conditions": [
                {"type": "NamesAccepted", "status": "True"},
                {"type": "Established", "status": status}]}})
        };
        assert!(established(&crd("True")));
        assert!(!established(&crd("False")));
        assert!(!established(&serde_json::json!({"status": {}})));
    }

    #[test]
    fn the_crd_type_itself_never_waits() {
        let types = [t(CRD_GROUP, CRD_KIND, "customresourcedefinitions")];
        let crd = names(&["customresourcedefinitions.apiextensions.k8s.io"]);
        assert_eq!(phases(&types, &crd), None);
    }
}
