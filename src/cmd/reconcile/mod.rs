//! `kubefedctl reconcile`: the one-shot sync. Live, against the host and
//! its members ([`live`]); as a controller ([`watch`]); or offline
//! (`--from PATH`, [`render`]), rendering member manifests. The flags come
//! in groups ([`flags`]) shared by the one-shot run and the watch, each
//! turned once into what the engine takes; [`print`] prints what a run did.

mod flags;
mod live;
mod print;
mod render;
mod watch;

pub use flags::{
    InputFlags, LockFlags, PlanFlags, RequestFlags, RolloutFlags, SelectionFlags, WaitFlags,
    WatchFlags,
};

use crate::cmd::options::GlobalOptions;
use crate::terminal::output::DocumentFormat;
use anyhow::Result;
use clap::Args;

#[derive(Args, Debug)]
#[command(
    after_help = "Exit codes: 0 converged (or, with --exit-code, nothing to do); 1 error
before any change (the federation lock held by another run included); 2 usage
error; 3 some objects or clusters failed (listed on stderr); 4 changes pending
(--exit-code); 5 not ready (--wait-ready; a rollout still waiting when the run's
wait ends); 7 a rollout halted, or aborted with --previous; 130/143 interrupted
by Ctrl-C or SIGTERM (the lock is released).

Examples:
  # Offline: print the member manifests of the bundled demo
  kubefedctl reconcile --from testdata/demo
  kubefedctl reconcile --from app/ --cluster eu1:region=eu --output-dir out/
  # Live: every enabled type, every member
  kubefedctl reconcile
  # A plan with a diff (writes nothing, as kubectl diff)
  kubefedctl reconcile --type deployments.apps -n shop --diff
  # Only touch member2; a JSON summary for CI
  kubefedctl reconcile --cluster member2 -o json
  # One of three runs that split the work
  kubefedctl reconcile --shard 1/3
  # Changes to a canary first, then wave by wave, as policy.json says
  # ({\"waves\": [{\"clusters\": [\"m1\"]}], \"minSuccessTime\": \"1m\"})
  kubefedctl reconcile --rollout policy.json
  # A controller
  kubefedctl reconcile --watch --leader-elect --metrics-bind-address :8080
  # A StatefulSet pod's shard
  kubefedctl reconcile --watch --leader-elect --shard-from-hostname 3"
)]
pub struct ReconcileOptions {
    #[command(flatten)]
    pub input: InputFlags,
    #[command(flatten)]
    pub selection: SelectionFlags,
    #[command(flatten)]
    pub plan: PlanFlags,
    #[command(flatten)]
    pub requests: RequestFlags,
    #[command(flatten)]
    pub waits: WaitFlags,
    #[command(flatten)]
    pub lock: LockFlags,
    #[command(flatten)]
    pub rollout: RolloutFlags,
    #[command(flatten)]
    pub watch: WatchFlags,

    /// Summary (live) or manifests (--from) as yaml or json; a dry run's plan as markdown (for a pull request)
    #[arg(
        short = 'o',
        long = "output",
        value_name = "FORMAT",
        help_heading = "Output"
    )]
    pub output: Option<ReconcileOutput>,
}

/// `-o`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReconcileOutput {
    Yaml,
    Json,
    /// A dry run's plan for a pull-request comment or `$GITHUB_STEP_SUMMARY`.
    Markdown,
}

impl ReconcileOutput {
    fn document(self) -> Option<DocumentFormat> {
        match self {
            ReconcileOutput::Yaml => Some(DocumentFormat::Yaml),
            ReconcileOutput::Json => Some(DocumentFormat::Json),
            ReconcileOutput::Markdown => None,
        }
    }
}

pub async fn run(global: &GlobalOptions, o: &ReconcileOptions) -> Result<()> {
    let clusters = validate(o).map_err(crate::error::usage_of)?;
    if !o.input.from.is_empty() {
        return render::run(o, &clusters);
    }
    if o.watch.watch {
        return watch::run(global, o).await;
    }
    live::run(global, o).await
}

/// What clap cannot check, before anything is read: `--cluster` values
/// (with `--from`, `NAME[:k=v,...]` clusters to render for; live, member
/// names only) and `--concurrency`. Returns the render's clusters.
fn validate(o: &ReconcileOptions) -> Result<Vec<crate::core::propagation::placement::Cluster>> {
    if o.requests.concurrency == Some(0) {
        anyhow::bail!("--concurrency must be at least 1");
    }
    if let Some(sel) = &o.selection.selector {
        crate::core::propagation::placement::Selector::parse_flag(sel)
            .map_err(|e| anyhow::anyhow!("-l {sel:?}: {e}"))?;
    }
    o.rollout.policy()?;
    if o.output == Some(ReconcileOutput::Markdown) && !o.plan.dry_run() {
        anyhow::bail!("-o markdown prints a plan: use it with --dry-run");
    }
    if o.input.from.is_empty() {
        for c in &o.selection.clusters {
            if c.contains(':') {
                anyhow::bail!(
                    "--cluster {c:?}: labels (NAME:k=v) describe clusters to render for, with --from; a live run names joined members only"
                );
            }
            crate::cmd::options::validate_cluster_name(c)
                .map_err(|e| anyhow::anyhow!("--cluster: {e}"))?;
        }
        return Ok(Vec::new());
    }
    o.selection
        .clusters
        .iter()
        .map(|c| crate::sync::render::parse_cluster_flag(c))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn options(args: &[&str]) -> ReconcileOptions {
        let mut all = vec!["kubefedctl", "reconcile"];
        all.extend_from_slice(args);
        match crate::cli::Cli::try_parse_from(all).unwrap().command {
            crate::cli::Command::Reconcile(o) => *o,
            _ => unreachable!("a reconcile command line"),
        }
    }

    #[test]
    fn validate_names_the_flag_before_anything_is_read() {
        let cases: [(&[&str], Option<&str>); 6] = [
            (&["--cluster", "m1"], None),
            (&["--from", "x", "--cluster", "eu1:region=eu"], None),
            (
                &["--cluster", "eu1:region=eu"],
                Some(
                    "--cluster \"eu1:region=eu\": labels (NAME:k=v) describe clusters to render for",
                ),
            ),
            (
                &["--cluster", "Bad_Name"],
                Some("--cluster: invalid cluster name \"Bad_Name\""),
            ),
            (
                &["--concurrency", "0"],
                Some("--concurrency must be at least 1"),
            ),
            (&["-l", "tier in web"], Some("-l \"tier in web\": ")),
        ];
        for (args, want) in cases {
            let got = validate(&options(args))
                .map(|_| ())
                .map_err(|e| e.to_string());
            match want {
                None => assert!(got.is_ok(), "{args:?}: {got:?}"),
                Some(w) => assert!(
                    got.as_ref().is_err_and(|e| e.starts_with(w)),
                    "{args:?}: {got:?}"
                ),
            }
        }
        let clusters = validate(&options(&["--from", "x", "--cluster", "eu1:region=eu"])).unwrap();
        assert!(
            validate(&options(&["-o", "markdown"]))
                .is_err_and(|e| e.to_string().contains("use it with --dry-run"))
        );
        assert_eq!(clusters[0].labels["region"], "eu");
    }

    #[test]
    fn a_rollout_policy_is_read_before_anything_and_named_when_malformed() {
        let err = |args: &[&str]| validate(&options(args)).unwrap_err().to_string();
        let e = err(&["--rollout", r#"{"minSuccessTime": "1x"}"#]);
        assert!(e.starts_with("--rollout: minSuccessTime: "), "{e}");
        let e = err(&["--rollout", "/nonexistent/policy.json"]);
        assert!(e.starts_with("--rollout /nonexistent/policy.json: "), "{e}");
        let good = options(&["--rollout", r#"{"waves": [{"clusters": ["m1"]}]}"#]);
        assert!(validate(&good).is_ok());
        let policy = good.rollout.policy().unwrap().unwrap();
        assert_eq!(policy.waves.len(), 1);
        // The watch rolls out too, but aborts nothing; an abort needs -f.
        let watch = ["kubefedctl", "reconcile", "--watch", "--rollout", "{}"];
        assert!(crate::cli::Cli::try_parse_from(watch).is_ok());
        let watch = [
            "kubefedctl",
            "reconcile",
            "--watch",
            "-f",
            "p/",
            "--rollout-abort",
        ];
        assert!(crate::cli::Cli::try_parse_from(watch).is_err());
        // An abort needs the previous version: -f or --previous, not both;
        // --previous only with an abort.
        let parses = |args: &[&str]| {
            let all = [&["kubefedctl", "reconcile"], args].concat();
            crate::cli::Cli::try_parse_from(all).is_ok()
        };
        assert!(!parses(&["--rollout-abort"]));
        assert!(!parses(&["--previous", "prev/"]));
        assert!(!parses(&[
            "-f",
            "a/",
            "--previous",
            "prev/",
            "--rollout-abort"
        ]));
        assert!(!parses(&[
            "--previous",
            "prev/",
            "--rollout-abort",
            "--watch"
        ]));
        assert!(parses(&["--previous", "prev/", "-R", "--rollout-abort"]));
        assert!(
            options(&["-f", "prev/", "--rollout-abort"])
                .rollout
                .rollout_abort
        );
        let previous = options(&["--previous", "a.yaml", "--previous", "-", "--rollout-abort"]);
        assert_eq!(
            previous.rollout.previous,
            ["a.yaml", "-"].map(std::path::PathBuf::from)
        );
    }

    /// The mode is derived once from the plan flags: each flag that only
    /// makes sense in a plan implies one, and the engine sees only the mode.
    #[test]
    fn the_plan_flags_resolve_to_one_mode() {
        use crate::sync::run::mode::PlanMode;
        let dry = |validate, diff, exit_code| PlanMode::DryRun {
            validate,
            diff,
            exit_code,
        };
        let cases: [(&[&str], PlanMode); 7] = [
            (&[], PlanMode::Write),
            (&["--dry-run=none"], PlanMode::Write),
            (&["--dry-run"], dry(false, false, false)),
            (&["--dry-run=server"], dry(true, false, false)),
            (&["--validate"], dry(true, false, false)),
            (&["--diff"], dry(false, true, false)),
            (&["--exit-code", "--diff"], dry(false, true, true)),
        ];
        for (args, want) in cases {
            assert_eq!(options(args).plan.mode(), want, "{args:?}");
        }
    }
}
