//! `reconcile --wait-ready`: after a run, wait until the member objects it
//! placed are ready (`core::propagation::readiness`), reading each member's objects of a
//! type with one list per poll (managed copies only), never one GET per
//! object.

use crate::apply::dynamic_api;
use crate::clients::members::Member;
use crate::core::describe::{ObjectKey, describe_key, key_of};
use crate::core::propagation::desired::MANAGED_LABEL;
use crate::core::propagation::readiness::{Readiness, readiness};
use crate::sync::live::observe::list_all;
use crate::sync::live::report::PlacedObject;
use kube::api::ListParams;
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
