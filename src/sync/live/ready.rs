//! `reconcile --wait-ready`: after a run, wait until the member objects it
//! placed are ready (`core::propagation::readiness`), reading each member's objects of a
//! type with one list per poll (managed copies only), never one GET per
//! object; then record on each federated object waited for whether all its
//! copies are (its `Ready` condition, `core::propagation::status::with_ready`).

use crate::apply::{api_error, dynamic_api};
use crate::clients::host::Host;
use crate::clients::members::Member;
use crate::core::describe::{ObjectKey, describe_key, key_of};
use crate::core::outcome::Failure;
use crate::core::propagation::desired::MANAGED_LABEL;
use crate::core::propagation::readiness::{Readiness, readiness};
use crate::core::propagation::status::{federated_readiness, with_ready};
use crate::sync::run::observe::list_all;
use crate::sync::run::report::{PlacedObject, PlacedOwner};
use kube::api::{ListParams, PostParams};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;
use tokio::time::Instant;

/// How often the members are listed again.
const POLL: Duration = Duration::from_secs(2);

/// An object still waited for, and why.
#[derive(Clone, Debug)]
pub struct Waiting {
    pub cluster: String,
    /// `deployment shop/web`, as `kubectl rollout status` names it.
    pub object: String,
    pub readiness: Readiness,
    /// The object waited for.
    pub placed: PlacedObject,
}

impl Waiting {
    /// `member2: deployment shop/web 0/3 available`.
    pub fn line(&self) -> String {
        let why = match &self.readiness {
            Readiness::Ready => "ready",
            Readiness::Pending(why) | Readiness::Failed(why) => why,
        };
        format!("{}: {} {why}", self.cluster, self.object)
    }
}

/// What the caller hears while waiting.
pub trait WaitProgress: Sync {
    /// Objects waited for in all.
    fn total(&self, n: u64);
    /// One became ready.
    fn ready(&self, w: &Waiting);
}

/// Waits until every object is ready, one fails, or `until`. Returns the
/// objects not ready (empty: all are), failed ones first.
pub async fn wait_ready(
    members: &[Member],
    objects: &[PlacedObject],
    until: Instant,
    progress: &dyn WaitProgress,
) -> Vec<Waiting> {
    let mut waiting: Vec<&PlacedObject> = objects.iter().collect();
    progress.total(waiting.len() as u64);
    loop {
        let seen = list_members(members, &waiting).await;
        let mut still = Vec::new();
        let mut left = Vec::new();
        for o in waiting {
            let state = match seen.get(&(o.cluster.clone(), o.target.plural.clone())) {
                Some(Ok(objects)) => match objects.get(&o.key) {
                    Some(obj) => readiness(&o.target.group, &o.target.kind, obj),
                    None => Readiness::Pending("not there".into()),
                },
                Some(Err(why)) => Readiness::Pending(format!("cannot be read ({why})")),
                None => Readiness::Pending("not listed".into()),
            };
            let w = Waiting {
                cluster: o.cluster.clone(),
                object: describe_key(&o.target.kind.to_lowercase(), &o.key),
                readiness: state,
                placed: o.clone(),
            };
            match w.readiness {
                Readiness::Ready => progress.ready(&w),
                _ => {
                    still.push(o);
                    left.push(w);
                }
            }
        }
        let failed = left
            .iter()
            .any(|w| matches!(w.readiness, Readiness::Failed(_)));
        if left.is_empty() || failed || Instant::now() + POLL > until {
            left.sort_by_key(|w| !matches!(w.readiness, Readiness::Failed(_)));
            return left;
        }
        waiting = still;
        tokio::time::sleep(POLL).await;
    }
}

/// The member objects `--wait-ready` waits for: every placed copy of each
/// federated object of which this run wrote a copy (`all`: of every
/// placed one), so that its `Ready` condition speaks for every member;
/// but not a copy whose write `failed` (named by its member and object):
/// it is reported already, and would be waited for until the deadline.
pub fn to_wait_for(placed: &[PlacedObject], all: bool, failed: &[Failure]) -> Vec<PlacedObject> {
    let changed: std::collections::HashSet<*const PlacedOwner> = placed
        .iter()
        .filter(|p| p.written || all)
        .map(|p| std::sync::Arc::as_ptr(&p.owner))
        .collect();
    let failed: std::collections::HashSet<(&str, &str)> = failed
        .iter()
        .filter_map(|f| Some((f.place.as_ref()?.member_name()?, f.object.as_deref()?)))
        .collect();
    placed
        .iter()
        .filter(|p| changed.contains(&std::sync::Arc::as_ptr(&p.owner)))
        .filter(|p| {
            let object = describe_key(&p.target.kind, &p.key);
            !failed.contains(&(p.cluster.as_str(), object.as_str()))
        })
        .cloned()
        .collect()
}

/// Records on each federated object of `waited` whose placed members this
/// run decided all of whether its copies are ready (`left`: those that
/// were not, as the wait ended); written only when it changes. Returns
/// the host writes made and a line for each that failed.
pub async fn record_ready(
    host: &Host,
    waited: &[PlacedObject],
    left: &[Waiting],
) -> (usize, Vec<String>) {
    let mut owners: Vec<(&PlacedOwner, Vec<&Readiness>)> = Vec::new();
    for p in waited.iter().filter(|p| p.owner.judged) {
        if !owners.iter().any(|(o, _)| std::ptr::eq(*o, &*p.owner)) {
            owners.push((&p.owner, Vec::new()));
        }
    }
    for w in left {
        if let Some((_, r)) = (owners.iter_mut()).find(|(o, _)| std::ptr::eq(*o, &*w.placed.owner))
        {
            r.push(&w.readiness);
        }
    }
    let now = crate::clock::now_rfc3339();
    let writes = owners.iter().map(|(owner, not_ready)| async {
        let state = federated_readiness(not_ready.iter().copied(), owner.complete);
        let what = describe_key(&owner.federated.kind, &owner.key);
        write_ready(host, owner, state, &now)
            .await
            .map_err(|e| format!("{what}: Ready condition not recorded: {e:#}"))
    });
    let mut done = (0, Vec::new());
    for r in futures::future::join_all(writes).await {
        match r {
            Ok(wrote) => done.0 += usize::from(wrote),
            Err(line) => done.1.push(line),
        }
    }
    done
}

/// Sets one federated object's `Ready` condition (re-read once if it
/// changed meanwhile). Whether it was written.
async fn write_ready(
    host: &Host,
    owner: &PlacedOwner,
    state: crate::core::propagation::status::ReadyState,
    now: &str,
) -> anyhow::Result<bool> {
    let ns = Some(owner.key.namespace.as_str()).filter(|n| !n.is_empty());
    let api = dynamic_api(&host.client, ns, &owner.federated);
    for _ in 0..2 {
        let mut obj = serde_json::to_value(api.get(&owner.key.name).await.map_err(api_error)?)?;
        let Some(status) = with_ready(&obj["status"], state, now) else {
            return Ok(false);
        };
        obj["status"] = status;
        match api
            .replace_status(
                &owner.key.name,
                &PostParams::default(),
                &serde_json::from_value(obj)?,
            )
            .await
        {
            Ok(_) => return Ok(true),
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(e) => return Err(api_error(e)),
        }
    }
    anyhow::bail!("it kept changing while being written")
}

/// Listed managed objects per (member, plural), one list each.
type Lists = BTreeMap<(String, String), Result<HashMap<ObjectKey, serde_json::Value>, String>>;

async fn list_members(members: &[Member], waiting: &[&PlacedObject]) -> Lists {
    let mut wanted: BTreeMap<(String, String), &PlacedObject> = BTreeMap::new();
    for o in waiting {
        wanted
            .entry((o.cluster.clone(), o.target.plural.clone()))
            .or_insert(o);
    }
    let lists = wanted.into_iter().map(|(k, o)| async move {
        let client = members
            .iter()
            .find(|m| m.name == o.cluster)
            .map(|m| m.client.clone());
        let result = match client {
            Some(Ok(client)) => {
                let api = dynamic_api(&client, None, &o.target);
                let params = ListParams::default().labels(&format!("{MANAGED_LABEL}=true"));
                list_all(&api, &params)
                    .await
                    .map(|objs| objs.into_iter().map(|v| (key_of(&v), v)).collect())
                    .map_err(|e| crate::error::one_line(&e))
            }
            Some(Err(why)) => Err(why),
            None => Err("not a member".into()),
        };
        (k, result)
    });
    futures::future::join_all(lists).await.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::outcome::Place;
    use std::sync::Arc;

    fn placed(cluster: &str, owner: &Arc<PlacedOwner>, written: bool) -> PlacedObject {
        PlacedObject {
            cluster: cluster.into(),
            target: kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
            key: ObjectKey {
                namespace: "shop".into(),
                name: "web".into(),
            },
            written,
            owner: owner.clone(),
        }
    }

    #[test]
    fn copies_whose_write_failed_are_not_waited_for() {
        let owner = Arc::new(PlacedOwner {
            federated: kube::api::ApiResource::erase::<k8s_openapi::api::core::v1::ConfigMap>(&()),
            key: ObjectKey {
                namespace: "shop".into(),
                name: "web".into(),
            },
            complete: true,
            judged: true,
        });
        let all = [placed("m1", &owner, true), placed("m2", &owner, true)];
        let clusters = |w: &[PlacedObject]| w.iter().map(|p| p.cluster.clone()).collect::<Vec<_>>();
        assert_eq!(clusters(&to_wait_for(&all, false, &[])), ["m1", "m2"]);
        let failed = [Failure::of(
            Place::member("m2"),
            "ConfigMap shop/web",
            "namespaces \"shop\" not found",
        )];
        assert_eq!(clusters(&to_wait_for(&all, false, &failed)), ["m1"]);
        // Another object's failure, or a member's as a whole, changes nothing.
        let others = [
            Failure::of(Place::member("m2"), "ConfigMap shop/db", "refused"),
            Failure::at(Place::member("m1"), "cluster not ready"),
        ];
        assert_eq!(clusters(&to_wait_for(&all, false, &others)), ["m1", "m2"]);
    }
}
