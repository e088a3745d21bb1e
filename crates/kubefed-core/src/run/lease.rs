//! The run lock's rules: who holds a `coordination.k8s.io/v1` Lease, whether
//! it has expired, and what a run that wants it should do. Time is an
//! argument (seconds since the epoch); the shell reads and writes the Lease.

use serde_json::{Value, json};
use std::time::Duration;

use crate::time::{parse_rfc3339, rfc3339};

/// The Lease a whole-federation reconcile takes in the federation namespace.
pub const RECONCILE_LEASE: &str = "kubefedctl-reconcile";

/// How long a lease lasts without renewal by default; the holder renews it
/// every third.
pub const LEASE_SECONDS: i64 = 15;

/// The lock's timings: KubeFedConfig `spec.leaderElect` (`core::settings`),
/// these defaults without one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseTimings {
    /// `leaseDuration`: how long a lease lasts without renewal.
    pub duration: Duration,
    /// `renewDeadline`: a holder that could not renew for this long stops
    /// writing (10 s of 15 s, as KubeFed's default): by the time anyone may
    /// take the lease over, it has been idle 5 s.
    pub renew_deadline: Duration,
    /// `retryPeriod`: how often a holder that lost contact tries again.
    /// Upstream's default is 5 s; ours 2 s, so a holder resumes sooner.
    pub retry_period: Duration,
}

impl Default for LeaseTimings {
    fn default() -> LeaseTimings {
        LeaseTimings {
            duration: Duration::from_secs(LEASE_SECONDS as u64),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

impl LeaseTimings {
    /// `leaseDurationSeconds` as the Lease carries it (whole seconds, at least 1).
    pub fn lease_seconds(&self) -> i64 {
        (self.duration.as_secs_f64().ceil() as i64).max(1)
    }

    /// How often a holder renews: a third of the duration, as before.
    pub fn renew_every(&self) -> Duration {
        (self.duration / 3).max(Duration::from_millis(100))
    }
}

/// Who a run is, as the Lease's `holderIdentity` says it:
/// `ci-runner-7 (pid 4121, job 88231)`.
pub fn identity(host: &str, pid: u32, job: Option<&str>) -> String {
    match job.filter(|j| !j.is_empty()) {
        Some(job) => format!("{host} (pid {pid}, job {job})"),
        None => format!("{host} (pid {pid})"),
    }
}

/// What a run that wants the lease does about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Acquire {
    /// No Lease yet: create it.
    Create,
    /// Free (released, or expired since `expired_for` seconds): take it.
    Take { previous: Option<(String, i64)> },
    /// Someone holds it, since `held_for` seconds.
    Held { holder: String, held_for: i64 },
}

/// Seconds since the epoch as the MicroTime a Lease carries.
pub fn micro_time(secs: i64) -> String {
    rfc3339(secs).replace('Z', ".000000Z")
}

/// The decision for `lease` (the object, if any) at `now`.
pub fn acquire(lease: Option<&Value>, now: i64) -> Acquire {
    let Some(lease) = lease else {
        return Acquire::Create;
    };
    let spec = lease.get("spec").cloned().unwrap_or(Value::Null);
    let holder = spec
        .get("holderIdentity")
        .and_then(Value::as_str)
        .unwrap_or("");
    if holder.is_empty() {
        return Acquire::Take { previous: None };
    }
    let time = |k: &str| spec.get(k).and_then(Value::as_str).and_then(parse_rfc3339);
    let duration = spec
        .get("leaseDurationSeconds")
        .and_then(Value::as_i64)
        .unwrap_or(LEASE_SECONDS);
    let renewed = time("renewTime").or(time("acquireTime")).unwrap_or(0);
    let expires = renewed + duration;
    if expires < now {
        return Acquire::Take {
            previous: Some((holder.to_string(), now - expires)),
        };
    }
    Acquire::Held {
        holder: holder.to_string(),
        held_for: now - time("acquireTime").unwrap_or(renewed),
    }
}

/// The name of KubeFed's own controller-manager leader lock in the
/// federation namespace (`cmd/controller-manager/app/leaderelection`).
pub const KUBEFED_LEADER_LOCK: &str = "kubefed-controller-manager";

/// The objects KubeFed's controller-manager keeps its leader lock in, as
/// its KubeFedConfig's `spec.leaderElect.resourceLock` names them (passed
/// to client-go's `resourcelock.New` by upstream's
/// `cmd/controller-manager/app/leaderelection/leaderelection.go`). A check
/// for a live controller-manager reads these and no others: reading a v1
/// Endpoints lock that nobody uses makes 1.33+ servers warn about an API
/// only this tool touched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LeaderLock {
    /// `configmaps`: KubeFed v0.10's default (`pkg/apis/core/v1beta1/defaults`).
    ConfigMaps,
    /// `endpoints`.
    Endpoints,
    /// `leases`.
    Leases,
    /// `configmapsleases`: client-go's migration lock, kept in both.
    ConfigMapsLeases,
    /// `endpointsleases`: likewise.
    EndpointsLeases,
    /// A value client-go does not know: KubeFed's controller-manager
    /// cannot run with it, but a check stays safe and reads all three.
    Unknown,
}

/// Which of the three objects a [`LeaderLock`] keeps its record in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockObject {
    Lease,
    ConfigMap,
    Endpoints,
}

impl LeaderLock {
    /// `resourceLock`'s value (None: absent, KubeFed's default).
    pub fn parse(value: Option<&str>) -> LeaderLock {
        match value.unwrap_or("configmaps") {
            "configmaps" => LeaderLock::ConfigMaps,
            "endpoints" => LeaderLock::Endpoints,
            "leases" => LeaderLock::Leases,
            "configmapsleases" => LeaderLock::ConfigMapsLeases,
            "endpointsleases" => LeaderLock::EndpointsLeases,
            _ => LeaderLock::Unknown,
        }
    }

    /// The objects to read, the Lease first where there is one.
    pub fn objects(self) -> &'static [LockObject] {
        use LockObject::*;
        match self {
            LeaderLock::ConfigMaps => &[ConfigMap],
            LeaderLock::Endpoints => &[Endpoints],
            LeaderLock::Leases => &[Lease],
            LeaderLock::ConfigMapsLeases => &[Lease, ConfigMap],
            LeaderLock::EndpointsLeases => &[Lease, Endpoints],
            LeaderLock::Unknown => &[Lease, ConfigMap, Endpoints],
        }
    }
}

/// Where client-go's ConfigMap and Endpoints locks keep their record.
pub const LEADER_ANNOTATION: &str = "control-plane.alpha.kubernetes.io/leader";

/// The live holder of a leader-election record (client-go's
/// `LeaderElectionRecord`: a Lease's spec, or the JSON of a ConfigMap or
/// Endpoints lock's annotation), at `now`: someone whose lease has not
/// expired. KubeFed's controller-manager holding its lock means it is
/// propagating this federation.
pub fn live_holder(record: &Value, now: i64) -> Option<String> {
    match acquire(Some(&serde_json::json!({ "spec": record })), now) {
        Acquire::Held { holder, .. } => Some(holder),
        _ => None,
    }
}

/// What a holder finds when it reads the lease again after its renewal was
/// refused (the lease changed since its last write).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Renewal {
    /// Still ours and never taken over in between (our own renewal that was
    /// applied but not answered changes the lease too): renew.
    Ours,
    /// Someone else took it (or released or deleted it) meanwhile: whatever
    /// this holder planned may be stale, and another may be writing.
    Lost { holder: String },
}

/// The decision for a holder `me` that took `lease` when it had
/// `transitions` transitions.
pub fn renewal(lease: Option<&Value>, me: &str, transitions: i64) -> Renewal {
    let Some(lease) = lease else {
        return Renewal::Lost {
            holder: "nobody (the lease was deleted)".into(),
        };
    };
    let spec = lease.get("spec").cloned().unwrap_or(Value::Null);
    let holder = spec
        .get("holderIdentity")
        .and_then(Value::as_str)
        .unwrap_or("");
    let now = spec
        .get("leaseTransitions")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    if holder == me && now == transitions {
        return Renewal::Ours;
    }
    Renewal::Lost {
        holder: if holder.is_empty() {
            "nobody (the lease was released by another holder)".into()
        } else {
            holder.to_string()
        },
    }
}

/// The lease's transitions after `me` takes a lease whose current spec is
/// `spec` (a takeover of a holder counts one).
pub fn transitions_after_take(current: Option<&Value>) -> i64 {
    let spec = current.and_then(|l| l.get("spec"));
    let transitions = spec
        .and_then(|s| s.get("leaseTransitions"))
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let had_holder = spec
        .and_then(|s| s.get("holderIdentity"))
        .and_then(Value::as_str)
        .is_some_and(|h| !h.is_empty());
    transitions + i64::from(had_holder)
}

/// The Lease's spec when `me` takes it at `now` (`transitions` so far).
pub fn taken(me: &str, now: i64, transitions: i64, timings: &LeaseTimings) -> Value {
    json!({
        "holderIdentity": me,
        "leaseDurationSeconds": timings.lease_seconds(),
        "acquireTime": micro_time(now),
        "renewTime": micro_time(now),
        "leaseTransitions": transitions,
    })
}

/// `12s`, `3m4s`, `2h5m`: how long ago, for messages.
pub fn ago(secs: i64) -> String {
    let s = secs.max(0);
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{}s", s / 60, s % 60),
        _ => format!("{}h{}m", s / 3600, s % 3600 / 60),
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn kubefeds_leader_lock_is_read_only_where_its_config_keeps_it() {
        use LockObject::*;
        let objects = |v: Option<&str>| LeaderLock::parse(v).objects();
        // KubeFed v0.10's default when resourceLock is absent.
        assert_eq!(objects(None), &[ConfigMap]);
        assert_eq!(objects(Some("configmaps")), &[ConfigMap]);
        assert_eq!(objects(Some("leases")), &[Lease]);
        assert_eq!(objects(Some("endpoints")), &[Endpoints]);
        assert_eq!(objects(Some("configmapsleases")), &[Lease, ConfigMap]);
        assert_eq!(objects(Some("endpointsleases")), &[Lease, Endpoints]);
        // Only a value client-go does not know reads Endpoints unasked.
        assert_eq!(objects(Some("Leases")), &[Lease, ConfigMap, Endpoints]);
    }

    use super::*;

    #[test]
    fn kubefeds_own_lock_is_live_only_while_renewed() {
        let now = 1_000_000;
        let record = |holder: &str, renewed: i64| {
            serde_json::json!({"holderIdentity": holder, "leaseDurationSeconds": 15,
                "acquireTime": rfc3339(renewed - 100), "renewTime": rfc3339(renewed)})
        };
        assert_eq!(
            live_holder(&record("cm-1_abc", now - 5), now),
            Some("cm-1_abc".into())
        );
        assert_eq!(
            live_holder(&record("cm-1_abc", now - 60), now),
            None,
            "expired"
        );
        assert_eq!(live_holder(&record("", now), now), None, "released");
        assert_eq!(live_holder(&serde_json::json!({}), now), None);
    }

    fn lease(holder: &str, acquired: i64, renewed: i64) -> Value {
        json!({"metadata": {"name": RECONCILE_LEASE},
               "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15,
                        "acquireTime": micro_time(acquired), "renewTime": micro_time(renewed)}})
    }

    #[test]
    fn who_gets_the_lease() {
        let now = 1_800_000_000;
        assert_eq!(acquire(None, now), Acquire::Create);
        assert_eq!(
            acquire(Some(&lease("ci-7 (pid 1)", now - 12, now - 2)), now),
            Acquire::Held {
                holder: "ci-7 (pid 1)".into(),
                held_for: 12
            },
            "renewed 2s ago: held since it was acquired"
        );
        assert_eq!(
            acquire(Some(&lease("ci-7 (pid 1)", now - 100, now - 20)), now),
            Acquire::Take {
                previous: Some(("ci-7 (pid 1)".into(), 5))
            },
            "a holder that stopped renewing 20s ago (15s lease) has crashed"
        );
        assert_eq!(
            acquire(Some(&lease("", now - 100, now - 1)), now),
            Acquire::Take { previous: None },
            "released"
        );
        let no_spec = json!({"metadata": {"name": RECONCILE_LEASE}});
        assert_eq!(
            acquire(Some(&no_spec), now),
            Acquire::Take { previous: None }
        );
    }

    #[test]
    fn a_holder_back_from_an_outage_renews_only_what_nobody_took() {
        let mut ours = lease("ci-7 (pid 1)", 100, 110);
        ours["spec"]["leaseTransitions"] = json!(2);
        assert_eq!(
            renewal(Some(&ours), "ci-7 (pid 1)", 2),
            Renewal::Ours,
            "unchanged but for our own renewals"
        );
        assert_eq!(
            renewal(Some(&ours), "ci-7 (pid 1)", 1),
            Renewal::Lost {
                holder: "ci-7 (pid 1)".into()
            },
            "a transition since we took it: someone held it in between"
        );
        let mut taken = lease("ci-8 (pid 2)", 120, 125);
        taken["spec"]["leaseTransitions"] = json!(3);
        assert_eq!(
            renewal(Some(&taken), "ci-7 (pid 1)", 2),
            Renewal::Lost {
                holder: "ci-8 (pid 2)".into()
            }
        );
        assert_eq!(
            renewal(Some(&lease("", 120, 125)), "ci-7 (pid 1)", 0),
            Renewal::Lost {
                holder: "nobody (the lease was released by another holder)".into()
            }
        );
        assert!(matches!(
            renewal(None, "ci-7 (pid 1)", 0),
            Renewal::Lost { .. }
        ));
        assert_eq!(transitions_after_take(None), 0);
        assert_eq!(transitions_after_take(Some(&lease("", 1, 1))), 0);
        assert_eq!(transitions_after_take(Some(&taken)), 4);
        let t = LeaseTimings::default();
        assert!(t.renew_deadline < t.duration && t.retry_period < t.renew_deadline);
    }

    #[test]
    fn identities_and_times_read_well() {
        assert_eq!(
            identity("ci-runner-7", 4121, Some("88231")),
            "ci-runner-7 (pid 4121, job 88231)"
        );
        assert_eq!(identity("laptop", 9, None), "laptop (pid 9)");
        assert_eq!(identity("laptop", 9, Some("")), "laptop (pid 9)");
        assert_eq!(micro_time(0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(
            parse_rfc3339(&micro_time(1_800_000_000)),
            Some(1_800_000_000)
        );
        assert_eq!(ago(12), "12s");
        assert_eq!(ago(184), "3m4s");
        assert_eq!(ago(7500), "2h5m");
    }
}
