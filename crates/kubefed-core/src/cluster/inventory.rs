//! The federation in SIG Multicluster's cluster inventory (KEP-4322,
//! `sigs.k8s.io/cluster-inventory-api` v0.1.2, `apis/v1alpha1`): a
//! ClusterProfile per member, its status from the probe KubeFed's cluster
//! controller makes, the consumer identity a credential is issued for, and
//! a profile read back into a join. KubeFed's controller knows none of this;
//! every name here is ours (`kubefedctl.kubefed.io/...`) or the inventory's.

use super::health::Health;
use super::membership::{JoinNames, MemberEndpoint};
use serde_json::{Value, json};

pub const GROUP: &str = "multicluster.x-k8s.io";
pub const VERSION: &str = "v1alpha1";
pub const API_VERSION: &str = "multicluster.x-k8s.io/v1alpha1";
pub const KIND: &str = "ClusterProfile";
pub const PLURAL: &str = "clusterprofiles";
pub const CRD_NAME: &str = "clusterprofiles.multicluster.x-k8s.io";
/// Our `spec.clusterManager.name`, and the value of [`MANAGER_LABEL`].
pub const MANAGER: &str = "kubefed";
/// The label a profile's manager sets to its own name (`LabelClusterManagerKey`).
pub const MANAGER_LABEL: &str = "x-k8s.io/cluster-manager";
/// The label on a namespace that makes it a ClusterSet (`LabelClusterSetKey`).
pub const CLUSTERSET_LABEL: &str = "multicluster.x-k8s.io/clusterset";
/// The standard property naming a profile's ClusterSet (KEP-2149).
pub const CLUSTERSET_PROPERTY: &str = "clusterset.k8s.io";
/// The access provider we publish and `deploy/inventory/provider.json` names.
pub const PROVIDER: &str = "kubefed";
/// The kubeconfig extension client-go hands to an exec plugin as
/// `ExecCredential.spec.cluster.config`.
pub const EXEC_EXTENSION: &str = "client.authentication.k8s.io/exec";
/// A KubeFedCluster label `L` becomes the property `label.kubefed.io/L`.
pub const LABEL_PROPERTY_PREFIX: &str = "label.kubefed.io/";
/// On a KubeFedCluster: the profile `join` published for it, `NAMESPACE/NAME`.
pub const PROFILE_ANNOTATION: &str = "kubefedctl.kubefed.io/cluster-profile";
/// On a KubeFedCluster: the profile it was joined from, `NAMESPACE/NAME`.
pub const FROM_PROFILE_ANNOTATION: &str = "kubefedctl.kubefed.io/from-cluster-profile";
/// On a KubeFedCluster: the consumer identities `join --consumer` made in
/// the member, comma-separated (what `unjoin` takes away).
pub const CONSUMERS_ANNOTATION: &str = "kubefedctl.kubefed.io/inventory-consumers";
/// The consumer `kubefedctl credential` issues for when none is named.
pub const DEFAULT_CONSUMER: &str = "inventory-consumer";

/// The profile `join` writes (its status is written separately, through
/// the status subresource).
pub fn profile(name: &str, namespace: &str) -> Value {
    json!({
        "apiVersion": API_VERSION, "kind": KIND,
        "metadata": {"name": name, "namespace": namespace, "labels": {MANAGER_LABEL: MANAGER}},
        "spec": {"displayName": name, "clusterManager": {"name": MANAGER}}
    })
}

/// The manager a profile names (`spec.clusterManager.name`).
pub fn manager_of(profile: &Value) -> &str {
    profile["spec"]["clusterManager"]["name"]
        .as_str()
        .unwrap_or("")
}

/// Ours to write: a profile another manager wrote is never touched.
pub fn is_ours(profile: &Value) -> bool {
    manager_of(profile) == MANAGER
}

/// `NAMESPACE/NAME` as the annotations hold it.
pub fn parse_ref(text: &str) -> Option<(&str, &str)> {
    let (ns, name) = text.split_once('/')?;
    (!ns.is_empty() && !name.is_empty() && !name.contains('/')).then_some((ns, name))
}

/// What a profile's status says of one member.
#[derive(Debug, Clone)]
pub struct ProfileFacts<'a> {
    /// The KubeFedCluster's name (the extension tells the credential plugin).
    pub cluster: &'a str,
    /// The host's federation namespace.
    pub federation_namespace: &'a str,
    pub endpoint: &'a MemberEndpoint,
    pub labels: &'a std::collections::BTreeMap<String, String>,
    /// The ClusterSet the profile's namespace names, if any.
    pub clusterset: Option<&'a str>,
}

/// The profile's status after a probe, or `None` when nothing but times
/// would change (a probe time alone is not worth a write, as for the
/// KubeFedCluster: [`super::health::status_after_probe`]).
pub fn status_after_probe(
    old: &Value,
    h: &Health,
    facts: &ProfileFacts,
    now: &str,
) -> Option<Value> {
    let mut status = json!({
        "conditions": conditions(old, h, now),
        "accessProviders": [access_provider(facts)],
        "properties": properties(old, facts, now),
    });
    match h {
        Health::Ready { version } if !version.is_empty() => {
            status["version"] = json!({"kubernetes": version})
        }
        _ => {
            if let Some(v) = old["version"].as_object() {
                status["version"] = json!(v);
            }
        }
    }
    (essence(old) != essence(&status)).then_some(status)
}

/// `ControlPlaneHealthy` from the probe behind the KubeFedCluster's `Ready`,
/// and `Joined` (the KEP's): True while the member is joined. Transition
/// times are kept while a status holds.
fn conditions(old: &Value, h: &Health, now: &str) -> Vec<Value> {
    let (status, reason, message) = match h {
        Health::Ready { .. } => (
            "True",
            "ClusterReady",
            "/healthz responded with ok".to_string(),
        ),
        Health::NotReady { message } => ("False", "ClusterNotReady", message.clone()),
        Health::Offline { message } => ("Unknown", "ClusterNotReachable", message.clone()),
        Health::ConfigMalformed { message } => {
            ("Unknown", "ClusterConfigMalformed", message.clone())
        }
    };
    let joined = "joined to the federation by kubefedctl".to_string();
    [
        ("ControlPlaneHealthy", status, reason, message),
        ("Joined", "True", "KubeFedClusterJoined", joined),
    ]
    .into_iter()
    .map(|(t, s, reason, message)| {
        let since = old["conditions"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|c| c["type"] == t && c["status"] == s)
            .and_then(|c| c["lastTransitionTime"].as_str())
            .unwrap_or(now);
        let message: String = message.chars().take(32768).collect();
        json!({"type": t, "status": s, "reason": reason, "message": message,
               "lastTransitionTime": since})
    })
    .collect()
}

/// The member's server and CA under our provider, and the extension that
/// tells `kubefedctl credential` which member and federation it is; never
/// a token.
fn access_provider(f: &ProfileFacts) -> Value {
    let mut cluster = json!({
        "server": f.endpoint.api_endpoint,
        "extensions": [{"name": EXEC_EXTENSION, "extension": {
            "cluster": f.cluster, "federationNamespace": f.federation_namespace}}]
    });
    if let Some(ca) = &f.endpoint.ca_bundle {
        cluster["certificate-authority-data"] = json!(ca);
    }
    if let Some(proxy) = &f.endpoint.proxy_url {
        cluster["proxy-url"] = json!(proxy);
    }
    if f.endpoint.insecure_skip_tls_verify {
        cluster["insecure-skip-tls-verify"] = json!(true);
    }
    json!({"name": PROVIDER, "cluster": cluster})
}

/// The KubeFedCluster's labels under [`LABEL_PROPERTY_PREFIX`] (a label
/// with an empty value has no property: the API wants one), and the
/// ClusterSet; `lastObservedTime` is kept while a value holds.
fn properties(old: &Value, f: &ProfileFacts, now: &str) -> Vec<Value> {
    let mut named: Vec<(String, &str)> = f
        .labels
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| (format!("{LABEL_PROPERTY_PREFIX}{k}"), v.as_str()))
        .filter(|(k, _)| k.len() <= 253)
        .collect();
    if let Some(set) = f.clusterset {
        named.push((CLUSTERSET_PROPERTY.to_string(), set));
    }
    named.sort();
    named
        .into_iter()
        .map(|(name, value)| {
            let seen = old["properties"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|p| p["name"] == name.as_str() && p["value"] == value)
                .and_then(|p| p["lastObservedTime"].as_str())
                .unwrap_or(now);
            json!({"name": name, "value": value, "lastObservedTime": seen})
        })
        .collect()
}

/// What a status says, times aside.
fn essence(status: &Value) -> Value {
    let mut s = status.clone();
    for c in s["conditions"].as_array_mut().into_iter().flatten() {
        c.as_object_mut().map(|m| m.remove("lastTransitionTime"));
    }
    for p in s["properties"].as_array_mut().into_iter().flatten() {
        p.as_object_mut().map(|m| m.remove("lastObservedTime"));
    }
    for key in ["conditions", "properties", "accessProviders"] {
        if s[key].as_array().is_some_and(|a| a.is_empty()) || s[key].is_null() {
            s.as_object_mut().map(|m| m.remove(key));
        }
    }
    s
}

/// The member a credential is for, from the extension the profile carries
/// (`ExecCredential.spec.cluster.config`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialTarget {
    pub cluster: String,
    pub federation_namespace: String,
}

/// Reads `KUBERNETES_EXEC_INFO` (client-go's ExecCredential, v1 or v1beta1)
/// for the extension [`access_provider`] wrote.
pub fn credential_target(exec_info: &Value) -> Result<CredentialTarget, String> {
    let config = &exec_info["spec"]["cluster"]["config"];
    if exec_info["spec"]["cluster"].is_null() {
        return Err("KUBERNETES_EXEC_INFO has no spec.cluster: the provider must set provideClusterInfo: true".into());
    }
    let field = |k: &str| {
        config[k].as_str().filter(|s| !s.is_empty()).map(str::to_string).ok_or_else(|| {
            format!("KUBERNETES_EXEC_INFO's spec.cluster.config has no {k:?}: the ClusterProfile's {EXEC_EXTENSION} extension was not written by kubefedctl")
        })
    };
    Ok(CredentialTarget {
        cluster: field("cluster")?,
        federation_namespace: field("federationNamespace")?,
    })
}

/// The ExecCredential an exec plugin prints, in the API version it was
/// asked in.
pub fn exec_credential(api_version: &str, token: &str, expires_at: &str) -> Value {
    json!({
        "apiVersion": api_version, "kind": "ExecCredential", "spec": {},
        "status": {"token": token, "expirationTimestamp": expires_at}
    })
}

/// The member objects behind a consumer identity: its service account in
/// the member's federation namespace, bound to `cluster_role` (what the
/// user grants it), and a Role that lets the federation's own identity
/// request tokens for that account and nothing else.
pub fn consumer_objects(
    consumer: &str,
    names: &JoinNames,
    ns: &str,
    cluster_role: &str,
) -> Vec<Value> {
    let binding = format!("kubefed-inventory-consumer:{consumer}");
    let token_role = format!("{binding}:token");
    let labels = json!({"kubefedctl.kubefed.io/inventory-consumer": consumer});
    vec![
        json!({"apiVersion": "v1", "kind": "ServiceAccount",
               "metadata": {"name": consumer, "namespace": ns, "labels": labels}}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
               "metadata": {"name": binding, "labels": labels},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": cluster_role},
               "subjects": [{"kind": "ServiceAccount", "name": consumer, "namespace": ns}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": token_role, "namespace": ns, "labels": labels},
               "rules": [{"apiGroups": [""], "resources": ["serviceaccounts/token"],
                          "resourceNames": [consumer], "verbs": ["create"]}]}),
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
               "metadata": {"name": token_role, "namespace": ns, "labels": labels},
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": token_role},
               "subjects": [{"kind": "ServiceAccount", "name": names.service_account, "namespace": ns}]}),
    ]
}

/// Where a profile says its cluster is: the named provider's (else the
/// first provider's) kubeconfig `cluster`, `accessProviders` first, then
/// the deprecated `credentialProviders`.
pub fn endpoint_of(profile: &Value, provider: Option<&str>) -> Result<MemberEndpoint, String> {
    let providers: Vec<&Value> = ["accessProviders", "credentialProviders"]
        .iter()
        .flat_map(|k| profile["status"][k].as_array().into_iter().flatten())
        .collect();
    let chosen = match provider {
        Some(name) => providers
            .iter()
            .find(|p| p["name"] == name)
            .ok_or_else(|| {
                let known: Vec<&str> = providers
                    .iter()
                    .filter_map(|p| p["name"].as_str())
                    .collect();
                format!("has no access provider {name:?} (it has: {})", list(&known))
            })?,
        None => providers
            .first()
            .ok_or("has no access provider in its status (status.accessProviders)")?,
    };
    let c = &chosen["cluster"];
    let server = c["server"]
        .as_str()
        .filter(|s| !s.is_empty())
        .ok_or_else(|| {
            format!(
                "access provider {:?} has no cluster.server",
                chosen["name"].as_str().unwrap_or("")
            )
        })?;
    Ok(MemberEndpoint {
        api_endpoint: server.to_string(),
        ca_bundle: c["certificate-authority-data"].as_str().map(str::to_string),
        insecure_skip_tls_verify: c["insecure-skip-tls-verify"] == true,
        proxy_url: c["proxy-url"]
            .as_str()
            .filter(|s| !s.is_empty())
            .map(str::to_string),
    })
}

fn list(names: &[&str]) -> String {
    if names.is_empty() {
        "none".into()
    } else {
        names.join(", ")
    }
}

/// What a placement's `clusterSelector` matches of a member: its
/// KubeFedCluster's labels over the properties of its ClusterProfile, by
/// their names (a label of the same name wins). Ours: KubeFed matches the
/// labels alone.
pub fn selectable_labels(
    labels: &std::collections::BTreeMap<String, String>,
    profile: Option<&Value>,
) -> std::collections::BTreeMap<String, String> {
    let properties = profile
        .and_then(|p| p["status"]["properties"].as_array())
        .into_iter()
        .flatten()
        .filter_map(|p| {
            Some((
                p["name"].as_str()?.to_string(),
                p["value"].as_str()?.to_string(),
            ))
        });
    let mut out: std::collections::BTreeMap<String, String> = properties.collect();
    out.extend(labels.iter().map(|(k, v)| (k.clone(), v.clone())));
    out
}

#[cfg(test)]
mod tests;
