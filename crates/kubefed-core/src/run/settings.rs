//! A KubeFedConfig → the settings a run uses. The live run, the watch and
//! the offline render all call [`settings`], so a KubeFedConfig means the
//! same thing in each (upstream reads it once at start-up:
//! `cmd/controller-manager/app/controller-manager.go`
//! `setOptionsByKubeFedConfig`, after `ValidateKubeFedConfig`).

use serde_json::Value;
use std::time::Duration;

use crate::cluster::membership::Scope;
use crate::propagation::member::SyncSettings;
use crate::run::lease::{LeaderLock, LeaseTimings};

/// The feature gates KubeFed v0.10 knows, with their defaults
/// (`pkg/features/features.go`).
pub const FEATURE_GATES: &[(&str, bool)] = &[
    ("PushReconciler", true),
    ("SchedulerPreferences", true),
    ("RawResourceStatusCollection", false),
];

/// What a KubeFedConfig changes in a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    pub scope: Scope,
    pub sync: SyncSettings,
    /// `SchedulerPreferences`: ReplicaSchedulingPreferences are scheduled.
    pub scheduler_preferences: bool,
    /// `PushReconciler`: federated objects are propagated at all.
    pub push_reconciler: bool,
    /// `RawResourceStatusCollection`.
    pub raw_resource_status_collection: bool,
    /// `clusterHealthCheck`.
    pub health: HealthCheck,
    /// `leaderElect`'s timings (our own run lock is always a Lease).
    pub leader_elect: LeaseTimings,
    /// `leaderElect.resourceLock`: where KubeFed's own controller-manager
    /// keeps its leader lock, the one a run checks before it writes.
    pub kubefed_leader_lock: LeaderLock,
    /// `syncController.maxConcurrentReconciles`: the default of
    /// `--concurrency` under `--watch`; None when the config does not say.
    pub max_concurrent_reconciles: Option<usize>,
}

/// How members are probed (`spec.clusterHealthCheck`; upstream's defaults
/// from `pkg/apis/core/v1beta1/defaults/defaults.go`). `--probe-interval`
/// and `--probe-timeout` override period and timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HealthCheck {
    pub period: Duration,
    pub timeout: Duration,
    /// Failed probes in a row before a ready member turns not ready (`--watch`).
    pub failure_threshold: u32,
    /// Answered probes in a row before a not-ready member turns ready (`--watch`).
    pub success_threshold: u32,
}

impl Default for HealthCheck {
    fn default() -> HealthCheck {
        HealthCheck {
            period: Duration::from_secs(10),
            timeout: Duration::from_secs(3),
            failure_threshold: 3,
            success_threshold: 1,
        }
    }
}

impl Default for Settings {
    /// A host without a KubeFedConfig: cluster-scoped, upstream's defaults.
    fn default() -> Settings {
        Settings {
            scope: Scope::Cluster,
            sync: SyncSettings {
                adopt_resources: true,
                force_conflicts: false,
                report_only: false,
            },
            scheduler_preferences: gate_default("SchedulerPreferences"),
            push_reconciler: gate_default("PushReconciler"),
            raw_resource_status_collection: gate_default("RawResourceStatusCollection"),
            health: HealthCheck::default(),
            leader_elect: LeaseTimings::default(),
            kubefed_leader_lock: LeaderLock::parse(None),
            max_concurrent_reconciles: None,
        }
    }
}

fn gate_default(name: &str) -> bool {
    FEATURE_GATES
        .iter()
        .find(|(n, _)| *n == name)
        .is_some_and(|(_, on)| *on)
}

impl Settings {
    /// A type's member statuses are collected into `status.clusters[].
    /// remoteStatus`: its FederatedTypeConfig says `statusCollection:
    /// Enabled` and the `RawResourceStatusCollection` gate is on (upstream's
    /// `pkg/controller/sync/controller.go`).
    pub fn collects_remote_status(&self, type_collects: bool) -> bool {
        self.raw_resource_status_collection && type_collects
    }

    /// FederatedServiceStatus objects are written for a type that qualifies
    /// (`core::service_status::applies`) only while the gate is off
    /// (`pkg/controller/federatedtypeconfig/controller.go`:
    /// `statusControllerEnabled := !RawResourceStatusCollection &&
    /// isEnabledFederatedServiceStatusCollection`): the gate's remote
    /// statuses replace them.
    pub fn writes_service_status(&self, type_qualifies: bool) -> bool {
        type_qualifies && !self.raw_resource_status_collection
    }

    /// The one namespace federated objects are read from: a namespace-scoped
    /// federation sees its own namespace only, whatever was asked; a
    /// cluster-scoped one reads `requested` (`-n`), or every namespace.
    pub fn objects_namespace(
        &self,
        kubefed_namespace: &str,
        requested: Option<&str>,
    ) -> Option<String> {
        objects_namespace(self.scope, kubefed_namespace, requested).map(str::to_string)
    }
}

/// [`Settings::objects_namespace`] for a federation of `scope`.
pub fn objects_namespace<'a>(
    scope: Scope,
    kubefed_namespace: &'a str,
    requested: Option<&'a str>,
) -> Option<&'a str> {
    match scope {
        Scope::Namespaced => Some(kubefed_namespace),
        Scope::Cluster => requested,
    }
}

/// The first field of a KubeFedConfig that is not valid: its path
/// (`spec.leaderElect.leaseDuration`) and what is wrong with it.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error("{field}: {problem}")]
pub struct SettingsError {
    pub field: String,
    pub problem: String,
}

impl SettingsError {
    fn at(field: impl Into<String>, problem: impl Into<String>) -> SettingsError {
        SettingsError {
            field: field.into(),
            problem: problem.into(),
        }
    }
}

/// A KubeFedConfig's `spec` (None: there is none) → settings, or the first
/// field that is not valid, named by its path.
pub fn settings(spec: Option<&Value>) -> Result<Settings, SettingsError> {
    let mut s = Settings::default();
    let Some(spec) = spec else {
        return Ok(s);
    };
    if !spec.is_object() {
        return Err(SettingsError::at("spec", "must be an object"));
    }
    match spec.get("scope") {
        None | Some(Value::Null) => {}
        Some(v) => {
            s.scope = v.as_str().and_then(Scope::parse).ok_or_else(|| {
                SettingsError::at(
                    "spec.scope",
                    format!("must be Cluster or Namespaced, not {v}"),
                )
            })?
        }
    }
    match &spec["syncController"]["adoptResources"] {
        Value::Null => {}
        v => s.sync.adopt_resources = enabled(v, "spec.syncController.adoptResources")?,
    }
    s.health = health_check(&spec["clusterHealthCheck"])?;
    s.leader_elect = leader_elect(&spec["leaderElect"])?;
    s.kubefed_leader_lock = LeaderLock::parse(spec["leaderElect"]["resourceLock"].as_str());
    match &spec["syncController"]["maxConcurrentReconciles"] {
        Value::Null => {}
        n => {
            s.max_concurrent_reconciles = Some(
                n.as_u64()
                    .and_then(|n| usize::try_from(n).ok())
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| {
                        SettingsError::at(
                            "spec.syncController.maxConcurrentReconciles",
                            format!("must be a whole number of at least 1, not {n}"),
                        )
                    })?,
            )
        }
    }
    match &spec["featureGates"] {
        Value::Null => {}
        Value::Array(gates) => {
            for (i, gate) in gates.iter().enumerate() {
                let at = format!("spec.featureGates[{i}]");
                let name = gate["name"].as_str().unwrap_or("");
                let on = enabled(&gate["configuration"], &format!("{at}.configuration"))?;
                match name {
                    "PushReconciler" => s.push_reconciler = on,
                    "SchedulerPreferences" => s.scheduler_preferences = on,
                    "RawResourceStatusCollection" => s.raw_resource_status_collection = on,
                    _ => {
                        let known: Vec<&str> = FEATURE_GATES.iter().map(|(n, _)| *n).collect();
                        return Err(SettingsError::at(
                            format!("{at}.name"),
                            format!(
                                "unknown feature gate {name:?} (known: {})",
                                known.join(", ")
                            ),
                        ));
                    }
                }
            }
        }
        _ => return Err(SettingsError::at("spec.featureGates", "must be a list")),
    }
    Ok(s)
}

/// A positive duration at `spec.<section>.<field>` of `v` (the section), or `default`.
fn duration_field(
    v: &Value,
    section: &str,
    field: &str,
    default: Duration,
) -> Result<Duration, SettingsError> {
    let at = || format!("spec.{section}.{field}");
    match &v[field] {
        Value::Null => Ok(default),
        Value::String(text) => crate::time::parse_duration(text)
            .ok()
            .filter(|d| !d.is_zero())
            .ok_or_else(|| SettingsError::at(at(), format!("{text:?} is not a positive duration"))),
        other => Err(SettingsError::at(
            at(),
            format!("must be a duration such as \"10s\", not {other}"),
        )),
    }
}

/// `spec.leaderElect`, validated as upstream's `ValidateKubeFedConfig`
/// (`pkg/apis/core/v1beta1/validation/validation.go`): the lease outlasts
/// the renew deadline, which outlasts the retry period times client-go's
/// jitter factor 1.2.
fn leader_elect(v: &Value) -> Result<LeaseTimings, SettingsError> {
    let mut t = LeaseTimings::default();
    if v.is_null() {
        return Ok(t);
    }
    t.duration = duration_field(v, "leaderElect", "leaseDuration", t.duration)?;
    t.renew_deadline = duration_field(v, "leaderElect", "renewDeadline", t.renew_deadline)?;
    t.retry_period = duration_field(v, "leaderElect", "retryPeriod", t.retry_period)?;
    if t.duration <= t.renew_deadline {
        return Err(SettingsError::at(
            "spec.leaderElect.leaseDuration",
            format!(
                "{:?} must be greater than renewDeadline {:?}",
                t.duration, t.renew_deadline
            ),
        ));
    }
    if t.renew_deadline.as_secs_f64() <= t.retry_period.as_secs_f64() * 1.2 {
        return Err(SettingsError::at(
            "spec.leaderElect.renewDeadline",
            format!(
                "{:?} must be greater than retryPeriod*JitterFactor(1.2) ({:?}*1.2)",
                t.renew_deadline, t.retry_period
            ),
        ));
    }
    Ok(t)
}

/// `spec.clusterHealthCheck`, defaults where a field is absent.
fn health_check(v: &Value) -> Result<HealthCheck, SettingsError> {
    let mut h = HealthCheck::default();
    if v.is_null() {
        return Ok(h);
    }
    let duration =
        |field: &str, default: Duration| duration_field(v, "clusterHealthCheck", field, default);
    let count = |field: &str, default: u32| match &v[field] {
        Value::Null => Ok(default),
        n => n
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .filter(|n| *n >= 1)
            .ok_or_else(|| {
                SettingsError::at(
                    format!("spec.clusterHealthCheck.{field}"),
                    format!("must be a whole number of at least 1, not {n}"),
                )
            }),
    };
    h.period = duration("period", h.period)?;
    h.timeout = duration("timeout", h.timeout)?;
    h.failure_threshold = count("failureThreshold", h.failure_threshold)?;
    h.success_threshold = count("successThreshold", h.success_threshold)?;
    Ok(h)
}

/// `Enabled` or `Disabled`, as KubeFed's API spells every switch.
fn enabled(v: &Value, at: &str) -> Result<bool, SettingsError> {
    match v.as_str() {
        Some("Enabled") => Ok(true),
        Some("Disabled") => Ok(false),
        _ => Err(SettingsError::at(
            at,
            format!("must be Enabled or Disabled, not {v}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn remote_statuses_and_service_statuses_take_turns_on_the_gate() {
        let off = Settings::default();
        let on = Settings {
            raw_resource_status_collection: true,
            ..Settings::default()
        };
        assert!(on.collects_remote_status(true));
        assert!(!on.collects_remote_status(false));
        assert!(!off.collects_remote_status(true));
        assert!(off.writes_service_status(true));
        assert!(
            !on.writes_service_status(true),
            "the gate's remote statuses replace them"
        );
        assert!(!off.writes_service_status(false));
    }

    #[test]
    fn settings_from_configs() {
        let cases = [
            (
                "no config: upstream defaults",
                None,
                Ok(Settings::default()),
            ),
            ("empty spec", Some(json!({})), Ok(Settings::default())),
            (
                "namespaced, adoption off, schedulers off",
                Some(json!({
                    "scope": "Namespaced",
                    "syncController": {"adoptResources": "Disabled"},
                    "featureGates": [
                        {"name": "SchedulerPreferences", "configuration": "Disabled"},
                        {"name": "RawResourceStatusCollection", "configuration": "Enabled"}
                    ]
                })),
                Ok(Settings {
                    scope: Scope::Namespaced,
                    sync: SyncSettings {
                        adopt_resources: false,
                        force_conflicts: false,
                        report_only: false,
                    },
                    scheduler_preferences: false,
                    push_reconciler: true,
                    raw_resource_status_collection: true,
                    health: HealthCheck::default(),
                    leader_elect: LeaseTimings::default(),
                    kubefed_leader_lock: LeaderLock::ConfigMaps,
                    max_concurrent_reconciles: None,
                }),
            ),
            (
                "bad scope",
                Some(json!({"scope": "Everywhere"})),
                Err("spec.scope: must be Cluster or Namespaced, not \"Everywhere\""),
            ),
            (
                "bad adoption",
                Some(json!({"syncController": {"adoptResources": "yes"}})),
                Err("spec.syncController.adoptResources: must be Enabled or Disabled, not \"yes\""),
            ),
            (
                "unknown gate",
                Some(json!({"featureGates": [{"name": "Teleport", "configuration": "Enabled"}]})),
                Err(
                    "spec.featureGates[0].name: unknown feature gate \"Teleport\" (known: PushReconciler, SchedulerPreferences, RawResourceStatusCollection)",
                ),
            ),
            (
                "gate without configuration",
                Some(json!({"featureGates": [{"name": "PushReconciler"}]})),
                Err("spec.featureGates[0].configuration: must be Enabled or Disabled, not null"),
            ),
            (
                "health check",
                Some(
                    json!({"clusterHealthCheck": {"period": "30s", "timeout": "1500ms", "failureThreshold": 2}}),
                ),
                Ok(Settings {
                    health: HealthCheck {
                        period: Duration::from_secs(30),
                        timeout: Duration::from_millis(1500),
                        failure_threshold: 2,
                        success_threshold: 1,
                    },
                    ..Settings::default()
                }),
            ),
            (
                "a health check period that is not a duration",
                Some(json!({"clusterHealthCheck": {"period": "soon"}})),
                Err("spec.clusterHealthCheck.period: \"soon\" is not a positive duration"),
            ),
            (
                "a zero threshold",
                Some(json!({"clusterHealthCheck": {"successThreshold": 0}})),
                Err(
                    "spec.clusterHealthCheck.successThreshold: must be a whole number of at least 1, not 0",
                ),
            ),
            (
                "leader election and sync workers",
                Some(json!({
                    "leaderElect": {"leaseDuration": "30s", "renewDeadline": "20s", "retryPeriod": "5s", "resourceLock": "configmaps"},
                    "syncController": {"maxConcurrentReconciles": 4}
                })),
                Ok(Settings {
                    leader_elect: LeaseTimings {
                        duration: Duration::from_secs(30),
                        renew_deadline: Duration::from_secs(20),
                        retry_period: Duration::from_secs(5),
                    },
                    max_concurrent_reconciles: Some(4),
                    ..Settings::default()
                }),
            ),
            (
                "KubeFed's controller-manager on a Lease",
                Some(json!({"leaderElect": {"resourceLock": "leases"}})),
                Ok(Settings {
                    kubefed_leader_lock: LeaderLock::Leases,
                    ..Settings::default()
                }),
            ),
            (
                "KubeFed's controller-manager on Endpoints",
                Some(json!({"leaderElect": {"resourceLock": "endpoints"}})),
                Ok(Settings {
                    kubefed_leader_lock: LeaderLock::Endpoints,
                    ..Settings::default()
                }),
            ),
            (
                "a lease no longer than its renew deadline",
                Some(json!({"leaderElect": {"leaseDuration": "10s"}})),
                Err("spec.leaderElect.leaseDuration: 10s must be greater than renewDeadline 10s"),
            ),
            (
                "a renew deadline within the jittered retry period",
                Some(json!({"leaderElect": {"renewDeadline": "6s", "retryPeriod": "5s"}})),
                Err(
                    "spec.leaderElect.renewDeadline: 6s must be greater than retryPeriod*JitterFactor(1.2) (5s*1.2)",
                ),
            ),
            (
                "no sync workers",
                Some(json!({"syncController": {"maxConcurrentReconciles": 0}})),
                Err(
                    "spec.syncController.maxConcurrentReconciles: must be a whole number of at least 1, not 0",
                ),
            ),
            (
                "gates not a list",
                Some(json!({"featureGates": {"PushReconciler": true}})),
                Err("spec.featureGates: must be a list"),
            ),
        ];
        for (name, spec, want) in cases {
            let got = settings(spec.as_ref()).map_err(|e| e.to_string());
            assert_eq!(got, want.map_err(str::to_string), "{name}");
        }
    }

    #[test]
    fn an_invalid_field_is_named_by_its_path() {
        let e = settings(Some(
            &json!({"leaderElect": {"leaseDuration": "1s", "renewDeadline": "2s"}}),
        ))
        .unwrap_err();
        assert_eq!(e.field, "spec.leaderElect.leaseDuration");
        assert!(
            e.problem.contains("must be greater than renewDeadline"),
            "{e}"
        );
    }

    #[test]
    fn the_namespace_objects_are_read_from() {
        let cluster = Settings::default();
        let namespaced = Settings {
            scope: Scope::Namespaced,
            ..Settings::default()
        };
        assert_eq!(
            cluster.objects_namespace("kube-federation-system", None),
            None
        );
        assert_eq!(
            cluster.objects_namespace("kube-federation-system", Some("shop")),
            Some("shop".into())
        );
        assert_eq!(
            namespaced.objects_namespace("fed", Some("shop")),
            Some("fed".into())
        );
        assert_eq!(
            namespaced.objects_namespace("fed", None),
            Some("fed".into())
        );
    }
}
