//! Shared by the integration tests: run the built binary against the shared
//! test environment, exactly as a user would.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use testenv::{KubeconfigBuilder, TestEnv};

pub const KUBEFEDCTL: &str = env!("CARGO_BIN_EXE_kubefedctl");

/// What a run printed and how it ended.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn ok(self) -> Run {
        assert_eq!(
            self.code, 0,
            "expected success\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    pub fn fails(self) -> Run {
        assert_eq!(
            self.code, 1,
            "expected exit 1\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

/// Runs kubefedctl with `--kubeconfig kc` and `args`, no TTY, no KUBECONFIG.
pub fn kubefedctl(kc: &Path, args: &[&str]) -> Run {
    let out: Output = Command::new(KUBEFEDCTL)
        .arg("--kubeconfig")
        .arg(kc)
        .args(args)
        .env_remove("KUBECONFIG")
        .env_remove("COMPLETE")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("running kubefedctl");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Writes a kubeconfig for this test under the environment's directory.
pub fn write_kubeconfig(env: &TestEnv, test: &str, kc: KubeconfigBuilder) -> PathBuf {
    let path = env.dir().join(format!("kubeconfig-{test}.yaml"));
    kc.write(&path).unwrap();
    path
}

/// GET as the cluster's admin; `None` on 404.
pub fn get(env: &TestEnv, cluster: &str, path: &str) -> Option<serde_json::Value> {
    let r = env.request(cluster, "GET", path, None).unwrap();
    match r.status {
        200 => Some(r.json().unwrap()),
        404 => None,
        s => panic!("GET {path} in {cluster}: {s} {}", r.body),
    }
}

/// True when the object is gone or being deleted.
pub fn gone(env: &TestEnv, cluster: &str, path: &str) -> bool {
    match get(env, cluster, path) {
        None => true,
        Some(o) => !o["metadata"]["deletionTimestamp"].is_null(),
    }
}

/// Decodes a base64 Secret value.
pub fn b64(text: &str) -> String {
    use base64::Engine;
    String::from_utf8(
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .unwrap(),
    )
    .unwrap()
}
