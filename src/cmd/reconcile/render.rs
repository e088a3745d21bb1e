//! `reconcile --from PATH`: member manifests rendered from files, offline.

use super::{ReconcileOptions, ReconcileOutput};
use crate::sync::render;
use crate::terminal::output::on_stdout;
use anyhow::Result;

pub(super) fn run(
    o: &ReconcileOptions,
    clusters: &[crate::core::propagation::placement::Cluster],
) -> Result<()> {
    let inputs = render::load(&o.input.from)?;
    let plan = render::plan(inputs, clusters)?;
    for n in &plan.notes {
        tracing::info!("note: {n}");
    }
    for s in &plan.scheduling {
        tracing::info!("scheduled {s}");
    }
    match (&o.input.output_dir, o.output) {
        (Some(dir), _) => {
            let format = o
                .output
                .and_then(ReconcileOutput::document)
                .unwrap_or(crate::terminal::output::DocumentFormat::Yaml);
            let count = render::write_dir(&plan, dir, format)?;
            tracing::info!(
                "wrote {count} object(s) for {} cluster(s) under {}",
                plan.clusters.len(),
                dir.display()
            );
        }
        (None, Some(ReconcileOutput::Json)) => {
            on_stdout(render::write_json(&plan, &mut std::io::stdout().lock()))?
        }
        (None, _) => on_stdout(render::write_stream(&plan, &mut std::io::stdout().lock()))?,
    }
    Ok(())
}
