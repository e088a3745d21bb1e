//! The in-cluster reconciler `init --reconciler` installs: a ServiceAccount,
//! the least privilege `kubefedctl reconcile` needs on the host, and the
//! CronJob or Job that runs it (sharded as an Indexed Job where the API
//! server has them).
//!
//! Every rule below names the requests the reconcile makes (`src/sync`,
//! `src/clients/members.rs`); docs/in-cluster.md explains them one by one. No `*`
//! verb, resource or group: a type enabled later needs its rule added, which
//! `enable` and `disable` do when the reconciler is installed.

use crate::cluster::membership::Scope;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// ServiceAccount, Role and the bindings' name (in the federation namespace).
pub const RECONCILER: &str = "kubefedctl-reconciler";
/// The CronJob's or Job's name (shard suffix `-I-of-N` when one per shard).
pub const RECONCILE_JOB: &str = "kubefedctl-reconcile";
/// Label on everything `init --reconciler` writes.
pub const COMPONENT_LABEL: &str = "app.kubernetes.io/component";
pub const DEFAULT_SCHEDULE: &str = "*/5 * * * *";

/// How the reconciler runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// A CronJob, every `--schedule`.
    Cronjob,
    /// A one-off Job.
    Job,
    /// A Deployment of two replicas running `reconcile --watch --leader-elect`;
    /// with shards, a StatefulSet of two pods per shard.
    Deployment,
}

/// The port of `/healthz`, `/readyz` and `/metrics` in the Deployment.
pub const METRICS_PORT: u16 = 8080;

/// What the host's API server offers for batch workloads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Batch {
    /// `batch/v1` CronJob (Kubernetes 1.21+); else `batch/v1beta1`.
    pub cronjob_v1: bool,
    /// `completionMode: Indexed` (Kubernetes 1.22+, beta and on by default);
    /// else one CronJob or Job per shard.
    pub indexed_jobs: bool,
    /// `policy/v1` PodDisruptionBudget (Kubernetes 1.21+); else `policy/v1beta1`.
    pub pdb_v1: bool,
}

impl Batch {
    /// Current Kubernetes (what `-o yaml` writes for).
    pub const MODERN: Batch = Batch {
        cronjob_v1: true,
        indexed_jobs: true,
        pdb_v1: true,
    };

    /// From the server's `/version` (`major`, `minor` as it reports them,
    /// e.g. `"1"`, `"20+"`).
    pub fn for_version(major: &str, minor: &str) -> Batch {
        let num = |s: &str| s.trim_end_matches('+').parse::<u32>().unwrap_or(u32::MAX);
        let (major, minor) = (num(major), num(minor));
        let at_least = |m: u32| major > 1 || (major == 1 && minor >= m);
        Batch {
            cronjob_v1: at_least(21),
            indexed_jobs: at_least(22),
            pdb_v1: at_least(21),
        }
    }
}

/// A schedule a CronJob would not take.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
#[error(
    "invalid schedule {0:?}: expected five cron fields (e.g. \"*/5 * * * *\") or a macro such as @hourly"
)]
pub struct ScheduleError(String);

/// A cron schedule as CronJobs take it: five fields, or a macro.
pub fn check_schedule(text: &str) -> Result<(), ScheduleError> {
    const MACROS: [&str; 7] = [
        "@yearly",
        "@annually",
        "@monthly",
        "@weekly",
        "@daily",
        "@midnight",
        "@hourly",
    ];
    let fields: Vec<&str> = text.split_whitespace().collect();
    let field_ok = |f: &&str| {
        f.chars()
            .all(|c| c.is_ascii_alphanumeric() || "*/,-?".contains(c))
    };
    if (fields.len() == 1 && MACROS.contains(&fields[0]))
        || (fields.len() == 5 && fields.iter().all(field_ok))
    {
        Ok(())
    } else {
        Err(ScheduleError(text.to_string()))
    }
}

/// A federated type the reconciler reads and writes on the host.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct FederatedResource {
    pub group: String,
    pub plural: String,
}

/// The verbs to read a resource: a watch also watches it.
fn read_verbs(watch: bool) -> &'static [&'static str] {
    if watch {
        &["get", "list", "watch"]
    } else {
        &["get", "list"]
    }
}

/// Everything `init --reconciler` needs to know.
#[derive(Clone, Debug)]
pub struct Reconciler<'a> {
    pub mode: Mode,
    pub namespace: &'a str,
    pub scope: Scope,
    pub image: &'a str,
    pub schedule: &'a str,
    pub shards: u32,
    /// Federated resources of every FederatedTypeConfig.
    pub types: Vec<FederatedResource>,
    /// The host has the multi-cluster DNS API.
    pub dns: bool,
    pub batch: Batch,
}

/// The ClusterRole and ClusterRoleBinding's name: one per federation.
pub fn cluster_role_name(namespace: &str) -> String {
    format!("{RECONCILER}:{namespace}")
}

fn rule(group: &str, resources: &[&str], verbs: &[&str]) -> Value {
    json!({"apiGroups": [group], "resources": resources, "verbs": verbs})
}

impl Reconciler<'_> {
    /// The Deployment watches what the Jobs list.
    fn watches(&self) -> bool {
        self.mode == Mode::Deployment
    }

    /// Everything to write, in order: ServiceAccount, ClusterRole, Role,
    /// ClusterRoleBinding, RoleBinding, then the CronJob(s) or Job(s).
    pub fn objects(&self) -> Vec<Value> {
        let mut out = vec![
            self.meta("v1", "ServiceAccount", RECONCILER, true),
            self.cluster_role(),
            self.role(),
            self.binding("ClusterRoleBinding", "ClusterRole"),
            self.binding("RoleBinding", "Role"),
        ];
        out.extend(self.workloads());
        out
    }

    fn meta(&self, api_version: &str, kind: &str, name: &str, namespaced: bool) -> Value {
        let mut metadata = json!({"name": name, "labels": {
            "app.kubernetes.io/name": "kubefedctl", COMPONENT_LABEL: "reconciler"}});
        if namespaced {
            metadata["namespace"] = json!(self.namespace);
        }
        json!({"apiVersion": api_version, "kind": kind, "metadata": metadata})
    }

    /// Rules on the federated objects, their PropagatedVersions, RSPs and
    /// DNS records: cluster-wide for a cluster-scoped federation, in the
    /// federation namespace for a namespace-scoped one.
    fn object_rules(&self) -> Vec<Value> {
        let mut by_group: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for t in &self.types {
            by_group.entry(&t.group).or_default().push(&t.plural);
        }
        let mut rules = Vec::new();
        for (group, mut plurals) in by_group {
            plurals.sort();
            plurals.dedup();
            let status: Vec<String> = plurals.iter().map(|p| format!("{p}/status")).collect();
            // get/list to observe; patch for the sync finalizer; update for
            // RSP placement and overrides; status for propagation status.
            let mut verbs = read_verbs(self.watches()).to_vec();
            verbs.extend(["patch", "update"]);
            rules.push(rule(group, &plurals, &verbs));
            let status: Vec<&str> = status.iter().map(String::as_str).collect();
            rules.push(rule(group, &status, &["update"]));
        }
        let versions = ["propagatedversions", "clusterpropagatedversions"];
        let mut verbs = read_verbs(self.watches()).to_vec();
        verbs.push("create");
        rules.push(rule("core.kubefed.io", &versions, &verbs));
        rules.push(rule(
            "core.kubefed.io",
            &[
                "propagatedversions/status",
                "clusterpropagatedversions/status",
            ],
            &["update", "patch"],
        ));
        // FederatedServiceStatus objects (core::service_status), only
        // where Services are federated.
        if self.types.iter().any(|t| t.plural == "federatedservices") {
            rules.push(rule(
                "core.kubefed.io",
                &["federatedservicestatuses"],
                &["get", "list", "create", "update"],
            ));
        }
        rules.push(rule(
            "scheduling.kubefed.io",
            &["replicaschedulingpreferences"],
            read_verbs(self.watches()),
        ));
        if self.dns {
            let records = ["servicednsrecords", "ingressdnsrecords"];
            rules.push(rule(
                "multiclusterdns.kubefed.io",
                &records,
                &["get", "list"],
            ));
            rules.push(rule(
                "multiclusterdns.kubefed.io",
                &["servicednsrecords/status", "ingressdnsrecords/status"],
                &["update"],
            ));
            rules.push(rule(
                "multiclusterdns.kubefed.io",
                &["dnsendpoints"],
                &["get", "create", "update"],
            ));
        }
        rules
    }

    fn cluster_role(&self) -> Value {
        let crds = [
            "kubefedclusters.core.kubefed.io",
            "servicednsrecords.multiclusterdns.kubefed.io",
        ];
        let mut rules = vec![
            // Is the host initialised, is DNS installed: two named CRDs only.
            json!({"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
                   "resourceNames": crds, "verbs": ["get"]}),
            // FederatedNamespaces are placed only where the host namespace exists.
            rule("", &["namespaces"], read_verbs(self.watches())),
        ];
        if self.scope == Scope::Cluster {
            rules.extend(self.object_rules());
            // Events on federated objects, in their namespaces.
            rules.push(rule("", &["events"], &["create", "patch"]));
        }
        let mut role = self.meta(
            "rbac.authorization.k8s.io/v1",
            "ClusterRole",
            &cluster_role_name(self.namespace),
            false,
        );
        role["rules"] = json!(rules);
        role
    }

    fn role(&self) -> Value {
        let mut rules = vec![
            // Member credentials: the Secrets `join` wrote.
            rule("", &["secrets"], &["get"]),
            // The run lock.
            rule(
                "coordination.k8s.io",
                &["leases"],
                &["get", "create", "patch"],
            ),
            rule(
                "core.kubefed.io",
                &["kubefedconfigs"],
                if self.watches() {
                    &["get", "list", "watch"]
                } else {
                    &["get"]
                },
            ),
            rule(
                "core.kubefed.io",
                &["federatedtypeconfigs", "kubefedclusters"],
                read_verbs(self.watches()),
            ),
            // Cluster health, version and topology.
            rule("core.kubefed.io", &["kubefedclusters/status"], &["patch"]),
            // The members' ClusterProfiles in the federation namespace (the
            // cluster inventory), kept true to the same probe.
            rule(
                crate::cluster::inventory::GROUP,
                &["clusterprofiles"],
                &["get"],
            ),
            rule(
                crate::cluster::inventory::GROUP,
                &["clusterprofiles/status"],
                &["patch"],
            ),
            // Events on KubeFedClusters (and a namespaced federation's objects).
            rule("", &["events"], &["create", "patch"]),
            // KubeFed's own controller-manager leader lock, read (only that
            // one) so that a run never propagates beside it.
            json!({"apiGroups": [""], "resources": ["configmaps", "endpoints"],
                   "resourceNames": [crate::run::lease::KUBEFED_LEADER_LOCK], "verbs": ["get"]}),
        ];
        if self.watches() {
            // The watch says which types it propagates, as KubeFed's controller.
            rules.push(rule(
                "core.kubefed.io",
                &["federatedtypeconfigs/status"],
                &["patch"],
            ));
            // The watch renews short-lived member tokens (`join --token-ttl`):
            // the new token into the member's host Secret, its lifetime onto
            // the KubeFedCluster. Secret names are generated: no resourceNames.
            rules.push(rule("", &["secrets"], &["patch"]));
            rules.push(rule("core.kubefed.io", &["kubefedclusters"], &["patch"]));
        }
        if self.dns {
            rules.push(rule("multiclusterdns.kubefed.io", &["domains"], &["list"]));
        }
        if self.scope == Scope::Namespaced {
            rules.extend(self.object_rules());
        }
        let mut role = self.meta("rbac.authorization.k8s.io/v1", "Role", RECONCILER, true);
        role["rules"] = json!(rules);
        role
    }

    fn binding(&self, kind: &str, role_kind: &str) -> Value {
        let (name, namespaced) = if kind == "ClusterRoleBinding" {
            (cluster_role_name(self.namespace), false)
        } else {
            (RECONCILER.to_string(), true)
        };
        let mut b = self.meta("rbac.authorization.k8s.io/v1", kind, &name, namespaced);
        b["roleRef"] =
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": role_kind, "name": name});
        b["subjects"] =
            json!([{"kind": "ServiceAccount", "name": RECONCILER, "namespace": self.namespace}]);
        b
    }

    /// The CronJob(s) or Job(s): one Indexed workload for all shards where
    /// the server has Indexed Jobs, else one per shard.
    fn workloads(&self) -> Vec<Value> {
        if self.mode == Mode::Deployment && self.shards > 1 {
            return self.sharded_watch();
        }
        if self.mode == Mode::Deployment {
            return vec![self.deployment()];
        }
        if self.shards <= 1 {
            return vec![self.workload(RECONCILE_JOB, None)];
        }
        if self.batch.indexed_jobs {
            return vec![self.workload(RECONCILE_JOB, Some(ShardArg::Indexed))];
        }
        (0..self.shards)
            .map(|i| {
                let name = format!("{RECONCILE_JOB}-{i}-of-{}", self.shards);
                self.workload(&name, Some(ShardArg::Fixed(i)))
            })
            .collect()
    }

    fn workload(&self, name: &str, shard: Option<ShardArg>) -> Value {
        let job_spec = self.job_spec(shard);
        match self.mode {
            Mode::Job | Mode::Deployment => {
                let mut job = self.meta("batch/v1", "Job", name, true);
                job["spec"] = job_spec;
                job
            }
            Mode::Cronjob => {
                let api = if self.batch.cronjob_v1 {
                    "batch/v1"
                } else {
                    "batch/v1beta1"
                };
                let mut cron = self.meta(api, "CronJob", name, true);
                cron["spec"] = json!({
                    "schedule": self.schedule,
                    // A run still going when the next is due: skip the next.
                    "concurrencyPolicy": "Forbid",
                    "successfulJobsHistoryLimit": 3,
                    "failedJobsHistoryLimit": 3,
                    "jobTemplate": {"metadata": {"labels": self.meta("", "", "", false)["metadata"]["labels"]},
                                    "spec": job_spec},
                });
                cron
            }
        }
    }

    /// Two replicas of `reconcile --watch --leader-elect`: one works, the
    /// other takes over within the lease's duration.
    fn deployment(&self) -> Value {
        let labels = self.meta("", "", "", false)["metadata"]["labels"].clone();
        let mut d = self.meta("apps/v1", "Deployment", RECONCILE_JOB, true);
        d["spec"] = json!({
            "replicas": 2,
            "selector": {"matchLabels": labels},
            "template": self.watch_pod(&labels, &[]),
        });
        d
    }

    /// `--shards N` of the watch: a StatefulSet of 2 × N pods, pod `I`
    /// running shard `I mod N` (`--shard-from-hostname`), so each shard has
    /// its own lease and a standby; its headless Service (a StatefulSet's
    /// pods are named through one) and a PodDisruptionBudget that lets one
    /// pod go at a time.
    fn sharded_watch(&self) -> Vec<Value> {
        let mut labels = self.meta("", "", "", false)["metadata"]["labels"].clone();
        labels["app.kubernetes.io/instance"] = json!(RECONCILE_JOB);
        let mut service = self.meta("v1", "Service", RECONCILE_JOB, true);
        service["spec"] = json!({
            "clusterIP": "None",
            "selector": labels,
            "ports": [{"name": "metrics", "port": METRICS_PORT, "targetPort": "metrics"}],
        });
        let mut set = self.meta("apps/v1", "StatefulSet", RECONCILE_JOB, true);
        let shard = ["--shard-from-hostname".to_string(), self.shards.to_string()];
        let mut pod = self.watch_pod(&labels, &shard);
        // The pod's name, whatever its host name is set to.
        pod["spec"]["containers"][0]["env"] = json!([{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]);
        set["spec"] = json!({
            "replicas": 2 * self.shards,
            "serviceName": RECONCILE_JOB,
            // Every pod at once: shards do not wait for each other.
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": labels},
            "template": pod,
        });
        let policy = if self.batch.pdb_v1 {
            "policy/v1"
        } else {
            "policy/v1beta1"
        };
        let mut pdb = self.meta(policy, "PodDisruptionBudget", RECONCILE_JOB, true);
        pdb["spec"] = json!({"maxUnavailable": 1, "selector": {"matchLabels": labels}});
        vec![service, set, pdb]
    }

    /// The pod of `reconcile --watch --leader-elect` (and `extra` flags).
    fn watch_pod(&self, labels: &Value, extra: &[String]) -> Value {
        let mut args: Vec<String> = [
            "reconcile",
            "--watch",
            "--leader-elect",
            "--kubefed-namespace",
            self.namespace,
            "--metrics-bind-address",
        ]
        .map(String::from)
        .to_vec();
        args.push(format!(":{METRICS_PORT}"));
        args.extend(extra.iter().cloned());
        let mut container = self.container(args);
        container["ports"] = json!([{"name": "metrics", "containerPort": METRICS_PORT}]);
        container["livenessProbe"] =
            json!({"httpGet": {"path": "/healthz", "port": "metrics"}, "periodSeconds": 10});
        container["readinessProbe"] =
            json!({"httpGet": {"path": "/readyz", "port": "metrics"}, "periodSeconds": 5});
        container["resources"] = json!({"requests": {"cpu": "50m", "memory": "64Mi"},
                                        "limits": {"memory": "512Mi"}});
        json!({
            "metadata": {"labels": labels},
            "spec": {
                "serviceAccountName": RECONCILER,
                // SIGTERM: the round in flight completes, the lease is released.
                "terminationGracePeriodSeconds": 60,
                "containers": [container],
            },
        })
    }

    fn container(&self, args: Vec<String>) -> Value {
        json!({
            "name": "reconcile",
            "image": self.image,
            "command": ["kubefedctl"],
            "args": args,
            "securityContext": {"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true,
                                "runAsNonRoot": true, "runAsUser": 65532},
        })
    }

    fn job_spec(&self, shard: Option<ShardArg>) -> Value {
        let mut args = vec![
            "reconcile".to_string(),
            "--kubefed-namespace".into(),
            self.namespace.into(),
            "-o".into(),
            "json".into(),
        ];
        let mut spec = json!({"backoffLimit": 2});
        match shard {
            None => {}
            Some(ShardArg::Fixed(i)) => {
                args.extend(["--shard".into(), format!("{i}/{}", self.shards)]);
            }
            Some(ShardArg::Indexed) => {
                // The Job controller sets JOB_COMPLETION_INDEX in each pod.
                args.extend([
                    "--shard".into(),
                    format!("$(JOB_COMPLETION_INDEX)/{}", self.shards),
                ]);
                spec["completionMode"] = json!("Indexed");
                spec["completions"] = json!(self.shards);
                spec["parallelism"] = json!(self.shards);
            }
        }
        spec["template"] = json!({
            "metadata": {"labels": self.meta("", "", "", false)["metadata"]["labels"]},
            "spec": {
                "serviceAccountName": RECONCILER,
                "restartPolicy": "Never",
                "containers": [self.container(args)],
            },
        });
        spec
    }
}

#[derive(Clone, Copy)]
enum ShardArg {
    /// `--shard I/N` written into the workload.
    Fixed(u32),
    /// `--shard $(JOB_COMPLETION_INDEX)/N`.
    Indexed,
}

/// Rules that grant `*` anywhere (none may).
pub fn wildcards(objects: &[Value]) -> Vec<String> {
    let mut out = Vec::new();
    for o in objects {
        for r in o["rules"].as_array().into_iter().flatten() {
            for field in ["apiGroups", "resources", "verbs"] {
                if r[field].as_array().into_iter().flatten().any(|v| v == "*") {
                    let (kind, name) = (&o["kind"], &o["metadata"]["name"]);
                    out.push(format!(
                        "{} {}: {field}",
                        kind.as_str().unwrap_or(""),
                        name.as_str().unwrap_or("")
                    ));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reconciler(mode: Mode, shards: u32, batch: Batch) -> Reconciler<'static> {
        Reconciler {
            mode,
            namespace: "fed",
            scope: Scope::Cluster,
            image: "registry.example/kubefedctl:1",
            schedule: DEFAULT_SCHEDULE,
            shards,
            types: vec![
                FederatedResource {
                    group: "types.kubefed.io".into(),
                    plural: "federateddeployments".into(),
                },
                FederatedResource {
                    group: "types.kubefed.io".into(),
                    plural: "federatedconfigmaps".into(),
                },
                FederatedResource {
                    group: "apps.example".into(),
                    plural: "federatedwidgets".into(),
                },
            ],
            dns: false,
            batch,
        }
    }

    fn kinds(objs: &[Value]) -> Vec<String> {
        objs.iter()
            .map(|o| {
                format!(
                    "{}/{}",
                    o["kind"].as_str().unwrap(),
                    o["metadata"]["name"].as_str().unwrap()
                )
            })
            .collect()
    }

    #[test]
    fn server_versions_choose_the_batch_apis() {
        let b = Batch::for_version;
        assert_eq!(
            b("1", "20"),
            Batch {
                cronjob_v1: false,
                indexed_jobs: false,
                pdb_v1: false,
            }
        );
        assert_eq!(
            b("1", "21+"),
            Batch {
                cronjob_v1: true,
                indexed_jobs: false,
                pdb_v1: true,
            }
        );
        assert_eq!(b("1", "22"), Batch::MODERN);
        assert_eq!(b("1", "30"), Batch::MODERN);
        assert_eq!(b("2", "0"), Batch::MODERN);
        assert_eq!(b("1", "x"), Batch::MODERN, "unknown minor: assume current");
    }

    #[test]
    fn a_sharded_watch_is_a_statefulset_of_two_pods_per_shard() {
        let objs = reconciler(Mode::Deployment, 3, Batch::MODERN).objects();
        let kinds: Vec<&str> = objs.iter().filter_map(|o| o["kind"].as_str()).collect();
        assert_eq!(
            kinds[5..],
            ["Service", "StatefulSet", "PodDisruptionBudget"],
            "{kinds:?}"
        );
        let (svc, set, pdb) = (&objs[5], &objs[6], &objs[7]);
        assert_eq!(svc["spec"]["clusterIP"], "None");
        assert_eq!(set["spec"]["serviceName"], svc["metadata"]["name"]);
        assert_eq!(set["spec"]["replicas"], 6, "a standby per shard");
        assert_eq!(set["spec"]["podManagementPolicy"], "Parallel");
        let pod = &set["spec"]["template"];
        let labels = &set["spec"]["selector"]["matchLabels"];
        assert_eq!(&pod["metadata"]["labels"], labels);
        assert_eq!(&svc["spec"]["selector"], labels);
        assert_eq!(&pdb["spec"]["selector"]["matchLabels"], labels);
        assert_eq!(pdb["apiVersion"], "policy/v1");
        assert_eq!(pdb["spec"]["maxUnavailable"], 1);
        let c = &pod["spec"]["containers"][0];
        let args: Vec<&str> = c["args"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|a| a.as_str())
            .collect();
        for flag in ["--watch", "--leader-elect", "--shard-from-hostname"] {
            assert!(args.contains(&flag), "{args:?}");
        }
        let at = args
            .iter()
            .position(|a| *a == "--shard-from-hostname")
            .unwrap();
        assert_eq!(args[at + 1], "3");
        assert_eq!(c["env"][0]["name"], "POD_NAME");
        assert_eq!(
            c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.name"
        );
        // Kubernetes 1.20 has PodDisruptionBudgets in policy/v1beta1 only.
        let old = reconciler(Mode::Deployment, 3, Batch::for_version("1", "20")).objects();
        assert_eq!(old[7]["apiVersion"], "policy/v1beta1");
        // One shard is the Deployment, as before.
        let one = reconciler(Mode::Deployment, 1, Batch::MODERN).objects();
        assert_eq!(one.last().unwrap()["kind"], "Deployment");
        assert!(wildcards(&objs).is_empty());
    }

    #[test]
    fn a_sharded_cronjob_is_one_indexed_job_on_current_servers() {
        let objs = reconciler(Mode::Cronjob, 3, Batch::MODERN).objects();
        assert_eq!(
            kinds(&objs),
            [
                "ServiceAccount/kubefedctl-reconciler",
                "ClusterRole/kubefedctl-reconciler:fed",
                "Role/kubefedctl-reconciler",
                "ClusterRoleBinding/kubefedctl-reconciler:fed",
                "RoleBinding/kubefedctl-reconciler",
                "CronJob/kubefedctl-reconcile"
            ]
        );
        let cron = &objs[5];
        assert_eq!(cron["apiVersion"], "batch/v1");
        assert_eq!(cron["spec"]["concurrencyPolicy"], "Forbid");
        assert_eq!(cron["spec"]["schedule"], "*/5 * * * *");
        let job = &cron["spec"]["jobTemplate"]["spec"];
        assert_eq!(job["completionMode"], "Indexed");
        assert_eq!(
            (job["completions"].as_u64(), job["parallelism"].as_u64()),
            (Some(3), Some(3))
        );
        let pod = &job["template"]["spec"];
        assert_eq!(pod["serviceAccountName"], RECONCILER);
        assert_eq!(
            pod["containers"][0]["args"],
            json!([
                "reconcile",
                "--kubefed-namespace",
                "fed",
                "-o",
                "json",
                "--shard",
                "$(JOB_COMPLETION_INDEX)/3"
            ])
        );
        // Bindings point at what was written.
        assert_eq!(objs[3]["roleRef"]["name"], "kubefedctl-reconciler:fed");
        assert_eq!(
            objs[3]["subjects"][0],
            json!({"kind": "ServiceAccount", "name": RECONCILER, "namespace": "fed"})
        );
        assert_eq!(
            objs[4]["roleRef"],
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": RECONCILER})
        );
    }

    #[test]
    fn older_servers_get_one_workload_per_shard() {
        let old = Batch::for_version("1", "20");
        let objs = reconciler(Mode::Cronjob, 3, old).objects();
        let crons: Vec<&Value> = objs.iter().filter(|o| o["kind"] == "CronJob").collect();
        assert_eq!(crons.len(), 3);
        for (i, c) in crons.iter().enumerate() {
            assert_eq!(c["apiVersion"], "batch/v1beta1");
            assert_eq!(
                c["metadata"]["name"],
                format!("kubefedctl-reconcile-{i}-of-3")
            );
            let job = &c["spec"]["jobTemplate"]["spec"];
            assert!(job.get("completionMode").is_none());
            let args = job["template"]["spec"]["containers"][0]["args"]
                .as_array()
                .unwrap();
            assert_eq!(args[args.len() - 1], format!("{i}/3"));
        }
        let jobs = reconciler(Mode::Job, 1, old).objects();
        let job = jobs.last().unwrap();
        assert_eq!(
            (job["kind"].as_str(), job["apiVersion"].as_str()),
            (Some("Job"), Some("batch/v1"))
        );
        let args = job["spec"]["template"]["spec"]["containers"][0]["args"]
            .as_array()
            .unwrap();
        assert!(
            !args.iter().any(|a| a == "--shard"),
            "one shard: no --shard"
        );
    }

    #[test]
    fn rules_name_every_type_and_grant_no_wildcard() {
        let r = reconciler(Mode::Job, 1, Batch::MODERN);
        let objs = r.objects();
        assert!(wildcards(&objs).is_empty(), "{:?}", wildcards(&objs));
        let cluster_rules = &objs[1]["rules"];
        let find = |group: &str, resource: &str| -> Vec<String> {
            cluster_rules
                .as_array()
                .unwrap()
                .iter()
                .filter(|r| {
                    r["apiGroups"][0] == group
                        && r["resources"]
                            .as_array()
                            .unwrap()
                            .iter()
                            .any(|x| x == resource)
                })
                .flat_map(|r| {
                    r["verbs"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|v| v.as_str().unwrap().to_string())
                })
                .collect()
        };
        assert_eq!(
            find("types.kubefed.io", "federateddeployments"),
            ["get", "list", "patch", "update"]
        );
        assert_eq!(
            find("types.kubefed.io", "federatedconfigmaps/status"),
            ["update"]
        );
        assert_eq!(
            find("apps.example", "federatedwidgets"),
            ["get", "list", "patch", "update"]
        );
        assert!(
            find("multiclusterdns.kubefed.io", "dnsendpoints").is_empty(),
            "no DNS rules without DNS"
        );
        assert!(
            find("", "secrets").is_empty(),
            "Secrets only in the federation namespace"
        );
        let role_rules = objs[2]["rules"].to_string();
        assert!(
            role_rules.contains(r#""resources":["secrets"],"verbs":["get"]"#),
            "{role_rules}"
        );
        assert!(role_rules.contains("leases"));
        assert!(
            role_rules.contains(r#""resources":["events"],"verbs":["create","patch"]"#),
            "KubeFedClusters' Events: {role_rules}"
        );
        assert_eq!(
            find("", "events"),
            ["create", "patch"],
            "Events on federated objects in every namespace"
        );

        // A namespace-scoped federation: object rules move into the Role.
        let ns = Reconciler {
            scope: Scope::Namespaced,
            dns: true,
            ..r
        };
        let objs = ns.objects();
        assert!(
            !objs[1]["rules"]
                .to_string()
                .contains("federateddeployments")
        );
        assert!(
            !objs[1]["rules"].to_string().contains("events"),
            "a namespaced federation's Events stay in its namespace"
        );
        let role = objs[2]["rules"].to_string();
        assert!(
            role.contains("federateddeployments")
                && role.contains("dnsendpoints")
                && role.contains("domains")
        );
    }

    #[test]
    fn the_deployment_watches_with_two_replicas_and_its_rules_allow_watching() {
        let r = reconciler(Mode::Deployment, 1, Batch::MODERN);
        let objs = r.objects();
        let d = objs.last().unwrap();
        assert_eq!(
            (d["kind"].as_str(), d["apiVersion"].as_str()),
            (Some("Deployment"), Some("apps/v1"))
        );
        assert_eq!(d["spec"]["replicas"], 2);
        assert_eq!(
            d["spec"]["selector"]["matchLabels"],
            d["spec"]["template"]["metadata"]["labels"]
        );
        let c = &d["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(
            c["args"],
            json!([
                "reconcile",
                "--watch",
                "--leader-elect",
                "--kubefed-namespace",
                "fed",
                "--metrics-bind-address",
                ":8080"
            ])
        );
        assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/readyz");
        assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
        let rules = objs[1]["rules"].to_string() + &objs[2]["rules"].to_string();
        assert!(rules.contains(r#""resources":["federatedconfigmaps","federateddeployments"],"verbs":["get","list","watch","patch","update"]"#), "{rules}");
        assert!(
            rules.contains(r#""resources":["kubefedconfigs"],"verbs":["get","list","watch"]"#),
            "{rules}"
        );
        assert!(wildcards(&objs).is_empty());
        // It renews short-lived member tokens: the host Secret and the
        // KubeFedCluster's annotations.
        let role = objs
            .iter()
            .find(|o| o["kind"] == "Role")
            .unwrap()
            .to_string();
        assert!(
            role.contains(r#"{"apiGroups":[""],"resources":["secrets"],"verbs":["patch"]}"#),
            "{role}"
        );
        assert!(
            role.contains(r#"{"apiGroups":["core.kubefed.io"],"resources":["kubefedclusters"],"verbs":["patch"]}"#),
            "{role}"
        );
        // The Jobs do not watch, nor write Secrets.
        let job = reconciler(Mode::Job, 1, Batch::MODERN).objects();
        assert!(!job[1]["rules"].to_string().contains("watch"));
        let job_role = job.iter().find(|o| o["kind"] == "Role").unwrap();
        assert!(
            !job_role["rules"]
                .to_string()
                .contains(r#""resources":["secrets"],"verbs":["patch"]"#)
        );
    }

    #[test]
    fn schedules_are_checked() {
        for ok in [
            "*/5 * * * *",
            "0 3 * * MON-FRI",
            "@hourly",
            "15,45 */2 1-7 * ?",
        ] {
            assert_eq!(check_schedule(ok), Ok(()), "{ok}");
        }
        for bad in ["", "* * * *", "*/5 * * * * *", "@often", "0 3 * * $"] {
            assert!(
                check_schedule(bad)
                    .unwrap_err()
                    .to_string()
                    .contains("five cron fields"),
                "{bad}"
            );
        }
    }

    #[test]
    fn wildcards_are_found() {
        let bad = json!({"kind": "ClusterRole", "metadata": {"name": "x"},
                         "rules": [{"apiGroups": [""], "resources": ["*"], "verbs": ["get"]}]});
        assert_eq!(wildcards(&[bad]), ["ClusterRole x: resources"]);
    }
}
