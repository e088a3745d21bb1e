//! KubeFed v0.10's own e2e suite, in its managed mode
//! (`-in-memory-controllers=false`: it tests whatever controller runs the
//! federation), with `reconcile --watch` as the only controller. The
//! federation is what the suite expects (`test/e2e/framework`): KubeFed's
//! objects in `kube-federation-system`, its ten default types, the host
//! joined to itself under its context's name, every cluster Ready, and
//! `RawResourceStatusCollection` enabled. The members run the deployment
//! and replicaset controllers for `deleteoptions.go`.
//!
//! Skipped specs, each for a reason of this environment, not of the
//! controller: the admission webhook's (`Default`, `Core API Validation`:
//! no webhook runs out of cluster), `Leader Elector` (it kills
//! controller-manager Pods), and the ones the suite itself skips in
//! managed mode (simulated federations, the scheduler manager, the
//! namespaced control plane's).

use crate::fixtures::{kubefedctl, wait_until, write_kubeconfig};
use crate::watch::{log, sigterm};
use std::process::{Command, Stdio};
use testenv::{TestEnv, kubefed_binary, kubefed_missing};

/// Specs this environment cannot run (see the module's comment).
const SKIP: &str = r"KubeFedConfig is created by mutating|KubeFedConfig does not cause controller-manager to fail|Core API Validation|Leader Elector";

#[test]
fn kubefeds_own_e2e_suite_passes_with_the_watch_as_its_controller() {
    let Some(e2e) = kubefed_binary("e2e.test") else {
        println!("{}", kubefed_missing("e2e test binary (e2e.test)"));
        return;
    };
    let env = TestEnv::private_with(&["host", "member1"], &["deployment", "replicaset"]).unwrap();
    let kc = write_kubeconfig(
        &env,
        "kubefed-e2e",
        env.kubeconfig().current_context("host"),
    );
    let run = |args: &[&str]| kubefedctl(&kc, args).ok();
    run(&["init"]);
    // KubeFed's own e2e suite enables types through KubeFed's library,
    // which keeps no least-privilege role in step: KubeFed's `*`.
    run(&[
        "join",
        "host",
        "--cluster-context",
        "host",
        "--rbac",
        "admin",
    ]);
    run(&[
        "join",
        "member1",
        "--cluster-context",
        "member1",
        "--rbac",
        "admin",
    ]);
    let directives = crate::fixtures::root().join("testdata/enabletypedirectives.yaml");
    run(&["enable", "-f", directives.to_str().unwrap()]);
    let config =
        "/apis/core.kubefed.io/v1beta1/namespaces/kube-federation-system/kubefedconfigs/kubefed";
    crate::fixtures::patch(
        &env,
        "host",
        config,
        serde_json::json!({"spec": {"featureGates": [
            {"name": "PushReconciler", "configuration": "Enabled"},
            {"name": "SchedulerPreferences", "configuration": "Enabled"},
            {"name": "RawResourceStatusCollection", "configuration": "Enabled"}
        ]}}),
    );
    let watch_log = env.dir().join("kubefed-e2e-watch.log");
    let mut watch = Command::new(crate::fixtures::KUBEFEDCTL)
        .arg("--kubeconfig")
        .arg(&kc)
        .args(["reconcile", "--watch", "-A", "--probe-interval", "2s"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&watch_log).unwrap())
        .spawn()
        .unwrap();
    wait_until("every KubeFedCluster is Ready", || {
        let list = crate::fixtures::get(
            &env,
            "host",
            "/apis/core.kubefed.io/v1beta1/namespaces/kube-federation-system/kubefedclusters",
        );
        list.and_then(|l| l["items"].as_array().cloned())
            .is_some_and(|items| {
                items.len() == 2
                    && items.iter().all(|c| {
                        c["status"]["conditions"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .any(|cond| cond["type"] == "Ready" && cond["status"] == "True")
                    })
            })
    });
    let out = Command::new(&e2e)
        .arg(format!("-kubeconfig={}", kc.display()))
        .args([
            "-in-memory-controllers=false",
            "-ginkgo.noColor",
            &format!("-ginkgo.skip={SKIP}"),
        ])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    sigterm(&watch);
    let stopped = watch.wait().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let tail: String = text
        .lines()
        .rev()
        .take(60)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        out.status.success(),
        "KubeFed's e2e suite failed:\n{tail}\n{}\nwatch:\n{}",
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .rev()
            .take(20)
            .collect::<Vec<_>>()
            .join("\n"),
        log(&watch_log)
    );
    // It ran the specs it is meant to, not an empty selection.
    let ran = text
        .lines()
        .find_map(|l| {
            l.strip_prefix("SUCCESS! -- ")?
                .split(' ')
                .next()?
                .parse::<u32>()
                .ok()
        })
        .unwrap_or(0);
    assert!(ran >= 40, "{ran} specs passed:\n{tail}");
    assert!(stopped.success(), "{}", log(&watch_log));
}
