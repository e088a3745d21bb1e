//! Errors and logs a user can act on, through the built binary: a server
//! that refuses, one that never answers, one whose TLS certificate is
//! wrong (another CA, another name, expired), a member that is down, a
//! missing kubeconfig, YAML files with a syntax error, and `-v 6`'s
//! request lines (`-v 8`'s bodies, never a token) against the real host.
//! Each error is one `error:` line naming the server or file, in plain
//! words: no library names, no second `error:`.

use crate::fixtures::{KUBEFEDCTL, kubefedctl, write_kubeconfig};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;
use testenv::pki::{Ca, CertPair, CertSpec};
use testenv::proxy::{Proxy, ProxyConfig};
use testenv::{Faults, TestEnv};

/// The token the hand-written kubeconfigs carry: never printed.
const TOKEN: &str = "kubefedctl-errors-token-never-printed";

/// A directory of this test's own.
fn scratch(test: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("kubefedctl-errors-{}-{test}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A kubeconfig whose one context, `host`, points at `server`, trusting
/// `ca_pem` when given.
fn kubeconfig(dir: &Path, server: &str, ca_pem: Option<&str>) -> PathBuf {
    use base64::Engine as _;
    let ca = ca_pem.map_or(String::new(), |pem| {
        format!(
            ", certificate-authority-data: {}",
            base64::engine::general_purpose::STANDARD.encode(pem)
        )
    });
    let text = format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: host\nclusters:\n- name: c\n  cluster: {{server: \"{server}\"{ca}}}\nusers:\n- name: u\n  user: {{token: {TOKEN}}}\ncontexts:\n- name: host\n  context: {{cluster: c, user: u}}\n"
    );
    let path = dir.join("kubeconfig");
    std::fs::write(&path, text).unwrap();
    path
}

/// Runs kubefedctl with `args` and `envs`: exit code and stderr.
fn run(args: &[&str], envs: &[(&str, &str)]) -> (i32, String) {
    let mut cmd = Command::new(KUBEFEDCTL);
    cmd.args(args)
        .env_remove("KUBECONFIG")
        .env_remove("COMPLETE")
        .stdin(std::process::Stdio::null());
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("running kubefedctl");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The one `error:` line of a failed run, checked for library speak.
fn error_line(code: i32, stderr: &str) -> String {
    assert_eq!(code, 1, "{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(lines.len(), 1, "one error line: {stderr}");
    let line = lines[0].to_string();
    assert_eq!(line.matches("error:").count(), 1, "{line}");
    for library in [
        "ServiceError",
        "hyper",
        "client error (",
        "os error",
        "tcp connect error",
        "deadline has elapsed",
        "invalid peer certificate",
        "https://docs",
        "<input>",
        TOKEN,
    ] {
        assert!(!line.contains(library), "{library:?} in {line}");
    }
    line
}

/// A loopback port nobody listens on (bound, then let go).
fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn a_refused_connection_names_the_server_and_the_context() {
    let dir = scratch("refused");
    let server = format!("https://127.0.0.1:{}", free_port());
    let kc = kubeconfig(&dir, &server, None);
    let (code, stderr) = run(&["--kubeconfig", kc.to_str().unwrap(), "status"], &[]);
    assert_eq!(
        error_line(code, &stderr),
        format!(
            "error: the connection to the server {server} was refused (context \"host\"): is it running, and are the host and port right?"
        )
    );
}

#[test]
fn a_server_that_never_answers_names_the_limit() {
    let dir = scratch("silent");
    // Accepted by the kernel, never answered: the TLS handshake hangs.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let server = format!("https://{}", listener.local_addr().unwrap());
    let kc = kubeconfig(&dir, &server, None);
    let (code, stderr) = run(
        &[
            "--kubeconfig",
            kc.to_str().unwrap(),
            "status",
            "--request-timeout",
            "1s",
        ],
        &[],
    );
    assert_eq!(
        error_line(code, &stderr),
        format!(
            "error: the connection to the server {server} timed out after 1s (context \"host\", --request-timeout 1s)"
        )
    );
    // The flag's limit, not the 10 s connect limit of the default: the
    // line names the limit the client was built with and that fired (no
    // wall-clock bound, which a busy machine could break).
    drop(listener);

    // A server that finishes the handshake, then says nothing.
    let ca = Ca::new("errors-silent-ca").unwrap();
    let stuck = tls_server(&ca, ca.issue_serving_cert("silent", &[]).unwrap());
    stuck.set_faults(Faults {
        latency: Duration::from_secs(120),
        ..Faults::default()
    });
    let kc = kubeconfig(&dir, &stuck.url(), Some(ca.cert_pem()));
    let (code, stderr) = run(
        &[
            "--kubeconfig",
            kc.to_str().unwrap(),
            "status",
            "--request-timeout",
            "1s",
        ],
        &[],
    );
    assert_eq!(
        error_line(code, &stderr),
        format!(
            "error: the server {} did not answer within 1s (context \"host\", --request-timeout 1s)",
            stuck.url()
        )
    );
}

/// A TLS server on loopback serving `pair` (it forwards nowhere: no
/// request of these tests gets past the handshake, or past its latency).
fn tls_server(upstream_ca: &Ca, pair: CertPair) -> Proxy {
    Proxy::start(ProxyConfig {
        upstream: "https://127.0.0.1:1".into(),
        upstream_ca_pem: upstream_ca.cert_pem().to_string(),
        serving_cert_pem: pair.cert_pem,
        serving_key_pem: pair.key_pem,
        listen_port: 0,
    })
    .unwrap()
}

#[test]
fn tls_failures_name_the_server_and_the_problem() {
    let dir = scratch("tls");
    let trusted = Ca::new("errors-trusted-ca").unwrap();
    let other = Ca::new("errors-other-ca").unwrap();
    let cases = [
        (
            tls_server(&other, other.issue_serving_cert("other", &[]).unwrap()),
            "its certificate is signed by an unknown authority, not by the kubeconfig's certificate-authority",
        ),
        (
            tls_server(
                &trusted,
                trusted
                    .issue_cert(&CertSpec {
                        dns_names: vec!["example.invalid".into()],
                        loopback: false,
                        ips: Vec::new(),
                        validity: None,
                    })
                    .unwrap(),
            ),
            "its certificate is not valid for 127.0.0.1, only for example.invalid",
        ),
        (
            tls_server(
                &trusted,
                trusted
                    .issue_cert(&CertSpec {
                        dns_names: vec!["localhost".into()],
                        loopback: true,
                        ips: Vec::new(),
                        validity: Some(((2020, 1, 2), (2020, 3, 4))),
                    })
                    .unwrap(),
            ),
            "its certificate expired on 2020-03-04",
        ),
    ];
    for (server, problem) in &cases {
        let kc = kubeconfig(&dir, &server.url(), Some(trusted.cert_pem()));
        let (code, stderr) = run(&["--kubeconfig", kc.to_str().unwrap(), "status"], &[]);
        assert_eq!(
            error_line(code, &stderr),
            format!(
                "error: TLS failure with the server {} (context \"host\"): {problem}",
                server.url()
            )
        );
    }
}

#[test]
fn a_member_that_is_down_is_named_with_its_server() {
    let env = TestEnv::shared();
    let down = env.proxy("member2").unwrap();
    let kc = write_kubeconfig(
        env,
        "errors-member",
        env.kubeconfig()
            .current_context("host")
            .server("member2", &down.url()),
    );
    let ns = ["--kubefed-namespace", "errors-member"];
    let with = |args: &[&'static str]| -> Vec<&'static str> { [args, &ns[..]].concat() };
    kubefedctl(&kc, &with(&["init"])).ok();
    kubefedctl(&kc, &with(&["join", "member2"])).ok();
    down.set_faults(Faults {
        mode: testenv::Mode::Refuse,
        ..Faults::default()
    });
    let run = kubefedctl(
        &kc,
        &with(&["status", "--probe", "--probe-timeout", "2s", "-o", "json"]),
    )
    .ok();
    let doc: serde_json::Value = serde_json::from_str(&run.stdout).unwrap();
    let member2 = doc["clusters"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "member2")
        .unwrap();
    assert_eq!(
        member2["message"],
        format!(
            "cluster is not reachable: the connection to the server {} was refused (cluster \"member2\"): is it running, and are the host and port right?",
            down.url()
        ),
        "{doc}"
    );
    down.clear_faults();
}

#[test]
fn a_missing_kubeconfig_is_named_once() {
    let path = "/nonexistent/kubefedctl-errors/config";
    let (code, stderr) = run(&["--kubeconfig", path, "status"], &[]);
    let line = error_line(code, &stderr);
    assert_eq!(
        line,
        format!("error: cannot read kubeconfig {path}: no such file")
    );
    let (code, stderr) = run(&["status"], &[("KUBECONFIG", path)]);
    let line = error_line(code, &stderr);
    assert_eq!(
        line,
        format!("error: cannot read kubeconfig {path} (named by KUBECONFIG): no such file")
    );
    assert_eq!(line.matches(path).count(), 1, "{line}");
}

#[test]
fn yaml_syntax_errors_name_the_file_and_line() {
    let dir = scratch("yaml");
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\ndata:\n  a: [unclosed\n",
    )
    .unwrap();
    let bad = bad.to_str().unwrap();
    let want = format!("error: {bad}: invalid YAML: line 6, column 6: unclosed bracket '['");
    let (code, stderr) = run(&["reconcile", "--from", bad], &[]);
    assert_eq!(error_line(code, &stderr), want);
    // Files are read before any connection: a kubeconfig nobody answers.
    let kc = kubeconfig(&dir, &format!("https://127.0.0.1:{}", free_port()), None);
    let kc = kc.to_str().unwrap();
    let (code, stderr) = run(&["--kubeconfig", kc, "federate", "-f", bad], &[]);
    assert_eq!(error_line(code, &stderr), want);
    let (code, stderr) = run(&["--kubeconfig", kc, "enable", "-f", bad], &[]);
    assert_eq!(error_line(code, &stderr), want);
    // A kubeconfig that is not YAML is named with its line too.
    let (code, stderr) = run(&["--kubeconfig", bad, "status"], &[]);
    assert_eq!(
        error_line(code, &stderr),
        format!(
            "error: cannot read kubeconfig {bad}: invalid YAML: line 6, column 6: unclosed bracket '['"
        )
    );
}

/// `^METHOD https://127.0.0.1:PORT/PATH STATUS REASON in N milliseconds$`
fn is_request_line(line: &str, method: &str, status: &str) -> bool {
    let Some(rest) = line.strip_prefix(&format!("{method} https://127.0.0.1:")) else {
        return false;
    };
    let Some((url, tail)) = rest.split_once(' ') else {
        return false;
    };
    let Some(ms) = tail
        .strip_prefix(&format!("{status} in "))
        .and_then(|t| t.strip_suffix(" milliseconds"))
    else {
        return false;
    };
    url.contains('/') && !ms.is_empty() && ms.chars().all(|c| c.is_ascii_digit())
}

#[test]
fn verbose_runs_log_each_request_as_kubectl_and_never_a_token() {
    let env = TestEnv::shared();
    let kc = write_kubeconfig(
        env,
        "errors-verbose",
        env.kubeconfig().current_context("host"),
    );
    let token = std::fs::read_to_string(&kc)
        .unwrap()
        .lines()
        .find_map(|l| l.trim().strip_prefix("token: ").map(str::to_string))
        .expect("a token in the kubeconfig");
    let ns = ["--kubefed-namespace", "errors-verbose"];
    let with = |args: &[&'static str]| -> Vec<&'static str> { [args, &ns[..]].concat() };
    kubefedctl(&kc, &with(&["init"])).ok();
    kubefedctl(&kc, &with(&["join", "member1"])).ok();
    kubefedctl(&kc, &with(&["join", "member2"])).ok();

    let run = kubefedctl(&kc, &with(&["status", "-v", "6"])).ok();
    let lines: Vec<&str> = run.stderr.lines().collect();
    assert!(
        lines.iter().any(|l| is_request_line(l, "GET", "200 OK")),
        "a `GET https://... 200 OK in N milliseconds` line:\n{}",
        run.stderr
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("/kubefedclusters") && is_request_line(l, "GET", "200 OK")),
        "{}",
        run.stderr
    );
    for noise in [
        "tower::",
        "kube_client::",
        "hyper_util::",
        "Response Body:",
        &token,
    ] {
        assert!(
            !run.stderr.contains(noise),
            "{noise:?} at -v 6:\n{}",
            run.stderr
        );
    }
    // Below -v 6, no request lines.
    let quiet = kubefedctl(&kc, &with(&["status", "-v", "4"])).ok();
    assert!(
        !quiet
            .stderr
            .lines()
            .any(|l| is_request_line(l, "GET", "200 OK")),
        "{}",
        quiet.stderr
    );

    // -v 8: bodies too, but never the members' tokens (their Secrets are read).
    let run = kubefedctl(&kc, &with(&["status", "--probe", "-v", "8"])).ok();
    assert!(run.stderr.contains("Response Body: {"), "{}", run.stderr);
    // The members' clients log theirs too (the probes), no URL ends in `?`.
    assert!(
        run.stderr
            .lines()
            .any(|l| l.contains("/healthz ") && is_request_line(l, "GET", "200 OK")),
        "{}",
        run.stderr
    );
    assert!(!run.stderr.contains("? 200"), "{}", run.stderr);
    assert!(
        run.stderr.contains("Response Body: <")
            && run.stderr.contains("not shown: Secret or token data>"),
        "{}",
        run.stderr
    );
    let secrets = crate::fixtures::get(env, "host", "/api/v1/namespaces/errors-verbose/secrets")
        .expect("the federation's secrets");
    let member_tokens: Vec<String> = secrets["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["data"]["token"].as_str().map(str::to_string))
        .collect();
    assert!(!member_tokens.is_empty(), "{secrets}");
    for secret in member_tokens.iter().chain([&token]) {
        let plain = String::from_utf8(
            base64::Engine::decode(&base64::engine::general_purpose::STANDARD, secret)
                .unwrap_or_default(),
        )
        .unwrap_or_default();
        assert!(!run.stderr.contains(secret.as_str()), "a token at -v 8");
        assert!(
            plain.is_empty() || !run.stderr.contains(&plain),
            "a token at -v 8"
        );
    }

    // A request that got no answer: its line, then the one error line,
    // without kube's own `failed with error client error (Connect)`.
    let dir = scratch("verbose-refused");
    let server = format!("https://127.0.0.1:{}", free_port());
    let kc = kubeconfig(&dir, &server, None);
    let (code, stderr) = self::run(
        &["--kubeconfig", kc.to_str().unwrap(), "status", "-v", "6"],
        &[],
    );
    assert!(
        error_line(code, &stderr).contains("was refused"),
        "{stderr}"
    );
    assert!(
        stderr
            .lines()
            .any(|l| l.starts_with(&format!("GET {server}/"))
                && l.ends_with(" milliseconds")
                && l.contains(" failed in ")),
        "{stderr}"
    );
    assert!(!stderr.contains("kube_client"), "{stderr}");
}
