//! `reconcile --watch`: the run as a controller, until a signal.

use super::ReconcileOptions;
use crate::cmd::options::GlobalOptions;
use crate::sync::{lock, watch};
use anyhow::Result;

pub(super) async fn run(global: &GlobalOptions, o: &ReconcileOptions) -> Result<()> {
    // Registered first: a standby stopped while it still waits for the host
    // (a pod deleted during an outage) ends cleanly, not by the signal.
    let mut stop = crate::terminal::signals::Signals::new()?;
    let (factory, host) = global.connect_host().await?;
    let start = async {
        if o.watch.leader_elect {
            // A standby outlives host outages, from its start on.
            let retry = crate::core::run::lease::LeaseTimings::default().retry_period;
            host.wait_initialised(retry).await?;
        } else {
            host.require_initialised().await?;
        }
        lock::refuse_beside_kubefed(&host, o.lock.force).await?;
        // Read once at start, as upstream's controller-manager reads it: the
        // lock's timings and the number of requests in flight per member.
        host.settings().await
    };
    let settings = tokio::select! {
        settings = start => settings?,
        _ = stop.next() => {
            tracing::info!("stopped while starting");
            return Ok(());
        }
    };
    let run = o.live_options(None, settings.max_concurrent_reconciles, None);
    // Watches are silent while nothing changes: no read timeout for them.
    let mut config = factory.config(&host.context).await?;
    config.read_timeout = None;
    let watch_client = crate::clients::build(config, &host.context)?;
    let options = o.watch_options(run, settings.leader_elect, watch_client, global.verbosity);
    watch::run(&host, &options, stop).await
}
