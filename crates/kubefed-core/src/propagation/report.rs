//! What a pull member's agent tells the host (`cluster::pull`): one
//! `PropagationReport` per federated object, in the member's own report
//! namespace, saying what its member now holds of that object — the
//! member's status as KubeFed records it, and the member copy's version
//! for the template and overrides it applied. The host's runs lay the
//! reports over the federated object's status and PropagatedVersion
//! ([`Pulled`]), so both read as they do for push members, and hold the
//! sync finalizer until every pull member reports its copy removed.
//!
//! The agent also reads its own reports back as its record of versions:
//! the PropagatedVersion is the host's to write, and lags.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::describe::ObjectKey;
use crate::propagation::action::ClusterStatus;
use crate::propagation::federated::FederatedObject;
use crate::propagation::readiness::Readiness;
use crate::propagation::version::{overrides_version, template_version};

pub const GROUP: &str = "kubefedctl.kubefed.io";
pub const VERSION: &str = "v1alpha1";
pub const KIND: &str = "PropagationReport";
pub const PLURAL: &str = "propagationreports";

/// The label naming a report's member (also in `spec.cluster`).
pub const CLUSTER_LABEL: &str = "kubefedctl.kubefed.io/cluster";

/// What one agent says of one federated object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    pub cluster: String,
    /// The FederatedTypeConfig's name.
    pub type_name: String,
    /// The federated object (namespace empty when cluster-scoped) and its
    /// UID: a report of an earlier object of the same name is no report.
    pub key: ObjectKey,
    pub uid: String,
    /// The hashes of what was applied (`version::template_version`, ...).
    pub template_version: String,
    pub overrides_version: String,
    /// The member's status, as `status.clusters[].status` says it.
    pub status: ClusterStatus,
    /// The member copy's version (`gen:`/`rv:`) when it holds what those
    /// hashes render.
    pub version: Option<String>,
    /// The copy is confirmed deleted or unlabelled (a deletion).
    pub removed: bool,
    /// The copy's readiness (the `--wait-ready` rules), reported for an
    /// object under a progressive rollout only: the host's rollout gates
    /// the next wave on it (`rollout::pull`). `None` elsewhere, so that a
    /// copy's status changes cost no report writes.
    pub readiness: Option<Readiness>,
    /// When the agent wrote it (RFC 3339).
    pub reported_at: String,
}

impl Report {
    /// Whether it speaks of `fed` as it is now (same object, same hashes).
    pub fn is_current_for(&self, fed: &Value) -> bool {
        self.uid
            == fed
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .unwrap_or("")
            && template_version(fed).ok().as_deref() == Some(self.template_version.as_str())
            && overrides_version(fed).ok().as_deref() == Some(self.overrides_version.as_str())
    }

    /// Whether it speaks of `fed` at all (same UID; a deletion reports on
    /// whatever hashes the object had).
    pub fn is_of(&self, fed: &Value) -> bool {
        self.uid
            == fed
                .pointer("/metadata/uid")
                .and_then(Value::as_str)
                .unwrap_or("")
    }

    /// The same report, leaving out when it was written: equal reports
    /// need no write.
    pub fn says_the_same_as(&self, other: &Report) -> bool {
        Report {
            reported_at: String::new(),
            ..self.clone()
        } == Report {
            reported_at: String::new(),
            ..other.clone()
        }
    }

    /// The report as an object of the host, in `namespace`.
    pub fn to_object(&self, namespace: &str) -> Value {
        let mut spec = json!({
            "cluster": self.cluster,
            "federatedType": self.type_name,
            "name": self.key.name,
            "uid": self.uid,
            "templateVersion": self.template_version,
            "overridesVersion": self.overrides_version,
            "status": status_text(self.status),
            "reportedAt": self.reported_at,
        });
        if !self.key.namespace.is_empty() {
            spec["namespace"] = json!(self.key.namespace);
        }
        if let Some(v) = &self.version {
            spec["version"] = json!(v);
        }
        if self.removed {
            spec["removed"] = json!(true);
        }
        if let Some(r) = &self.readiness {
            let (state, reason) = readiness_text(r);
            spec["readiness"] = json!(state);
            if !reason.is_empty() {
                spec["readinessReason"] = json!(reason);
            }
        }
        json!({
            "apiVersion": format!("{GROUP}/{VERSION}"), "kind": KIND,
            "metadata": {"name": name_of(&self.type_name, &self.key), "namespace": namespace,
                         "labels": {CLUSTER_LABEL: self.cluster}},
            "spec": spec,
        })
    }

    /// A report read from the host; `None` for one that does not parse
    /// (written by something else than an agent).
    pub fn parse(obj: &Value) -> Option<Report> {
        let spec = obj.get("spec")?;
        let text = |k: &str| spec.get(k).and_then(Value::as_str).map(str::to_string);
        Some(Report {
            cluster: text("cluster")?,
            type_name: text("federatedType")?,
            key: ObjectKey {
                namespace: text("namespace").unwrap_or_default(),
                name: text("name")?,
            },
            uid: text("uid")?,
            template_version: text("templateVersion").unwrap_or_default(),
            overrides_version: text("overridesVersion").unwrap_or_default(),
            status: parse_status(&text("status")?)?,
            version: text("version"),
            removed: spec.get("removed").and_then(Value::as_bool) == Some(true),
            readiness: text("readiness")
                .and_then(|s| parse_readiness(&s, text("readinessReason").unwrap_or_default())),
            reported_at: text("reportedAt").unwrap_or_default(),
        })
    }
}

/// A status as a report spells it: `OK` where KubeFed writes nothing.
fn status_text(s: ClusterStatus) -> &'static str {
    match s {
        ClusterStatus::Ok => "OK",
        s => s.as_str(),
    }
}

fn parse_status(text: &str) -> Option<ClusterStatus> {
    match text {
        "OK" => Some(ClusterStatus::Ok),
        "" => None,
        s => ClusterStatus::parse(s),
    }
}

/// A readiness as a report spells it: `Ready`, `Pending` or `Failed`,
/// and the reason (empty when ready).
fn readiness_text(r: &Readiness) -> (&'static str, &str) {
    match r {
        Readiness::Ready => ("Ready", ""),
        Readiness::Pending(why) => ("Pending", why),
        Readiness::Failed(why) => ("Failed", why),
    }
}

fn parse_readiness(state: &str, reason: String) -> Option<Readiness> {
    match state {
        "Ready" => Some(Readiness::Ready),
        "Pending" => Some(Readiness::Pending(reason)),
        "Failed" => Some(Readiness::Failed(reason)),
        _ => None,
    }
}

/// A report's name: `<type>.<namespace>.<name>` (`<type>.<name>` for a
/// cluster-scoped object), which `kubectl get propagationreports` reads
/// at a glance; the spec names the object exactly.
pub fn name_of(type_name: &str, key: &ObjectKey) -> String {
    if key.namespace.is_empty() {
        format!("{type_name}.{}", key.name)
    } else {
        format!("{type_name}.{}.{}", key.namespace, key.name)
    }
}

/// Every report read from the host, by member, type and object.
#[derive(Clone, Debug, Default)]
pub struct Reports {
    by_object: BTreeMap<(String, String, ObjectKey), Report>,
}

impl Reports {
    /// Reports read from the host, each kept only where it stands: the
    /// member it names must be the one whose namespace holds it
    /// (`namespace_of`), so that no agent speaks for another.
    pub fn of(objects: &[Value], namespace_of: impl Fn(&str) -> String) -> Reports {
        let mut by_object = BTreeMap::new();
        for o in objects {
            let Some(r) = Report::parse(o) else { continue };
            let ns = o.pointer("/metadata/namespace").and_then(Value::as_str);
            if ns != Some(namespace_of(&r.cluster).as_str()) {
                continue;
            }
            by_object.insert((r.cluster.clone(), r.type_name.clone(), r.key.clone()), r);
        }
        Reports { by_object }
    }

    pub fn get(&self, cluster: &str, type_name: &str, key: &ObjectKey) -> Option<&Report> {
        self.by_object
            .get(&(cluster.to_string(), type_name.to_string(), key.clone()))
    }

    pub fn insert(&mut self, r: Report) {
        self.by_object
            .insert((r.cluster.clone(), r.type_name.clone(), r.key.clone()), r);
    }

    pub fn remove(&mut self, r: &Report) {
        self.by_object
            .remove(&(r.cluster.clone(), r.type_name.clone(), r.key.clone()));
    }

    pub fn extend(&mut self, reports: impl IntoIterator<Item = Report>) {
        reports.into_iter().for_each(|r| self.insert(r));
    }

    pub fn iter(&self) -> impl Iterator<Item = &Report> {
        self.by_object.values()
    }

    pub fn len(&self) -> usize {
        self.by_object.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_object.is_empty()
    }
}

/// What the host knows of one pull member for one federated object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PullState {
    /// Its agent has not beaten for too long (`cluster::pull::agent_silent`).
    Silent,
    /// Its agent's report on the object, as it stands.
    Reported(Box<Report>),
    /// No report on this object (nothing applied yet, or never placed).
    NotReported,
}

/// The pull members of one federated object, as the host's record step
/// lays them over its status, PropagatedVersion and finalizer.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pulled {
    pub members: BTreeMap<String, PullState>,
}

impl Pulled {
    /// `fed`'s pull members from `reports`; `pull_members`: each pull
    /// member's name and whether its agent is silent.
    pub fn of(
        fed: &Value,
        type_name: &str,
        pull_members: &[(String, bool)],
        reports: &Reports,
    ) -> Pulled {
        let key = FederatedObject::new(fed).key();
        let members = pull_members
            .iter()
            .map(|(cluster, silent)| {
                let report = reports
                    .get(cluster, type_name, &key)
                    .filter(|r| r.is_of(fed));
                let state = match (silent, report) {
                    (true, _) => PullState::Silent,
                    (false, Some(r)) => PullState::Reported(Box::new(r.clone())),
                    (false, None) => PullState::NotReported,
                };
                (cluster.clone(), state)
            })
            .collect();
        Pulled { members }
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn contains(&self, cluster: &str) -> bool {
        self.members.contains_key(cluster)
    }

    /// The status each selected pull member gets: a silent agent's
    /// `ClusterNotReady`, a report's status (current or not; a report of
    /// an earlier template leaves the object at `CheckClusters` through
    /// [`Pulled::versions`]), none while nothing was reported.
    pub fn statuses<'p>(
        &'p self,
        selected: &'p std::collections::BTreeSet<String>,
    ) -> impl Iterator<Item = (&'p str, ClusterStatus)> + 'p {
        self.members
            .iter()
            .filter(|(c, _)| selected.contains(*c))
            .filter_map(|(c, s)| match s {
                PullState::Silent => Some((c.as_str(), ClusterStatus::ClusterNotReady)),
                PullState::Reported(r) if !r.removed => Some((c.as_str(), r.status)),
                _ => None,
            })
    }

    /// The member versions current reports give (for `fed` as it is now).
    pub fn versions(&self, fed: &Value) -> BTreeMap<String, String> {
        self.members
            .iter()
            .filter_map(|(c, s)| match s {
                PullState::Reported(r) if r.is_current_for(fed) && !r.removed => {
                    Some((c.clone(), r.version.clone()?))
                }
                _ => None,
            })
            .collect()
    }

    /// Pull members that may still hold a copy of a deleted object: every
    /// one but those that reported it removed or never reported on it.
    pub fn holding(&self) -> Vec<String> {
        self.members
            .iter()
            .filter(|(_, s)| match s {
                PullState::Silent => true,
                PullState::Reported(r) => !r.removed,
                PullState::NotReported => false,
            })
            .map(|(c, _)| c.clone())
            .collect()
    }
}

/// The agent's own record of what its member holds of an object, in the
/// shape of the PropagatedVersion `pv` the host keeps (its metadata kept):
/// the hashes the agent applied and its member's version alone. The
/// decide step compares a member copy with it as with a PropagatedVersion;
/// the host's own record lags behind the reports it is written from.
/// `None` when the report records no version.
pub fn agent_versions(pv: Option<&Value>, report: &Report) -> Option<Value> {
    let version = report.version.as_ref().filter(|_| !report.removed)?;
    let metadata = pv
        .and_then(|v| v.get("metadata"))
        .cloned()
        .unwrap_or(json!({}));
    Some(json!({
        "metadata": metadata,
        "status": {
            "templateVersion": report.template_version,
            "overridesVersion": report.overrides_version,
            "clusterVersions": [{"clusterName": report.cluster, "version": version}],
        },
    }))
}

/// The PropagationReport CRD (`kubefedctl.kubefed.io/v1alpha1`), which
/// `join --mode pull` installs on the host.
pub fn crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{PLURAL}.{GROUP}")},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"kind": KIND, "listKind": format!("{KIND}List"), "plural": PLURAL,
                      "singular": "propagationreport", "categories": ["kubefed"]},
            "versions": [{
                "name": VERSION, "served": true, "storage": true,
                "additionalPrinterColumns": [
                    {"name": "Cluster", "type": "string", "jsonPath": ".spec.cluster"},
                    {"name": "Status", "type": "string", "jsonPath": ".spec.status"},
                    {"name": "Version", "type": "string", "jsonPath": ".spec.version"},
                    {"name": "Reported", "type": "date", "jsonPath": ".spec.reportedAt"},
                ],
                "schema": {"openAPIV3Schema": schema()},
            }],
        },
    })
}

/// The report's schema, every field named (the API server prunes the rest).
fn schema() -> Value {
    let text = |d: &str| json!({"type": "string", "description": d});
    json!({
                    "type": "object",
                    "description": "What a pull member's agent applied of one federated object (kubefedctl agent).",
                    "properties": {
                        "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "spec": {
                            "type": "object",
                            "required": ["cluster", "federatedType", "name", "uid", "status"],
                            "properties": {
                                "cluster": text("The pull member."),
                                "federatedType": text("The FederatedTypeConfig's name."),
                                "namespace": text("The federated object's namespace."),
                                "name": text("The federated object's name."),
                                "uid": text("The federated object's UID."),
                                "templateVersion": text("The template hash applied."),
                                "overridesVersion": text("The overrides hash applied."),
                                "status": text("The member's propagation status (status.clusters[].status)."),
                                "version": text("The member copy's version (gen: or rv:)."),
                                "removed": {"type": "boolean", "description": "The copy was deleted or unlabelled."},
                                "readiness": {"type": "string", "enum": ["Ready", "Pending", "Failed"],
                                              "description": "The copy's readiness, for an object under a progressive rollout."},
                                "readinessReason": text("Why it is not ready."),
                                "reportedAt": {"type": "string", "format": "date-time"},
                            },
                        },
                    },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    fn fed(data: &str) -> Value {
        json!({"kind": "FederatedConfigMap",
               "metadata": {"name": "web", "namespace": "shop", "uid": "u1"},
               "spec": {"template": {"data": {"k": data}}, "placement": {"clusters": [{"name": "edge"}]}}})
    }

    fn report(fed: &Value, status: ClusterStatus, version: Option<&str>) -> Report {
        Report {
            cluster: "edge".into(),
            type_name: "configmaps".into(),
            key: ObjectKey {
                namespace: "shop".into(),
                name: "web".into(),
            },
            uid: "u1".into(),
            template_version: template_version(fed).unwrap(),
            overrides_version: overrides_version(fed).unwrap(),
            status,
            version: version.map(str::to_string),
            removed: false,
            readiness: None,
            reported_at: "2026-12-06T10:00:00Z".into(),
        }
    }

    #[test]
    fn a_report_round_trips_through_its_object() {
        let f = fed("v");
        let r = report(&f, ClusterStatus::Ok, Some("rv:7"));
        let o = r.to_object("fed-pull-edge");
        assert_eq!(o["metadata"]["name"], "configmaps.shop.web");
        assert_eq!(o["metadata"]["labels"][CLUSTER_LABEL], "edge");
        assert_eq!(Report::parse(&o), Some(r.clone()));
        let later = Report {
            reported_at: "2026-12-06T11:00:00Z".into(),
            ..r.clone()
        };
        assert!(later.says_the_same_as(&r));
        assert!(!report(&f, ClusterStatus::Ok, Some("rv:8")).says_the_same_as(&r));
        assert!(Report::parse(&json!({"spec": {"cluster": "edge"}})).is_none());
        for readiness in [
            Readiness::Ready,
            Readiness::Pending("0/3 available".into()),
            Readiness::Failed("ProgressDeadlineExceeded".into()),
        ] {
            let with = Report {
                readiness: Some(readiness),
                ..r.clone()
            };
            let o = with.to_object("fed-pull-edge");
            assert_eq!(Report::parse(&o), Some(with.clone()));
            assert!(!with.says_the_same_as(&r), "a readiness change is news");
        }
    }

    #[test]
    fn a_report_is_current_only_for_the_same_object_and_hashes() {
        let f = fed("v");
        let r = report(&f, ClusterStatus::Ok, Some("rv:7"));
        assert!(r.is_current_for(&f));
        assert!(!r.is_current_for(&fed("changed")), "a new template");
        let mut again = f.clone();
        again["metadata"]["uid"] = json!("u2");
        assert!(
            !r.is_of(&again),
            "an object of the same name, created again"
        );
    }

    #[test]
    fn a_report_in_another_members_namespace_is_ignored() {
        let f = fed("v");
        let r = report(&f, ClusterStatus::Ok, Some("rv:7"));
        let ns = |c: &str| format!("fed-pull-{c}");
        let own = Reports::of(&[r.to_object("fed-pull-edge")], ns);
        assert_eq!(own.len(), 1);
        let forged = Reports::of(&[r.to_object("fed-pull-other")], ns);
        assert!(
            forged.is_empty(),
            "an agent cannot speak for another member"
        );
    }

    #[test]
    fn pulled_members_give_statuses_versions_and_what_still_holds_a_copy() {
        let f = fed("v");
        let mut reports = Reports::default();
        reports.insert(report(&f, ClusterStatus::Ok, Some("rv:7")));
        let stale = Report {
            cluster: "late".into(),
            template_version: "old".into(),
            ..report(&f, ClusterStatus::Ok, Some("rv:3"))
        };
        reports.insert(stale);
        let members = [
            ("edge".to_string(), false),
            ("late".to_string(), false),
            ("quiet".to_string(), true),
            ("new".to_string(), false),
        ];
        let pulled = Pulled::of(&f, "configmaps", &members, &reports);
        let selected: BTreeSet<String> = ["edge", "late", "quiet", "new"].map(String::from).into();
        let statuses: Vec<_> = pulled.statuses(&selected).collect();
        assert_eq!(
            statuses,
            [
                ("edge", ClusterStatus::Ok),
                ("late", ClusterStatus::Ok),
                ("quiet", ClusterStatus::ClusterNotReady)
            ]
        );
        assert_eq!(
            pulled.versions(&f),
            BTreeMap::from([("edge".to_string(), "rv:7".to_string())]),
            "a stale report gives no version"
        );
        assert_eq!(pulled.holding(), ["edge", "late", "quiet"]);
        let mut removed = report(&f, ClusterStatus::Ok, None);
        removed.removed = true;
        reports.insert(removed);
        let pulled = Pulled::of(&f, "configmaps", &members, &reports);
        assert_eq!(pulled.holding(), ["late", "quiet"]);
    }

    #[test]
    fn an_agent_records_its_own_version_in_the_shape_of_a_propagated_version() {
        let f = fed("v");
        let r = report(&f, ClusterStatus::Ok, Some("rv:7"));
        let pv = json!({"metadata": {"name": "configmap-web", "annotations": {"a": "b"}},
                        "status": {"templateVersion": "old", "clusterVersions": []}});
        let mine = agent_versions(Some(&pv), &r).unwrap();
        assert_eq!(mine["metadata"]["annotations"]["a"], "b");
        let status = Some(&mine["status"]);
        let (t, o) = (
            template_version(&f).unwrap(),
            overrides_version(&f).unwrap(),
        );
        assert_eq!(
            crate::propagation::version::recorded_version(status, &t, &o, "edge").as_deref(),
            Some("rv:7")
        );
        assert!(agent_versions(None, &report(&f, ClusterStatus::UpdateFailed, None)).is_none());
    }

    #[test]
    fn the_crd_names_the_group_and_kind() {
        let c = crd();
        assert_eq!(
            c["metadata"]["name"],
            "propagationreports.kubefedctl.kubefed.io"
        );
        assert_eq!(c["spec"]["names"]["kind"], KIND);
    }
}
