//! `migrate karmada`'s decisions beside the mapping: the order in which
//! the KubeFed side is released, whether the KubeFedClusters go once it
//! is, and the kill points a test names to stop a migration between two
//! of its steps (`KUBEFEDCTL_MIGRATE_KILL_AT`).

use super::karmada::CLUSTER_SECRET_NAMESPACE;
use serde_json::Value;

/// The boundaries between a migration's steps, in the order a run
/// crosses them; those marked `#n` are crossed once per object (`#1` the
/// first). `recorded`: the member copies' UIDs read; `applying#n`: the
/// n-th exported object applied to Karmada; `applied`: all of them;
/// `waited`: every binding FullyApplied; `verified`: every copy Karmada's
/// with its UID; `orphaned#n`, `deleted#n`, `released#n`: the n-th
/// federated object annotated, the n-th federated object or RSP deleted,
/// released (finalizer removed); `unjoining#n`: the n-th KubeFedCluster's
/// Secret deleted (the KubeFedCluster not yet).
pub const KILL_POINTS: &[&str] = &[
    "recorded",
    "applying",
    "applied",
    "waited",
    "verified",
    "orphaned",
    "deleted",
    "released",
    "unjoining",
];

/// Whether a run crossing `point` for the `occurrence`-th time (from 1)
/// stops there, for the kill point `spec` (`point` or `point#n`; a bare
/// `point` is its first crossing). An unknown spec never matches.
pub fn kill_here(spec: &str, point: &str, occurrence: usize) -> bool {
    let (name, nth) = match spec.trim().split_once('#') {
        Some((name, n)) => match n.parse::<usize>() {
            Ok(n) if n >= 1 => (name, n),
            _ => return false,
        },
        None => (spec.trim(), 1),
    };
    name == point && nth == occurrence
}

/// `ns/name`.
fn key(obj: &Value) -> (&str, &str) {
    let m = &obj["metadata"];
    (
        m["namespace"].as_str().unwrap_or(""),
        m["name"].as_str().unwrap_or(""),
    )
}

/// The order of the release: each federated object, then the RSP that
/// schedules it (so that a run stopped between them never finds an object
/// without its RSP, which would export its template's own replicas), then
/// the RSPs whose object is already gone, then the FederatedNamespaces
/// (nothing of a namespace is released before its contents).
pub fn release_order<'v>(federated: &'v [Value], rsps: &'v [Value]) -> Vec<&'v Value> {
    let (namespaces, others): (Vec<&Value>, Vec<&Value>) = federated
        .iter()
        .partition(|f| f["kind"] == "FederatedNamespace");
    let schedules = |r: &Value, f: &Value| key(r) == key(f) && r["spec"]["targetKind"] == f["kind"];
    let mut out = Vec::new();
    for f in &others {
        out.push(*f);
        out.extend(rsps.iter().filter(|r| schedules(r, f)));
    }
    out.extend(
        rsps.iter()
            .filter(|r| !others.iter().any(|f| schedules(r, f))),
    );
    out.extend(namespaces);
    out
}

/// What becomes of the KubeFedClusters once a migration released its
/// objects.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Clusters {
    /// Deleted, with their Secrets in the host (nothing in a member: the
    /// members' identities are the ones Karmada's Clusters use now).
    Remove,
    /// `--keep-clusters`.
    Kept,
    /// Federated objects of this federation remain (another namespace than
    /// `-n`'s, or a type the migration could not export): KubeFed still
    /// needs the clusters for them. The namespaces (`""`: cluster-scoped)
    /// with what remains, sorted, and how many objects.
    StillUsed(Vec<String>, usize),
    /// Some federated types could not be listed (`<type>: <why>`): whether
    /// objects of theirs remain is unknown, so the clusters stay.
    Unknown(Vec<String>),
}

/// Whether the KubeFedClusters go: only when none of the federation's
/// objects is left in the host and the user did not keep them.
/// `remaining`: the federated objects of its types in every namespace,
/// read after the release; `own_namespace`: under a namespace-scoped
/// KubeFed, its namespace, the only one it federates (another control
/// plane's objects elsewhere are not its). RSPs do not count: without
/// their federated object they schedule nothing, and other control
/// planes' RSPs share their group. `unlisted`: the types that could not be
/// listed.
pub fn clusters_after_release(
    keep: bool,
    remaining: &[Value],
    unlisted: &[String],
    own_namespace: Option<&str>,
) -> Clusters {
    if keep {
        return Clusters::Kept;
    }
    if !unlisted.is_empty() {
        return Clusters::Unknown(unlisted.to_vec());
    }
    let ours: Vec<&str> = remaining
        .iter()
        .map(|o| key(o).0)
        .filter(|ns| own_namespace.is_none_or(|own| own == *ns))
        .collect();
    let mut namespaces: Vec<String> = ours.iter().map(|ns| ns.to_string()).collect();
    namespaces.sort();
    namespaces.dedup();
    match namespaces.is_empty() {
        true => Clusters::Remove,
        false => Clusters::StillUsed(namespaces, ours.len()),
    }
}

/// What a migration applies of an export (with tokens): everything but
/// a Cluster Secret without a token, whose KubeFedCluster's Secret is
/// gone (a run stopped while it removed the clusters): applied, it would
/// take away the token an earlier run gave Karmada. The Secrets left out,
/// by name.
pub fn to_apply(objects: &[Value]) -> (Vec<&Value>, Vec<String>) {
    let tokenless = |o: &Value| {
        o["apiVersion"] == "v1"
            && o["kind"] == "Secret"
            && o["metadata"]["namespace"] == CLUSTER_SECRET_NAMESPACE
            && o["data"]["token"].is_null()
    };
    let (left_out, apply): (Vec<&Value>, Vec<&Value>) = objects.iter().partition(|o| tokenless(o));
    let names = left_out
        .iter()
        .map(|o| format!("{CLUSTER_SECRET_NAMESPACE}/{}", key(o).1))
        .collect();
    (apply, names)
}

/// The objects a migration applies first, and waits for: the Clusters
/// with their Secrets and namespace; then the rest. Karmada's scheduler
/// schedules a binding once, over the Clusters that have reported their
/// status by then (it does not schedule again when a status arrives), so
/// policies applied beside a new Cluster would leave it out: its copies
/// not taken over, and with an RSP its share of the replicas moved to the
/// others. The names of the Clusters to wait for.
pub fn clusters_first<'v>(objects: &[&'v Value]) -> (Vec<&'v Value>, Vec<&'v Value>, Vec<String>) {
    let first = |o: &Value| {
        o["apiVersion"]
            .as_str()
            .is_some_and(|a| a.starts_with("cluster.karmada.io/"))
            || o["metadata"]["namespace"] == CLUSTER_SECRET_NAMESPACE
            || (o["kind"] == "Namespace" && o["metadata"]["name"] == CLUSTER_SECRET_NAMESPACE)
    };
    let (clusters, rest): (Vec<&Value>, Vec<&Value>) =
        objects.iter().copied().partition(|o| first(o));
    let names = clusters
        .iter()
        .filter(|o| o["kind"] == "Cluster")
        .map(|o| key(o).1.to_string())
        .collect();
    (clusters, rest, names)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kill_points_match_their_nth_crossing_only() {
        let cases = [
            // (spec, point, occurrence, stops)
            ("applied", "applied", 1, true),
            ("applied", "applied", 2, false),
            ("applied", "waited", 1, false),
            ("released#2", "released", 2, true),
            ("released#2", "released", 1, false),
            ("released#2", "deleted", 2, false),
            (" orphaned#1 ", "orphaned", 1, true),
            ("released#0", "released", 1, false),
            ("released#x", "released", 1, false),
            ("", "applied", 1, false),
        ];
        for (spec, point, n, stops) in cases {
            assert_eq!(kill_here(spec, point, n), stops, "{spec} at {point}#{n}");
        }
    }

    fn obj(kind: &str, ns: &str, name: &str) -> Value {
        json!({"kind": kind, "metadata": {"namespace": ns, "name": name}})
    }

    fn rsp(ns: &str, name: &str, target: &str) -> Value {
        json!({"kind": "ReplicaSchedulingPreference", "metadata": {"namespace": ns, "name": name},
               "spec": {"targetKind": target}})
    }

    #[test]
    fn each_object_is_released_before_its_rsp_and_namespaces_last() {
        let federated = [
            obj("FederatedNamespace", "a", "a"),
            obj("FederatedDeployment", "a", "web"),
            obj("FederatedConfigMap", "a", "web"),
            obj("FederatedDeployment", "a", "api"),
        ];
        let rsps = [
            rsp("a", "api", "FederatedDeployment"),
            rsp("a", "gone", "FederatedDeployment"),
            rsp("a", "web", "FederatedDeployment"),
        ];
        let order: Vec<String> = release_order(&federated, &rsps)
            .iter()
            .map(|o| format!("{} {}", o["kind"].as_str().unwrap(), key(o).1))
            .collect();
        assert_eq!(
            order,
            [
                "FederatedDeployment web",
                "ReplicaSchedulingPreference web",
                "FederatedConfigMap web",
                "FederatedDeployment api",
                "ReplicaSchedulingPreference api",
                "ReplicaSchedulingPreference gone",
                "FederatedNamespace a",
            ]
        );
    }

    #[test]
    fn a_cluster_secret_without_its_token_is_not_applied() {
        let secret = |name: &str, data: Value| {
            json!({"apiVersion": "v1", "kind": "Secret",
                   "metadata": {"namespace": CLUSTER_SECRET_NAMESPACE, "name": name}, "data": data})
        };
        let app_secret = json!({"apiVersion": "v1", "kind": "Secret",
                                "metadata": {"namespace": "shop", "name": "s"}, "data": {}});
        let objects = [
            secret("m1", json!({"caBundle": "Y2E=", "token": "dA=="})),
            secret("m2", json!({"caBundle": "Y2E="})),
            app_secret.clone(),
        ];
        let (apply, left_out) = to_apply(&objects);
        assert_eq!(apply, [&objects[0], &app_secret]);
        assert_eq!(left_out, ["karmada-cluster/m2"]);
    }

    #[test]
    fn clusters_are_applied_before_anything_they_would_schedule() {
        let objects = [
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": CLUSTER_SECRET_NAMESPACE}}),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"namespace": CLUSTER_SECRET_NAMESPACE, "name": "m1"}}),
            json!({"apiVersion": "cluster.karmada.io/v1alpha1", "kind": "Cluster", "metadata": {"name": "m1"}}),
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}}),
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"namespace": "shop", "name": "m1"}}),
            json!({"apiVersion": "policy.karmada.io/v1alpha1", "kind": "PropagationPolicy", "metadata": {"namespace": "shop", "name": "p"}}),
        ];
        let refs: Vec<&Value> = objects.iter().collect();
        let (first, rest, names) = clusters_first(&refs);
        assert_eq!(first, refs[..3]);
        assert_eq!(rest, refs[3..]);
        assert_eq!(names, ["m1"]);
    }

    #[test]
    fn clusters_go_only_when_nothing_federated_is_left() {
        assert_eq!(
            clusters_after_release(false, &[], &[], None),
            Clusters::Remove
        );
        assert_eq!(clusters_after_release(true, &[], &[], None), Clusters::Kept);
        let left = [
            obj("FederatedConfigMap", "b", "x"),
            obj("FederatedConfigMap", "a", "y"),
            obj("FederatedConfigMap", "b", "z"),
        ];
        assert_eq!(
            clusters_after_release(false, &left, &[], None),
            Clusters::StillUsed(vec!["a".into(), "b".into()], 3)
        );
        assert_eq!(
            clusters_after_release(true, &left, &[], None),
            Clusters::Kept
        );
        // Namespace-scoped: only its own namespace's objects are its.
        assert_eq!(
            clusters_after_release(false, &left, &[], Some("a")),
            Clusters::StillUsed(vec!["a".into()], 1)
        );
        assert_eq!(
            clusters_after_release(false, &left, &[], Some("fed")),
            Clusters::Remove
        );
        // A type that could not be listed may still hold objects.
        let why = vec!["widgets.example.com: forbidden".to_string()];
        assert_eq!(
            clusters_after_release(false, &[], &why, None),
            Clusters::Unknown(why.clone())
        );
        assert_eq!(
            clusters_after_release(true, &[], &why, None),
            Clusters::Kept
        );
    }
}
