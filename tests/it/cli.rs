//! The command-line frame through the built binaries: version, completion
//! scripts (and that `completions/` is current), the kubectl plugin and its
//! completion helper, usage errors.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const KUBEFEDCTL: &str = env!("CARGO_BIN_EXE_kubefedctl");
const KUBECTL_FED: &str = env!("CARGO_BIN_EXE_kubectl-fed");
const KUBECTL_COMPLETE_FED: &str = env!("CARGO_BIN_EXE_kubectl_complete-fed");

fn run(bin: &str, args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .env_remove("COMPLETE")
        .env_remove("KUBECONFIG");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd.output().expect("running the binary")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn version_prints_a_line_and_documents() {
    let o = run(KUBEFEDCTL, &["version"], &[]);
    assert!(o.status.success());
    let line = stdout(&o);
    let expected = format!(
        "kubefedctl version: v{} (commit ",
        env!("CARGO_PKG_VERSION")
    );
    assert!(line.starts_with(&expected), "{line}");

    let o = run(KUBEFEDCTL, &["version", "-o", "json"], &[]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let v = &doc["clientVersion"];
    assert_eq!(v["gitVersion"], format!("v{}", env!("CARGO_PKG_VERSION")));
    assert!(v["gitCommit"].as_str().is_some_and(|c| !c.is_empty()));
    assert!(v["platform"].as_str().unwrap().contains("linux"));

    let o = run(KUBEFEDCTL, &["version", "-o", "yaml"], &[]);
    let yaml: serde_json::Value = serde_saphyr::from_str(&stdout(&o)).unwrap();
    assert_eq!(yaml, doc);

    let o = run(KUBEFEDCTL, &["version", "-o", "xml"], &[]);
    assert_eq!(o.status.code(), Some(2), "usage errors exit 2");
    assert!(stderr(&o).contains("invalid value 'xml'"), "{}", stderr(&o));
}

#[test]
fn usage_errors_exit_2_and_help_lists_only_working_commands() {
    let o = run(KUBEFEDCTL, &["frobnicate"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("unrecognized subcommand 'frobnicate'"));
    // A value out of range is refused, not quietly raised.
    let o = run(KUBEFEDCTL, &["reconcile", "--attempts", "0"], &[]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("invalid value '0' for '--attempts <N>'"),
        "{}",
        stderr(&o)
    );
    // Scripts written for kubefedctl v0.10: bare prints the help (exit 0),
    // klog's --v=N is -v N.
    let o = run(KUBEFEDCTL, &[], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("Usage:"), "{}", stdout(&o));
    let o = run(KUBEFEDCTL, &["--v=4", "version"], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = run(KUBEFEDCTL, &["--help"], &[]);
    assert!(o.status.success());
    let help = stdout(&o);
    for flag in [
        "--kubeconfig",
        "--host-cluster-context",
        "--kubefed-namespace",
        "--verbosity",
    ] {
        assert!(help.contains(flag), "{flag} missing from help");
    }
    assert!(help.contains("kube-federation-system"));
}

#[test]
fn completions_directory_is_current() {
    let dir = crate::fixtures::root().join("completions");
    for (shell, file) in [
        ("bash", "kubefedctl.bash"),
        ("zsh", "_kubefedctl"),
        ("fish", "kubefedctl.fish"),
        ("powershell", "_kubefedctl.ps1"),
    ] {
        let o = run(KUBEFEDCTL, &["completion", shell], &[]);
        assert!(o.status.success(), "{shell}: {}", stderr(&o));
        let generated = stdout(&o);
        assert!(generated.contains("kubefedctl"));
        let path = dir.join(file);
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == generated,
            "{} is out of date: run hack/update-generated.sh",
            path.display()
        );
    }
}

fn kubeconfig_with_contexts(names: &[&str]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kubefedctl-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut text = String::from(
        "apiVersion: v1\nkind: Config\ncurrent-context: alpha\nclusters:\n- name: c\n  cluster: {server: \"https://127.0.0.1:1\"}\nusers:\n- name: u\n  user: {token: t}\ncontexts:\n",
    );
    for n in names {
        text.push_str(&format!(
            "- name: {n}\n  context: {{cluster: c, user: u}}\n"
        ));
    }
    let path = dir.join("kubeconfig");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn context_flags_complete_from_the_kubeconfig() {
    let kc = kubeconfig_with_contexts(&["alpha", "beta", "bravo"]);
    let kc = kc.to_str().unwrap();

    // kubectl fed --host-cluster-context b<TAB>, kubeconfig from KUBECONFIG.
    let o = run(
        KUBECTL_COMPLETE_FED,
        &["--host-cluster-context", "b"],
        &[("KUBECONFIG", kc)],
    );
    let out = stdout(&o);
    let values: Vec<&str> = out.lines().map(|l| l.split('\t').next().unwrap()).collect();
    assert_eq!(values, ["beta", "bravo", ":4"], "{out}");

    // The same through the shell protocol, kubeconfig from --kubeconfig.
    let o = run(
        KUBEFEDCTL,
        &[
            "--",
            "kubefedctl",
            "--kubeconfig",
            kc,
            "--host-cluster-context",
            "",
        ],
        &[("COMPLETE", "fish")],
    );
    let out = stdout(&o);
    let values: Vec<&str> = out.lines().map(|l| l.split('\t').next().unwrap()).collect();
    assert_eq!(values, ["alpha", "beta", "bravo"], "{out}");
    assert!(out.lines().next().unwrap().contains("current context"));
}

#[test]
fn kubectl_plugin_binary_works_and_names_itself() {
    let o = run(KUBECTL_FED, &["version"], &[]);
    assert!(o.status.success());
    assert!(stdout(&o).starts_with("kubefedctl version: v"));
    let o = run(KUBECTL_FED, &["--help"], &[]);
    assert!(stdout(&o).contains("Usage: kubectl fed"), "{}", stdout(&o));
    let o = run(KUBECTL_COMPLETE_FED, &[""], &[]);
    let out = stdout(&o);
    assert!(out.lines().any(|l| l.starts_with("version\t")), "{out}");
    assert!(out.ends_with(":4\n"));
}

/// `kubectl fed version` through the real kubectl, when one is installed.
#[test]
fn kubectl_finds_the_plugin_on_path() {
    // hack/test.sh (through hack/testenv.sh) installs kubectl when missing.
    let kubectl = ["/usr/bin/kubectl", "/usr/local/bin/kubectl"]
        .into_iter()
        .find(|p| Path::new(p).exists())
        .expect("kubectl is needed here: run the tests with hack/test.sh, which installs it");
    let bin_dir = Path::new(KUBECTL_FED).parent().unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let o = run(kubectl, &["fed", "version"], &[("PATH", &path)]);
    assert!(o.status.success(), "kubectl fed version: {}", stderr(&o));
    assert!(
        stdout(&o).starts_with("kubefedctl version: v"),
        "{}",
        stdout(&o)
    );
}

/// Runs the binary with a stdout whose reader is already gone, as in
/// `kubefedctl ... | head -0`: every write meets a broken pipe.
fn run_into_closed_pipe(args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().expect("a pipe");
    drop(reader);
    Command::new(KUBEFEDCTL)
        .args(args)
        .env_remove("COMPLETE")
        .env_remove("KUBECONFIG")
        .stdout(writer)
        .stderr(std::process::Stdio::piped())
        .output()
        .expect("running the binary")
}

#[test]
fn printing_commands_stop_quietly_when_the_reader_goes_away() {
    let root = crate::fixtures::root();
    let demo = root.join("testdata/demo");
    let demo = demo.to_str().unwrap();
    let seed = root.join("testdata/seeds/federated-deployment.yaml");
    let seed = seed.to_str().unwrap();
    let app = root.join("testdata/federate/app.yaml");
    let app = app.to_str().unwrap();
    for args in [
        &["version"][..],
        &["version", "-o", "json"],
        &["completion", "bash"],
        &["completion", "fish"],
        &["reconcile", "--from", demo],
        &["reconcile", "--from", demo, "-o", "json"],
        &["reconcile", "--from", seed, "--cluster", "c1"],
        &["federate", "-f", app],
        &["federate", "-f", app, "-o", "json"],
        &["init", "-o", "yaml"],
        &["--help"],
    ] {
        let out = run_into_closed_pipe(args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {err}");
        assert!(
            !err.contains("panicked") && !err.contains("error:") && !err.contains("Broken pipe"),
            "{args:?} says nothing about the pipe: {err}"
        );
    }
    // A real error still is one.
    let out = run_into_closed_pipe(&["reconcile", "--from", "/no/such/dir"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("error:"));
}

/// `docs/man/` is what the clap tree renders (UPDATE_MAN=1 rewrites it, as
/// `hack/update-generated.sh` does).
#[test]
fn man_pages_are_current() {
    let dir = crate::fixtures::root().join("docs/man");
    let pages = kubefedctl::man::pages();
    if std::env::var_os("UPDATE_MAN").is_some() {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        for (name, text) in &pages {
            std::fs::write(dir.join(name), text).unwrap();
        }
    }
    let mut names: Vec<&str> = pages.iter().map(|(n, _)| n.as_str()).collect();
    names.sort();
    assert!(names.contains(&"kubefedctl.1") && names.contains(&"kubefedctl-reconcile.1"));
    let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
        .map(|d| {
            d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    on_disk.sort();
    assert_eq!(
        on_disk, names,
        "docs/man is stale: run hack/update-generated.sh"
    );
    for (name, text) in &pages {
        let old = std::fs::read(dir.join(name)).unwrap_or_default();
        assert!(
            old == *text,
            "docs/man/{name} is stale: run hack/update-generated.sh"
        );
        let page = String::from_utf8_lossy(text);
        assert!(page.contains(".TH"), "{name} is a man page");
    }
    let reconcile = String::from_utf8_lossy(
        &pages
            .iter()
            .find(|(n, _)| n == "kubefedctl-reconcile.1")
            .unwrap()
            .1,
    )
    .into_owned();
    assert!(reconcile.contains("lock\\-timeout"), "flags are documented");
}

/// A scratch folder of this test's own under the target directory.
fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// One meaning per flag (issue 53): a flag that does not apply to the mode
/// is a usage error naming the mode, every malformed value exits 2 before
/// any connection (the kubeconfig does not even exist), and the plan flags
/// never write.
#[test]
fn flags_that_do_not_apply_are_usage_errors_before_any_connection() {
    let demo = crate::fixtures::root().join("testdata/demo");
    let demo = demo.to_str().unwrap();
    let nowhere = ["--kubeconfig", "/nonexistent/kubeconfig"];
    for extra in [
        &["-n", "shop"][..],
        &["-A"],
        &["-l", "app=web"],
        &["--type", "configmaps"],
        &["--wait-ready"],
        &["--exit-code"],
        &["--diff"],
        &["--dry-run"],
        &["--leader-elect"],
        &["--lock-timeout", "1m"],
        &["--concurrency", "2"],
    ] {
        let mut args = vec!["reconcile", "--from", demo];
        args.extend_from_slice(extra);
        let o = run(KUBEFEDCTL, &args, &[]);
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        assert!(stderr(&o).contains("--from"), "{extra:?}: {}", stderr(&o));
    }
    for args in [
        &["reconcile", "--concurrency", "0"][..],
        &["reconcile", "-l", "tier in web"],
        &["reconcile", "--cluster", "Bad_Name"],
        &["reconcile", "-o", "markdown"],
        &["reconcile", "--dry-run=bogus"],
        &["reconcile", "--diff", "--wait-ready"],
        &["join", "Bad_Name", "--cluster-context", "member1"],
        &["join", "m1", "--token-ttl", "1s"],
        &["join", "m1", "--dry-run=server"],
        &["unjoin", "Bad_Name"],
        &["federate", "configmaps", "x", "--contents"],
        &["rotate", "--dry-run=server"],
    ] {
        let mut all = args.to_vec();
        all.extend(nowhere);
        let o = run(KUBEFEDCTL, &all, &[]);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(
            !stderr(&o).contains("/nonexistent"),
            "{args:?}: refused before the kubeconfig is read: {}",
            stderr(&o)
        );
    }
    // kubectl's spellings are accepted (then the missing kubeconfig stops it).
    for args in [
        &["reconcile", "--dry-run=client"][..],
        &["reconcile", "--dry-run=server"],
        &["reconcile", "--diff"],
        &["join", "m1", "--dry-run=client"],
        &[
            "orphaning-deletion",
            "enable",
            "fdeploy",
            "web",
            "--dry-run",
        ],
    ] {
        let mut all = args.to_vec();
        all.extend(nowhere);
        let o = run(KUBEFEDCTL, &all, &[]);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        assert!(
            stderr(&o).contains("/nonexistent"),
            "{args:?}: {}",
            stderr(&o)
        );
    }
}

/// Offline: `--output-dir` honours `-o`, `federate -f` refuses what is
/// federated already, and a name a cluster would refuse is an error naming
/// its file before anything is written.
#[test]
fn offline_output_follows_o_and_bad_input_writes_nothing() {
    let dir = scratch("offline-output");
    let demo = crate::fixtures::root().join("testdata/demo");
    let out = dir.join("out");
    let o = run(
        KUBEFEDCTL,
        &[
            "reconcile",
            "--from",
            demo.to_str().unwrap(),
            "--output-dir",
            out.to_str().unwrap(),
            "-o",
            "json",
        ],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let mut files = Vec::new();
    let mut stack = vec![out.clone()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().map(|e| e.unwrap().path()) {
            if e.is_dir() {
                stack.push(e);
            } else if !e.ends_with(".kubefedctl-render") {
                files.push(e);
            }
        }
    }
    assert!(!files.is_empty());
    for f in &files {
        assert_eq!(f.extension().unwrap(), "json", "{}", f.display());
        let text = std::fs::read_to_string(f).unwrap();
        serde_json::from_str::<serde_json::Value>(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", f.display()));
    }

    let federated = dir.join("federated.yaml");
    std::fs::write(
        &federated,
        "apiVersion: types.kubefed.io/v1beta1\nkind: FederatedConfigMap\nmetadata: {name: web, namespace: shop}\nspec: {template: {data: {a: '1'}}}\n",
    )
    .unwrap();
    let o = run(
        KUBEFEDCTL,
        &["federate", "-f", federated.to_str().unwrap()],
        &[],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    assert!(
        stderr(&o).contains(
            "document 1: FederatedConfigMap (types.kubefed.io/v1beta1) is federated already"
        ),
        "{}",
        stderr(&o)
    );

    let input = dir.join("input");
    std::fs::create_dir_all(&input).unwrap();
    std::fs::copy(demo.join("clusters.yaml"), input.join("clusters.yaml")).unwrap();
    std::fs::write(
        input.join("evil.yaml"),
        "apiVersion: types.kubefed.io/v1beta1\nkind: FederatedConfigMap\nmetadata: {name: ../../x/pwned, namespace: shop}\nspec: {template: {data: {a: '1'}}, placement: {clusterSelector: {}}}\n",
    )
    .unwrap();
    let rendered = dir.join("rendered");
    let o = run(
        KUBEFEDCTL,
        &[
            "reconcile",
            "--from",
            input.to_str().unwrap(),
            "--output-dir",
            rendered.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(
            "evil.yaml: document 1: FederatedConfigMap metadata.name \"../../x/pwned\" is not valid"
        ),
        "{}",
        stderr(&o)
    );
    assert!(!rendered.exists(), "nothing written");
    assert!(!dir.join("x").exists() && !Path::new("x/pwned").exists());
}

/// Help as kubectl's: commands in groups, a command's flags under headings
/// with the global options apart, and the exit-code table.
#[test]
fn help_groups_commands_and_flags() {
    let o = run(KUBEFEDCTL, &["--help"], &[]);
    let help = stdout(&o);
    for heading in [
        "Membership:",
        "Federated types:",
        "Propagation:",
        "Inspection:",
    ] {
        assert!(help.contains(heading), "{heading}\n{help}");
    }
    assert_eq!(help.matches("  reconcile ").count(), 1, "{help}");
    let o = run(KUBEFEDCTL, &["reconcile", "--help"], &[]);
    let help = stdout(&o);
    let at = |h: &str| help.find(h).unwrap_or_else(|| panic!("{h}\n{help}"));
    assert!(
        at("Plan (writes nothing):") < at("Global options:"),
        "{help}"
    );
    assert!(at("Selection:") < at("--kubeconfig"), "{help}");
    assert!(at("Global options:") < at("--kubeconfig"), "{help}");
    assert!(help.contains("4 changes pending"), "{help}");
}

/// `--log-format json`: every line on stderr is a JSON object, the
/// command's own notes and its final error included (they were plain text).
#[test]
fn json_logs_make_every_diagnostic_line_json() {
    let demo = crate::fixtures::root().join("testdata/demo");
    let dir = scratch("json-logs");
    std::fs::write(dir.join("bad.yaml"), "kind: Nothing\nmetadata: {name: x}\n").unwrap();
    for (args, code, level) in [
        (
            vec!["reconcile", "--from", demo.to_str().unwrap()],
            0,
            "info",
        ),
        (
            vec!["reconcile", "--from", dir.to_str().unwrap()],
            1,
            "error",
        ),
    ] {
        let mut all = vec!["--log-format", "json"];
        all.extend(args);
        let o = run(KUBEFEDCTL, &all, &[]);
        assert_eq!(o.status.code(), Some(code), "{}", stderr(&o));
        let err = stderr(&o);
        assert!(!err.is_empty());
        for line in err.lines() {
            let v: serde_json::Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"));
            assert!(v["message"].as_str().is_some(), "{line}");
        }
        assert!(
            err.lines()
                .any(|l| l.contains(&format!("\"level\":\"{level}\""))),
            "{err}"
        );
    }
}

/// Every `kubefedctl` (or `kubectl fed`) command line in the README's and
/// docs/'s shell blocks parses with the command tree as it is: a renamed
/// or removed flag, a value it refuses, or two flags that cannot go
/// together fail here, naming the page and line. (What the examples do
/// on clusters is for the tests of each command.)
#[test]
fn every_command_line_in_the_docs_parses() {
    use clap::Parser;
    let root = crate::fixtures::root();
    let mut pages = vec![root.join("README.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    let (mut checked, mut broken) = (0, Vec::new());
    for page in &pages {
        let text = std::fs::read_to_string(page).unwrap();
        let mut in_shell = false;
        let mut pending = String::new();
        for (i, line) in text.lines().enumerate() {
            if let Some(lang) = line.trim_start().strip_prefix("```") {
                in_shell = !in_shell && matches!(lang, "" | "sh" | "bash" | "console" | "shell");
                continue;
            }
            if !in_shell {
                continue;
            }
            let line = line.trim().trim_start_matches("$ ");
            if let Some(start) = line.strip_suffix('\\') {
                pending.push_str(start);
                continue;
            }
            let whole = std::mem::take(&mut pending) + line;
            let Some(words) = command_words(&whole) else {
                continue;
            };
            checked += 1;
            let mut argv = vec!["kubefedctl".to_string()];
            argv.extend(words);
            if let Err(e) = kubefedctl::cli::Cli::try_parse_from(&argv)
                && !matches!(
                    e.kind(),
                    clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion
                )
            {
                let first = e.to_string().lines().next().unwrap_or("").to_string();
                broken.push(format!(
                    "{}:{}: {whole}\n    {first}",
                    page.display(),
                    i + 1
                ));
            }
        }
    }
    assert!(checked > 40, "only {checked} command lines found");
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}

/// The words of a `kubefedctl ...` or `kubectl fed ...` command line after
/// the program's name, up to a comment or a shell operator; None for any
/// other line, a synopsis, or one that needs the shell (`$(...)`).
fn command_words(line: &str) -> Option<Vec<String>> {
    let rest = line
        .strip_prefix("kubefedctl ")
        .or_else(|| line.strip_prefix("kubectl fed "))?;
    // A synopsis (`status TYPE [NAME] [-n NS | -A]`, `--kubefed-namespace
    // <ns>`), not a command to run.
    let synopsis = rest
        .split_whitespace()
        .any(|w| w.starts_with('[') || (w.starts_with('<') && w.ends_with('>')));
    if synopsis || rest.contains("$(") || rest.contains('`') {
        return None;
    }
    let (mut words, mut word, mut quote) = (Vec::new(), String::new(), None::<char>);
    for c in rest.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => quote = Some(c),
            (None, '#') if word.is_empty() => break,
            (None, '|' | '>' | '<' | ';' | '&') => break,
            (None, c) if c.is_whitespace() => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
            }
            (None, c) => word.push(c),
        }
    }
    if !word.is_empty() {
        words.push(word);
    }
    Some(words)
}
