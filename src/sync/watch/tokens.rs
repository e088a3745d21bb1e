//! Short-lived member tokens renewed by the watch itself: at each probe,
//! every member whose token (`join --token-ttl`) has passed 80 % of its
//! lifetime gets a new one (`member_token::rotate`, issued by the member
//! identity), and the members are rebuilt from the new Secret. The old
//! token stays valid until it expires, so no request is cut off. Its own
//! file because it is the only thing the watch writes into the host's
//! Secrets.

use super::Controller;
use crate::core::cluster::token::Lifetime;
use crate::core::outcome::{Failure, Place};
use std::time::Instant;

impl Controller<'_> {
    /// Rotates every token that is due (none while writing is suspended).
    pub(super) async fn rotate_due_tokens(&mut self) {
        if self.runner.suspended() || !self.writes_cluster_state() {
            return;
        }
        let now = crate::clock::now_unix();
        let mut rotated = false;
        let mut failures = Vec::new();
        for m in self.fleet.iter() {
            let due = serde_json::to_value(&m.cluster)
                .ok()
                .and_then(|v| Lifetime::of_cluster(&v))
                .is_some_and(|life| life.rotation_due(now));
            let (true, Ok(client)) = (due, &m.client) else {
                continue;
            };
            match crate::member_token::rotate(&self.shared.host, &m.cluster, client).await {
                Ok(life) => {
                    tracing::info!(
                        "{}: token rotated, expires at {}",
                        m.name,
                        crate::core::time::rfc3339(life.expires_at)
                    );
                    rotated = true;
                }
                Err(e) => {
                    let failure = Failure::at(
                        Place::member(&m.name),
                        format!("token not rotated: {}", crate::error::one_line(&e)),
                    );
                    failures.push(failure.to_string());
                }
            }
        }
        for line in failures {
            self.report_failure(line);
        }
        if rotated {
            // New clients from the new Secrets.
            self.runner.rebuild_at(Some(Instant::now()));
        }
    }
}
