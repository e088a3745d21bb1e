//! KubeFed v0.10's own e2e suite, in its managed mode
//! (`-in-memory-controllers=false`: it tests whatever controller runs the
//! federation), with `reconcile --watch` as the only controller. The
//! federation is what the suite expects (`test/e2e/framework`): KubeFed's
//! objects in `kube-federation-system`, its ten default types, the host
//! joined to itself under its context's name, every cluster Ready, and
//! `RawResourceStatusCollection` enabled. The members run the deployment
//! and replicaset controllers for `deleteoptions.go`; host and member1 are
//! exactly the two clusters `scheduling.go` needs (it skips otherwise). Its
//! specs start KubeFed's own SchedulingManager in the e2e process
//! (`scheduling.go:81-82`), so they prove the watch works beside KubeFed's
//! scheduler, not our RSP pass (docs/watch.md names the tests that do).
//!
//! The suite's JUnit report (`-ginkgo.reportFile`) says what became of
//! every spec: every one must pass except those of [`SKIPPED`], each for a
//! reason of this environment, not of the controller, and those must be
//! skipped, so a spec that fails or is skipped anew fails the test, and so
//! does a listed one that runs. docs/watch.md lists them too.

use crate::fixtures::{kubefedctl, wait_until, write_kubeconfig};
use crate::watch::{log, sigterm};
use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use testenv::{TestEnv, kubefed_binary, kubefed_missing};

/// How a spec comes to be skipped.
#[derive(Clone, Copy, Debug)]
enum By {
    /// This test's `-ginkgo.skip` ([`SKIP`]).
    Regex,
    /// The suite itself, in managed mode with a cluster-scoped control
    /// plane: a `framework.Skipf` in this file of `test/e2e/`, which its
    /// skip message names.
    Suite(&'static str),
}

/// A spec that does not run here: its full text (as the report names it),
/// how it is skipped, and why.
struct Skipped {
    spec: &'static str,
    by: By,
    why: &'static str,
}

/// Every spec that is skipped, with why; every other spec of the suite
/// must pass.
const SKIPPED: &[Skipped] = &[
    Skipped {
        spec: "Default KubeFedConfig is created by mutating admissing webhook and preserves values set by user",
        by: By::Regex,
        why: "defaulting.go: tests KubeFed's mutating admission webhook, which no program here runs (init writes the defaulted KubeFedConfig; kubefed_ref.rs compares it with the chart's)",
    },
    Skipped {
        spec: "Default KubeFedConfig does not cause controller-manager to fail",
        by: By::Regex,
        why: "defaulting.go: creates a bare KubeFedConfig for that webhook to default, then spawns KubeFed's own controller-manager and reads its log",
    },
    Skipped {
        spec: "Leader Elector should chose secondary instance, primary goes down",
        by: By::Regex,
        why: "leaderelection.go: spawns two of KubeFed's own controller-manager processes and tests their leader election, not the federation's controller (ours: watch::only_the_leader_writes_and_the_standby_takes_over_when_it_dies)",
    },
    Skipped {
        spec: "Core API Validation for FederatedTypeConfig should fail when an invalid FederatedTypeConfig is created or updated",
        by: By::Regex,
        why: "validation.go: tests KubeFed's validating admission webhook, which no program here runs",
    },
    Skipped {
        spec: "Core API Validation for KubeFedCluster should fail when an invalid KubeFedCluster is created or updated",
        by: By::Regex,
        why: "validation.go: as above",
    },
    Skipped {
        spec: "Core API Validation for KubeFedConfig should fail when an invalid KubeFedConfig is created or updated",
        by: By::Regex,
        why: "validation.go: as above",
    },
    Skipped {
        spec: "Core API Validation when running with namespace scoped deployment for FederatedTypeConfig should succeed when an invalid FederatedTypeConfig is created outside the kubefed system namespace",
        by: By::Regex,
        why: "validation.go: as above (and for a namespaced control plane only)",
    },
    Skipped {
        spec: "Core API Validation when running with namespace scoped deployment for KubeFedCluster should succeed when an invalid KubeFedCluster is created outside the kubefed system namespace",
        by: By::Regex,
        why: "validation.go: as above",
    },
    Skipped {
        spec: "Core API Validation when running with namespace scoped deployment for KubeFedConfig should succeed when an invalid KubeFedConfig is created outside the kubefed system namespace",
        by: By::Regex,
        why: "validation.go: as above",
    },
    Skipped {
        spec: "Simulated Scale should create a simulated federation",
        by: By::Suite("scale.go"),
        why: "a simulated federation needs a namespaced control plane and KubeFed's controllers in process",
    },
    Skipped {
        spec: "[NOT_READY] Simulated not-ready nodes should simulate unhealthy clusters",
        by: By::Suite("not_ready.go"),
        why: "as Simulated Scale (ours: watch::a_member_turns_not_ready_after_the_failure_threshold)",
    },
    Skipped {
        spec: "Placement should be computed from namespace and resource placement for a namespaced control plane",
        by: By::Suite("placement.go"),
        why: "for a namespaced control plane only (ours: parity::a_namespace_scoped_control_plane_propagates_its_own_namespace_only)",
    },
    Skipped {
        spec: "Scheduler Manager when federatedtypeconfig resources are changed related scheduler and plugin controllers should be dynamically disabled/enabled",
        by: By::Suite("schedulermanager.go"),
        why: "tests KubeFed's in-process SchedulingManager: in-memory controllers only",
    },
    Skipped {
        spec: "FTC controller should be refreshed if the target CRD version changed for a federated CRD",
        by: By::Suite("ftccontroller.go"),
        why: "starts KubeFed's FederatedTypeConfig controller in process: in-memory controllers only (ours: parity::a_target_version_change_is_followed)",
    },
];

/// The `-ginkgo.skip` regex: the specs of [`SKIPPED`] skipped [`By::Regex`].
const SKIP: &str = r"KubeFedConfig is created by mutating|KubeFedConfig does not cause controller-manager to fail|Core API Validation|Leader Elector";

/// What became of a spec, as the JUnit report says.
#[derive(Debug, PartialEq)]
enum Outcome {
    Passed,
    /// With the skip message (empty when skipped by the regex).
    Skipped(String),
    Failed(String),
}

/// The specs of ginkgo v1's JUnit report (`reporters/junit_reporter.go`:
/// one `<testcase name=...>` each, with a `<skipped>` or `<failure>`
/// element when it did not pass), by their text with runs of white space
/// made one (the suite's texts have double spaces).
fn junit_specs(xml: &str) -> BTreeMap<String, Outcome> {
    let mut specs = BTreeMap::new();
    for case in xml.split("<testcase ").skip(1) {
        let name = case
            .split_once("name=\"")
            .and_then(|(_, rest)| rest.split_once('"'))
            .map(|(name, _)| unescape(name))
            .unwrap_or_else(|| panic!("a testcase without a name: {case}"));
        let case = case.split("</testcase>").next().unwrap();
        let outcome = if let Some(text) = element(case, "failure") {
            Outcome::Failed(text)
        } else if let Some(text) = element(case, "skipped") {
            Outcome::Skipped(text)
        } else {
            Outcome::Passed
        };
        let name = name.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            specs.insert(name.clone(), outcome).is_none(),
            "{name} twice in the report"
        );
    }
    specs
}

/// The text of the first `<tag ...>text</tag>` (or `<tag/>`) in `xml`.
fn element(xml: &str, tag: &str) -> Option<String> {
    let start = xml.find(&format!("<{tag}"))?;
    let rest = &xml[start..];
    let open_end = rest.find('>')?;
    if rest[..open_end].ends_with('/') {
        return Some(String::new());
    }
    let body = &rest[open_end + 1..];
    let end = body.find(&format!("</{tag}>"))?;
    Some(unescape(&body[..end]))
}

/// XML's escapes, as Go's `encoding/xml` writes them.
fn unescape(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let end = rest[i..].find(';').map(|e| i + e);
        let entity = end.map(|e| &rest[i + 1..e]);
        let c = match entity {
            Some("lt") => Some('<'),
            Some("gt") => Some('>'),
            Some("amp") => Some('&'),
            Some("quot") => Some('"'),
            Some("apos") => Some('\''),
            Some(e) if e.starts_with("#x") => u32::from_str_radix(&e[2..], 16)
                .ok()
                .and_then(char::from_u32),
            Some(e) if e.starts_with('#') => e[1..].parse().ok().and_then(char::from_u32),
            _ => None,
        };
        match (c, end) {
            (Some(c), Some(e)) => {
                out.push(c);
                rest = &rest[e + 1..];
            }
            _ => {
                out.push('&');
                rest = &rest[i + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[test]
fn kubefeds_own_e2e_suite_passes_with_the_watch_as_its_controller() {
    let Some(e2e) = kubefed_binary("e2e.test") else {
        testenv::skip(&kubefed_missing("e2e test binary (e2e.test)"));
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
    let report = env.dir().join("kubefed-e2e-junit.xml");
    let out = Command::new(&e2e)
        .arg(format!("-kubeconfig={}", kc.display()))
        .args([
            "-in-memory-controllers=false",
            "-ginkgo.noColor",
            "-ginkgo.v",
            &format!("-ginkgo.reportFile={}", report.display()),
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
    let stderr_tail = String::from_utf8_lossy(&out.stderr)
        .lines()
        .rev()
        .take(20)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join("\n");
    let xml = std::fs::read_to_string(&report).unwrap_or_else(|e| {
        panic!(
            "KubeFed's e2e suite wrote no report ({e}):\n{tail}\n{stderr_tail}\nwatch:\n{}",
            log(&watch_log)
        )
    });
    let specs = junit_specs(&xml);
    // Every spec of the suite is in the report, the skipped ones too.
    let total: usize = text
        .lines()
        .find_map(|l| {
            let rest = l.strip_prefix("Will run ")?;
            rest.split(" of ").nth(1)?.split(' ').next()?.parse().ok()
        })
        .unwrap_or_else(|| panic!("no `Will run N of M specs` line:\n{tail}"));
    assert_eq!(specs.len(), total, "specs in the report:\n{specs:#?}");

    let failed: Vec<String> = specs
        .iter()
        .filter_map(|(name, o)| match o {
            Outcome::Failed(why) => Some(format!("  {name}:\n{why}")),
            _ => None,
        })
        .collect();
    let listed: BTreeMap<&str, &Skipped> = SKIPPED.iter().map(|s| (s.spec, s)).collect();
    assert_eq!(listed.len(), SKIPPED.len(), "a spec listed twice");
    // Skipped, each as the list says (the suite's own skips name its file).
    let mut wrong = Vec::new();
    for (name, o) in &specs {
        let Outcome::Skipped(message) = o else {
            continue;
        };
        match listed.get(name.as_str()).map(|s| s.by) {
            None => wrong.push(format!("  {name}: skipped, not listed ({message})")),
            Some(By::Regex) if !message.is_empty() => wrong.push(format!(
                "  {name}: skipped by the suite, listed as by -ginkgo.skip ({message})"
            )),
            Some(By::Suite(file)) if !message.contains(&format!("test/e2e/{file}:")) => wrong.push(
                format!("  {name}: skipped, but not by {file} ({message:?})"),
            ),
            Some(_) => {}
        }
    }
    for s in SKIPPED {
        if !matches!(specs.get(s.spec), Some(Outcome::Skipped(_))) {
            wrong.push(format!(
                "  {}: listed as skipped, but {:?}",
                s.spec,
                specs.get(s.spec)
            ));
        }
    }
    assert!(
        out.status.success() && failed.is_empty() && wrong.is_empty(),
        "KubeFed's e2e suite: failed specs:\n{}\nskipped specs not as listed in SKIPPED:\n{}\n\noutput:\n{tail}\n{stderr_tail}\nwatch:\n{}",
        failed.join("\n"),
        wrong.join("\n"),
        log(&watch_log)
    );
    let passed: BTreeSet<&String> = specs
        .iter()
        .filter(|(_, o)| **o == Outcome::Passed)
        .map(|(n, _)| n)
        .collect();
    assert_eq!(passed.len(), total - SKIPPED.len());
    println!("{} of {total} specs passed; skipped:", passed.len());
    for s in SKIPPED {
        let by = match s.by {
            By::Regex => "-ginkgo.skip".to_string(),
            By::Suite(file) => format!("the suite ({file})"),
        };
        println!("  {} [{by}]: {}", s.spec, s.why);
    }
    assert!(stopped.success(), "{}", log(&watch_log));
}

/// The report's three outcomes, as ginkgo v1.16's JUnit reporter writes
/// them (Go's `encoding/xml` escapes), are read back.
#[test]
fn ginkgo_v1_junit_reports_are_read() {
    let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
  <testsuite name="KubeFed e2e suite" tests="3" failures="1" errors="0" time="1.5">
      <testcase name="Federated &#34;configmaps&#34;  should be created" classname="KubeFed e2e suite" time="1"></testcase>
      <testcase name="FTC controller should be refreshed" classname="KubeFed e2e suite" time="0">
          <skipped>sigs.k8s.io/kubefed@v0.10.0/test/e2e/ftccontroller.go:56&#xA;Dec  3 12:00:00.000: FTC controller can only be tested when controllers are running in-process.&#xA;x.go:1</skipped>
      </testcase>
      <testcase name="Leader Elector should chose" classname="KubeFed e2e suite" time="0">
          <skipped></skipped>
      </testcase>
      <testcase name="KubeFedCluster should report" classname="KubeFed e2e suite" time="0.5">
          <failure type="Failure">a &lt;b&gt; &amp; &#39;c&#39;</failure>
      </testcase>
  </testsuite>"#;
    let specs = junit_specs(xml);
    assert_eq!(
        specs.get(r#"Federated "configmaps" should be created"#),
        Some(&Outcome::Passed)
    );
    let Some(Outcome::Skipped(m)) = specs.get("FTC controller should be refreshed") else {
        panic!("{specs:?}")
    };
    assert!(m.contains("test/e2e/ftccontroller.go:56\nDec"), "{m}");
    assert_eq!(
        specs.get("Leader Elector should chose"),
        Some(&Outcome::Skipped(String::new()))
    );
    assert_eq!(
        specs.get("KubeFedCluster should report"),
        Some(&Outcome::Failed("a <b> & 'c'".into()))
    );
    assert_eq!(specs.len(), 4);
}
