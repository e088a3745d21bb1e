//! Installing the tool the ways users do, each with the real installer or
//! runtime: the packaged crates (`cargo package`, which builds them as
//! crates.io would), the release archive of `hack/release.sh` (static,
//! checksummed), krew (its own `validate-krew-manifest` and `kubectl krew
//! install` from the archive, then `kubectl fed` and its completion), and
//! the image of `deploy/Dockerfile` (built by buildah with nothing pulled,
//! run by podman as the in-cluster reconciler runs). The docs' CI recipes
//! (docs/ci.md) run as written, the release workflow passes actionlint.
//!
//! The tools come from `hack/testenv.sh` (krew, validate-krew-manifest and
//! actionlint in the cache's `tools/bin`; Debian's buildah, podman, runc,
//! busybox-static): a test fails, never skips, when one is missing. The
//! release build and the images are made once per test run and shared.

use crate::fixtures::{Federation, cm, pod_mount, reconciler_token, root};
use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use testenv::TestEnv;

const VERSION: &str = env!("CARGO_PKG_VERSION");
const TARGET: &str = "x86_64-unknown-linux-gnu";

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs `cmd`, panics with its output unless it succeeds.
fn ok(cmd: &mut Command) -> Output {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        text(&out.stdout),
        text(&out.stderr)
    );
    out
}

/// A tool `hack/testenv.sh` builds into the cache.
fn tool(name: &str) -> PathBuf {
    let dir = testenv::version::cache_root().join("tools/bin");
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is missing: run the tests with hack/test.sh (hack/testenv.sh builds it)",
        path.display()
    );
    path
}

/// A program from the machine (Debian's packages, which hack/testenv.sh
/// installs).
fn program(name: &str) -> PathBuf {
    ["/usr/bin", "/usr/sbin", "/bin", "/usr/local/bin"]
        .iter()
        .map(|d| Path::new(d).join(name))
        .find(|p| p.exists())
        .unwrap_or_else(|| {
            panic!("{name} is needed here: run the tests with hack/test.sh, which installs it")
        })
}

/// A fresh directory of this test's own, under target/install-test (each
/// run replaces the last one's, so that unpacked binaries do not pile up).
fn scratch(name: &str) -> PathBuf {
    let dir = root().join("target/install-test").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// What `hack/release.sh` made for this machine.
struct Release {
    dist: PathBuf,
    archive: PathBuf,
    checksum: PathBuf,
}

impl Release {
    fn name(&self) -> String {
        format!("kubefedctl-{VERSION}-{TARGET}")
    }
}

/// `cmd` with the environment a user's shell would give it: without what
/// `cargo test` adds for the test binary (its own build script's
/// KUBEFEDCTL_* stamps, OUT_DIR, CARGO_*, a LD_LIBRARY_PATH into target/),
/// which cargo would take for changed inputs and rebuild everything that
/// depends on them each time the tests and a shell take turns.
fn as_in_a_shell(cmd: &mut Command) -> &mut Command {
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        if (key.starts_with("CARGO") && key != "CARGO_HOME")
            || key.starts_with("KUBEFEDCTL_GIT")
            || key.starts_with("KUBEFEDCTL_BUILD")
            || [
                "OUT_DIR",
                "LD_LIBRARY_PATH",
                "RUST_RECURSION_COUNT",
                "RUSTFLAGS",
                // hack/test-runner's, for libtest's --report-time alone.
                "RUSTC_BOOTSTRAP",
            ]
            .contains(&key)
        {
            cmd.env_remove(key);
        }
    }
    cmd
}

/// Where the install tests build (the release build, the packaged crate):
/// in the test environment's cache, outside the checkout, as the cached
/// Kubernetes, so that a fresh checkout (CI) rebuilds only what changed.
fn cargo_target() -> PathBuf {
    testenv::version::cache_root().join("cargo-target")
}

/// `hack/release.sh`, once per test run: the static x86_64 archive in
/// target/install-test/dist.
fn release() -> &'static Release {
    static RELEASE: OnceLock<Release> = OnceLock::new();
    RELEASE.get_or_init(|| {
        let dist = root().join("target/install-test/dist");
        let _ = std::fs::remove_dir_all(&dist);
        let out = ok(
            as_in_a_shell(&mut Command::new(root().join("hack/release.sh")))
                .arg(TARGET)
                .env("DIST_DIR", &dist)
                .env_remove("KUBEFEDCTL_RELEASE_URL")
                .env_remove("GITHUB_REPOSITORY")
                .env("CARGO_TARGET_DIR", cargo_target()),
        );
        let archive = dist.join(format!("kubefedctl-{VERSION}-{TARGET}.tar.gz"));
        let checksum = dist.join(format!("kubefedctl-{VERSION}-{TARGET}.tar.gz.sha256"));
        let printed: Vec<String> = text(&out.stdout).lines().map(str::to_string).collect();
        assert_eq!(
            printed,
            [
                archive.display().to_string(),
                checksum.display().to_string(),
                dist.join("fed.yaml").display().to_string()
            ],
            "release.sh prints the paths it wrote"
        );
        Release {
            dist,
            archive,
            checksum,
        }
    })
}

/// The archive unpacked into a directory of its own; the binaries' directory.
fn unpacked(test: &str) -> PathBuf {
    let r = release();
    let dir = scratch(test);
    ok(Command::new("tar")
        .arg("-xzf")
        .arg(&r.archive)
        .arg("-C")
        .arg(&dir));
    dir.join(r.name())
}

/// Whether an ELF executable asks for a dynamic loader (a PT_INTERP header).
fn needs_a_loader(path: &Path) -> bool {
    let elf = std::fs::read(path).unwrap();
    assert_eq!(
        &elf[..5],
        b"\x7fELF\x02",
        "{}: a 64-bit ELF",
        path.display()
    );
    let u16_at = |o: usize| u16::from_le_bytes([elf[o], elf[o + 1]]) as usize;
    let phoff = u64::from_le_bytes(elf[0x20..0x28].try_into().unwrap()) as usize;
    let (size, count) = (u16_at(0x36), u16_at(0x38));
    (0..count).any(|i| {
        let at = phoff + i * size;
        u32::from_le_bytes(elf[at..at + 4].try_into().unwrap()) == 3
    })
}

/// The migration's kill points are the tests' alone: a release binary
/// does not even name the variable (so nothing in it can read it), while
/// the build the tests drive does.
#[test]
fn the_release_build_has_no_test_hooks() {
    let hook = b"KUBEFEDCTL_MIGRATE_KILL_AT";
    let names = |path: &Path| {
        let bytes = std::fs::read(path).unwrap();
        bytes.windows(hook.len()).any(|w| w == hook)
    };
    assert!(
        names(Path::new(crate::fixtures::KUBEFEDCTL)),
        "the tests' build has the hook"
    );
    let bin = unpacked("hooks");
    for program in ["kubefedctl", "kubectl-fed"] {
        assert!(
            !names(&bin.join(program)),
            "{program} of the release archive names {}",
            String::from_utf8_lossy(hook)
        );
    }
}

#[test]
fn the_release_archive_is_static_complete_and_checksummed() {
    let r = release();
    // The listing: one directory, the three programs, licence, README and
    // the completion scripts.
    let out = ok(Command::new("tar").arg("-tzf").arg(&r.archive));
    let mut listed: Vec<String> = text(&out.stdout)
        .lines()
        .map(|l| l.trim_end_matches('/').to_string())
        .collect();
    listed.sort();
    let name = r.name();
    let mut expected: Vec<String> = [
        "",
        "/LICENSE",
        "/README.md",
        "/completions",
        "/completions/_kubefedctl",
        "/completions/_kubefedctl.ps1",
        "/completions/kubefedctl.bash",
        "/completions/kubefedctl.fish",
        "/kubectl-fed",
        "/kubectl_complete-fed",
        "/kubefedctl",
    ]
    .iter()
    .map(|f| format!("{name}{f}"))
    .collect();
    expected.sort();
    assert_eq!(listed, expected);

    // The checksum file is what sha256sum checks.
    let sum = std::fs::read_to_string(&r.checksum).unwrap();
    assert!(sum.ends_with(&format!("  {name}.tar.gz\n")), "{sum}");
    let out = ok(Command::new("sha256sum")
        .args(["-c", &format!("{name}.tar.gz.sha256")])
        .current_dir(&r.dist));
    assert_eq!(text(&out.stdout), format!("{name}.tar.gz: OK\n"));

    // Statically linked, and they run: the version is the crate's, built
    // for the target.
    let bin = unpacked("archive");
    for program in ["kubefedctl", "kubectl-fed", "kubectl_complete-fed"] {
        assert!(
            !needs_a_loader(&bin.join(program)),
            "{program} is statically linked"
        );
    }
    let out = ok(Command::new(bin.join("kubefedctl")).args(["version", "-o", "json"]));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["clientVersion"]["gitVersion"], format!("v{VERSION}"));
    assert_eq!(v["clientVersion"]["platform"], TARGET, "{v}");
    let out = ok(Command::new(bin.join("kubectl-fed")).arg("--help"));
    assert!(text(&out.stdout).contains("Usage: kubectl fed"));
    assert_eq!(
        std::fs::read(bin.join("LICENSE")).unwrap(),
        std::fs::read(root().join("LICENSE")).unwrap()
    );
}

/// `cargo package --workspace`: both crates package, and cargo builds the
/// packaged kubefedctl from its `.crate` with the core resolved by version
/// from the packaged core, as `cargo install kubefedctl` would from
/// crates.io. The built program runs.
#[test]
fn both_crates_package_and_the_packaged_crate_builds_and_runs() {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let target = cargo_target();
    // The packaged kubefedctl resolves the core as a registry crate of the
    // same version (cargo's overlay of the packaged core), which cargo
    // never unpacks or rebuilds again (a registry crate cannot change): a
    // core packaged by an earlier run from other sources would be used.
    // Its unpacked sources and fingerprints go, so the core is built from
    // this package (seconds).
    let cargo_home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var("HOME").unwrap()).join(".cargo"));
    for registry in std::fs::read_dir(cargo_home.join("registry/src"))
        .into_iter()
        .flatten()
        .flatten()
    {
        if registry
            .file_name()
            .to_string_lossy()
            .starts_with("index.crates.io")
        {
            continue;
        }
        let _ = std::fs::remove_dir_all(registry.path().join(format!("kubefed-core-{VERSION}")));
    }
    for profile in ["debug", "release"] {
        let fingerprints = target.join(profile).join(".fingerprint");
        for entry in std::fs::read_dir(&fingerprints)
            .into_iter()
            .flatten()
            .flatten()
        {
            if entry
                .file_name()
                .to_string_lossy()
                .starts_with("kubefed-core-")
            {
                std::fs::remove_dir_all(entry.path()).unwrap();
            }
        }
    }
    ok(as_in_a_shell(&mut Command::new(&cargo))
        .args(["package", "--workspace", "--locked", "--allow-dirty"])
        .arg("--target-dir")
        .arg(&target)
        .current_dir(root()));
    let crate_file = |name: &str| target.join(format!("package/{name}-{VERSION}.crate"));
    let out = ok(Command::new("tar")
        .arg("-tzf")
        .arg(crate_file("kubefedctl")));
    let files = text(&out.stdout);
    for f in [
        "LICENSE",
        "README.md",
        "Cargo.lock",
        "build.rs",
        "src/main.rs",
        "completions/kubefedctl.bash",
        "docs/man/kubefedctl.1",
        "testdata/enabletypedirectives.yaml",
        "deploy/inventory/multicluster.x-k8s.io_clusterprofiles.yaml",
        "deploy/inventory/provider.json",
    ] {
        assert!(
            files
                .lines()
                .any(|l| l == format!("kubefedctl-{VERSION}/{f}")),
            "{f} in the crate:\n{files}"
        );
    }
    assert!(
        !files.contains("/tests/") && !files.contains("/testenv/"),
        "no tests, no test environment in the crate:\n{files}"
    );
    let out = ok(Command::new("tar")
        .arg("-tzf")
        .arg(crate_file("kubefed-core")));
    assert!(
        text(&out.stdout)
            .lines()
            .any(|l| l == format!("kubefed-core-{VERSION}/LICENSE")),
        "{}",
        text(&out.stdout)
    );

    // The manifest crates.io gets: the core by version, no path.
    let manifest =
        std::fs::read_to_string(target.join(format!("package/kubefedctl-{VERSION}/Cargo.toml")))
            .unwrap();
    let core = manifest
        .split("\n[dependencies.kubefed-core]\n")
        .nth(1)
        .unwrap_or_else(|| panic!("{manifest}"));
    let core = &core[..core.find("\n[").unwrap_or(core.len())];
    assert_eq!(
        core.trim(),
        format!("version = \"={VERSION}\""),
        "{manifest}"
    );
    assert!(manifest.contains("rust-version = "), "{manifest}");
    assert!(manifest.contains("license = \"Apache-2.0\""), "{manifest}");

    // What the verification built from the packaged crate runs (cargo puts
    // it in the --target-dir, older cargos beside the unpacked crate).
    let built = [
        target.join("debug/kubefedctl"),
        target.join(format!(
            "package/kubefedctl-{VERSION}/target/debug/kubefedctl"
        )),
    ]
    .into_iter()
    .filter(|p| p.exists())
    .max_by_key(|p| p.metadata().unwrap().modified().unwrap())
    .expect("cargo package built kubefedctl");
    let out = ok(Command::new(&built).arg("version"));
    assert!(
        text(&out.stdout).starts_with(&format!("kubefedctl version: v{VERSION} ")),
        "{}",
        text(&out.stdout)
    );
}

/// A file server on loopback for `root` (krew and curl download from it as
/// from a release page).
fn serve(dir: PathBuf) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream);
            let mut line = String::new();
            if reader.read_line(&mut line).is_err() {
                continue;
            }
            let path = line.split(' ').nth(1).unwrap_or("/").to_string();
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                    break;
                }
            }
            let file = dir.join(path.trim_start_matches('/'));
            let mut stream = reader.into_inner();
            let _ = match std::fs::read(&file).ok().filter(|_| !path.contains("..")) {
                Some(body) => stream
                    .write_all(
                        format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n",
                            body.len()
                        )
                        .as_bytes(),
                    )
                    .and_then(|_| stream.write_all(&body)),
                None => stream.write_all(
                    b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                ),
            };
        }
    });
    url
}

fn copy_release_to(dir: &Path) {
    let r = release();
    std::fs::create_dir_all(dir).unwrap();
    for f in [&r.archive, &r.checksum] {
        std::fs::copy(f, dir.join(f.file_name().unwrap())).unwrap();
    }
}

/// A PATH of the given directories and the system's, nothing else (no
/// cargo-installed kubectl-fed to find by mistake).
fn path_of(dirs: &[&Path]) -> String {
    let mut parts: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    parts.extend(["/usr/local/bin", "/usr/bin", "/bin"].map(String::from));
    parts.join(":")
}

#[test]
fn krew_validates_the_manifest_and_installs_the_plugin_from_the_archive() {
    let r = release();
    let kubectl = program("kubectl");
    let tools = tool("kubectl-krew").parent().unwrap().to_path_buf();
    let validate = tool("validate-krew-manifest");

    // The manifest as release.sh renders it for a release page: the
    // archives on a server (krew downloads only over HTTP(S)).
    let site = scratch("krew-site");
    copy_release_to(&site);
    let url = serve(site.clone());
    ok(Command::new(root().join("hack/release.sh"))
        .arg("--manifest")
        .env("DIST_DIR", &site)
        .env("KUBEFEDCTL_RELEASE_URL", &url));
    let manifest = site.join("fed.yaml");
    let rendered = std::fs::read_to_string(&manifest).unwrap();
    let sha = std::fs::read_to_string(&r.checksum).unwrap();
    assert!(
        rendered.contains(&format!("sha256: {}\n", &sha[..64])),
        "{rendered}"
    );
    assert!(
        rendered.contains(&format!("version: \"v{VERSION}\"")),
        "{rendered}"
    );
    assert!(
        rendered.contains(&format!("uri: {url}/kubefedctl-{VERSION}-{TARGET}.tar.gz")),
        "{rendered}"
    );

    // krew's own validator: the structure, then an install of every
    // platform with `kubectl krew install` and a licence among its files.
    let out = ok(Command::new(&validate)
        .arg("-manifest")
        .arg(&manifest)
        .env("PATH", path_of(&[&tools])));
    let log = text(&out.stderr);
    assert!(log.contains("structural validation OK"), "{log}");
    assert!(log.contains("all 1 spec.platforms installed fine"), "{log}");

    // A user's install from the downloaded archive, into a krew root of
    // its own; the release's own manifest (file:// URIs, unused).
    let krew_root = scratch("krew-root");
    let krew_bin = krew_root.join("bin");
    let path = path_of(&[&krew_bin, &tools]);
    let krew = |args: &[&str]| {
        ok(Command::new(&kubectl)
            .args(args)
            .env("KREW_ROOT", &krew_root)
            .env("PATH", &path)
            .env_remove("KUBECONFIG"))
    };
    let out = krew(&[
        "krew",
        "install",
        &format!("--manifest={}", r.dist.join("fed.yaml").display()),
        &format!("--archive={}", r.archive.display()),
    ]);
    let said = text(&out.stderr) + &text(&out.stdout);
    assert!(said.contains("Installed plugin: fed"), "{said}");
    // krew's record of it (`krew list` would need krew's index from GitHub).
    let receipt = std::fs::read_to_string(krew_root.join("receipts/fed.yaml")).unwrap();
    assert!(
        receipt.contains(&format!("version: v{VERSION}")),
        "{receipt}"
    );

    // kubectl finds krew's link and runs the plugin.
    let linked = std::fs::read_link(krew_bin.join("kubectl-fed")).unwrap();
    assert!(
        linked.starts_with(krew_root.join("store/fed")),
        "{}",
        linked.display()
    );
    let out = krew(&["fed", "version"]);
    assert!(
        text(&out.stdout).starts_with(&format!("kubefedctl version: v{VERSION} ")),
        "{}",
        text(&out.stdout)
    );

    // `kubectl fed <TAB>`: kubectl asks kubectl_complete-fed on PATH. krew
    // links only `bin`, so nothing completes until the manifest's caveat is
    // followed; then the subcommands do.
    let completions = || {
        let out = krew(&["__complete", "fed", ""]);
        text(&out.stdout)
    };
    let before = completions();
    assert!(
        !before.lines().any(|l| l.starts_with("version")),
        "{before}"
    );
    let caveat = rendered
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("ln -sf "))
        .unwrap_or_else(|| panic!("the caveat's ln command:\n{rendered}"));
    ok(Command::new("sh")
        .args(["-c", caveat])
        .env("KREW_ROOT", &krew_root)
        .env("PATH", &path));
    let after = completions();
    for sub in ["version", "reconcile", "join", "init"] {
        assert!(
            after.lines().any(|l| l.split('\t').next() == Some(sub)),
            "{sub}: {after}"
        );
    }
}

#[test]
fn the_workflows_pass_actionlint() {
    let actionlint = tool("actionlint");
    let out = ok(Command::new(&actionlint)
        .arg("-no-color")
        .arg(".github/workflows/release.yml")
        .current_dir(root()));
    assert!(text(&out.stdout).is_empty(), "{}", text(&out.stdout));
    // The workflow docs/ci.md gives users, as they would save it.
    let dir = scratch("actionlint");
    let workflows = dir.join(".github/workflows");
    std::fs::create_dir_all(&workflows).unwrap();
    std::fs::write(workflows.join("federation.yaml"), github_recipe().0).unwrap();
    ok(Command::new(&actionlint)
        .arg("-no-color")
        .arg(".github/workflows/federation.yaml")
        .current_dir(&dir));
    // A broken workflow fails the lint (the check can fail).
    std::fs::write(
        workflows.join("broken.yaml"),
        "on: push\njobs:\n  j:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo ${{ github.no_such }}\n",
    )
    .unwrap();
    let out = Command::new(&actionlint)
        .arg(".github/workflows/broken.yaml")
        .current_dir(&dir)
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "actionlint accepted a broken workflow"
    );
}

/// The images of `hack/image.sh` from the release archive, once per run:
/// the plain one and the CI variant.
pub(crate) fn images() -> &'static (String, String) {
    static IMAGES: OnceLock<(String, String)> = OnceLock::new();
    IMAGES.get_or_init(|| {
        let r = release();
        // The last run's images go, rather than staying behind untagged.
        let _ = Command::new(program("podman"))
            .env("CONTAINERS_CONF", containers_conf())
            .args(["rmi", "--force", "--ignore"])
            .args(["", "-ci"].map(|t| format!("localhost/kubefedctl-test:{VERSION}{t}")))
            .output();
        let out = ok(Command::new(root().join("hack/image.sh"))
            .arg(&r.archive)
            .env("IMAGE", "localhost/kubefedctl-test")
            .env("BUILDER", "buildah")
            .env("CONTAINERS_CONF", containers_conf()));
        let printed: Vec<String> = text(&out.stdout).lines().map(str::to_string).collect();
        assert_eq!(
            printed,
            [
                format!("localhost/kubefedctl-test:{VERSION}"),
                format!("localhost/kubefedctl-test:{VERSION}-ci")
            ]
        );
        (printed[0].clone(), printed[1].clone())
    })
}

/// This machine grants no raising of resource limits: containers get the
/// runtime's defaults (docs: containers-on-this-machine).
fn containers_conf() -> PathBuf {
    let path = std::env::temp_dir().join("kubefedctl-install-containers.conf");
    std::fs::write(&path, "[containers]\ndefault_ulimits = []\n").unwrap();
    path
}

/// `podman run --rm --network host ARGS...` with runc.
fn podman_run(args: &[&str]) -> Output {
    Command::new(program("podman"))
        .env("CONTAINERS_CONF", containers_conf())
        .args([
            "--runtime",
            "runc",
            "run",
            "--rm",
            "--pull=never",
            "--network",
            "host",
        ])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn inspect(image: &str) -> Value {
    let out = ok(Command::new(program("podman"))
        .env("CONTAINERS_CONF", containers_conf())
        .args(["image", "inspect", image]));
    serde_json::from_slice::<Value>(&out.stdout).unwrap()[0].clone()
}

#[test]
fn the_image_runs_reconcile_as_the_in_cluster_reconciler() {
    let (image, _) = images();
    let config = inspect(image)["Config"].clone();
    assert_eq!(config["User"], "65532:65532", "{config}");
    assert_eq!(config["Entrypoint"], json!(["kubefedctl"]), "{config}");
    // No shell in it; the binary runs.
    let out = podman_run(&["--entrypoint", "/bin/sh", image, "-c", "true"]);
    assert!(!out.status.success(), "a shell in the plain image");
    let out = podman_run(&[image, "version"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with(&format!("kubefedctl version: v{VERSION} ")));

    // A pod's view: the reconciler's service account token, the cluster CA
    // and the namespace where kubelet mounts them, the API server's address
    // in KUBERNETES_SERVICE_HOST/PORT, nothing else (no kubeconfig).
    let env = TestEnv::shared();
    let f = Federation::new(env, "inst-img", &["configmaps"]);
    f.run(&["init", "--reconciler", "job", "--image", image])
        .ok();
    let token = reconciler_token(env, f.fedns);
    let pod = pod_mount(env, "inst-img", &token, f.fedns);
    for file in ["token", "ca.crt", "namespace"] {
        std::fs::set_permissions(pod.join(file), std::fs::Permissions::from_mode(0o644)).unwrap();
    }
    std::fs::set_permissions(&pod, std::fs::Permissions::from_mode(0o755)).unwrap();
    let url = f.host.url();
    let port = url.rsplit_once(':').unwrap().1.to_string();
    let mount = format!(
        "{}:/var/run/secrets/kubernetes.io/serviceaccount:ro",
        pod.display()
    );
    // Kubernetes sets the service's IP; a name (the second run) is looked up
    // by the static binary with the runtime's /etc/hosts.
    let run = |host: &str| {
        podman_run(&[
            "-v",
            &mount,
            "-e",
            &format!("KUBERNETES_SERVICE_HOST={host}"),
            "-e",
            &format!("KUBERNETES_SERVICE_PORT={port}"),
            "--read-only",
            image,
            "reconcile",
            "-n",
            f.ns,
            "--kubefed-namespace",
            f.fedns,
            "-o",
            "json",
        ])
    };
    for name in ["one", "two"] {
        f.create(
            env,
            "FederatedConfigMap",
            name,
            json!({"template": {"data": {"n": name}}, "placement": {"clusterSelector": {}}}),
        );
    }
    let out = run("127.0.0.1");
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let summary: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", text(&out.stdout));
    });
    assert!(summary.to_string().contains("created"), "{summary}");
    for c in ["member1", "member2"] {
        for name in ["one", "two"] {
            assert_eq!(cm(env, c, f.ns, name).unwrap()["data"]["n"], name, "{c}");
        }
    }
    // Converged: the next run writes nothing to the members.
    f.reset();
    let out = run("localhost");
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(f.member_writes(), 0, "{:?}", f.m1.records());
}

/// The fenced block after `heading` in docs/ci.md.
pub(crate) fn recipe(heading: &str) -> String {
    let docs = std::fs::read_to_string(root().join("docs/ci.md")).unwrap();
    let section = &docs[docs.find(heading).unwrap_or_else(|| panic!("{heading}"))..];
    let start = section.find("```yaml\n").unwrap() + 8;
    let len = section[start..].find("\n```").unwrap();
    section[start..start + len + 1].to_string()
}

/// The exit code the GitHub recipe's plan step documents for changes
/// pending (`# exit N when the members would change`).
pub(crate) fn pending_exit_code(yaml: &str) -> i32 {
    yaml.lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("# exit ")?
                .strip_suffix(
                    " when the members would change: the check shows \"changes pending\"",
                )?
                .parse()
                .ok()
        })
        .unwrap_or_else(|| panic!("the plan step documents its exit code:\n{yaml}"))
}

/// docs/ci.md's GitHub Actions workflow, as text and parsed.
pub(crate) fn github_recipe() -> (String, Value) {
    let yaml = recipe("## GitHub Actions");
    let doc: Value = serde_saphyr::from_str(&yaml).unwrap();
    (yaml, doc)
}

/// Files a federation repository holds: one FederatedConfigMap of the
/// `shop` part, in the test federation's namespace.
fn federation_files(f: &Federation, work: &Path) {
    let dir = work.join("federation/shop");
    std::fs::create_dir_all(&dir).unwrap();
    let doc = json!({"apiVersion": format!("{}/v1beta1", f.group), "kind": "FederatedConfigMap",
        "metadata": {"name": "web", "namespace": f.ns, "labels": {"app.kubernetes.io/part-of": "shop"}},
        "spec": {"template": {"data": {"a": "1"}}, "placement": {"clusterSelector": {}}}});
    std::fs::write(dir.join("web.yaml"), doc.to_string()).unwrap();
}

/// A `kubefedctl` that adds the test federation's namespace (the recipes
/// use the default one, which other tests share) and runs `real`.
fn namespace_shim(dir: &Path, real: &str, fedns: &str) {
    std::fs::create_dir_all(dir).unwrap();
    let shim = dir.join("kubefedctl");
    std::fs::write(
        &shim,
        format!("#!/bin/sh\nexec {real} \"$@\" --kubefed-namespace {fedns}\n"),
    )
    .unwrap();
    std::fs::set_permissions(&shim, std::fs::Permissions::from_mode(0o755)).unwrap();
}

fn base64_of(path: &Path) -> String {
    let out = ok(Command::new("base64").arg("-w0").arg(path));
    text(&out.stdout)
}

#[test]
fn the_ci_recipes_run_as_written() {
    let env = TestEnv::shared();
    let r = release();
    let (_, image_ci) = images();

    // ---- GitHub Actions: every `run:` step, with bash as the runner runs
    // them, the release archive from a server laid out as a release page.
    let f = Federation::new(env, "inst-gh", &["configmaps"]);
    // The federation exists already (its namespace is in the members).
    f.reconcile(&[]).ok();
    let (yaml, workflow) = github_recipe();
    let pending = pending_exit_code(&yaml);
    let steps = workflow["jobs"]["federation"]["steps"]
        .as_array()
        .unwrap()
        .clone();
    let site = scratch("gh-site");
    copy_release_to(&site.join(format!("v{VERSION}")));
    let releases = serve(site);
    let work = scratch("gh-work");
    federation_files(&f, &work);
    let runner_temp = work.join("_temp");
    std::fs::create_dir_all(&runner_temp).unwrap();
    let github_path = work.join("github_path");
    std::fs::write(&github_path, "").unwrap();
    let summary = work.join("summary.md");
    let shim_dir = work.join("shim");
    let kc_data = base64_of(&f.kc);
    let mut installed: Option<PathBuf> = None;
    let mut ran = Vec::new();
    for event in ["pull_request", "push"] {
        for step in &steps {
            let Some(script) = step["run"].as_str() else {
                continue;
            };
            match step["if"].as_str() {
                None => {}
                Some(cond) if cond == format!("github.event_name == '{event}'") => {}
                Some(cond) if cond.starts_with("github.event_name == ") => continue,
                Some(cond) => panic!("a condition this test cannot evaluate: {cond}"),
            }
            let name = step["name"].as_str().unwrap_or("");
            if name.starts_with("Install") && installed.is_some() {
                continue; // once per job run is enough for the test
            }
            let mut cmd = Command::new("bash");
            cmd.args(["--noprofile", "--norc", "-eo", "pipefail", "-c", script])
                .current_dir(&work)
                .env_clear()
                .env("HOME", &work)
                .env("RUNNER_TEMP", &runner_temp)
                .env("GITHUB_PATH", &github_path)
                .env("GITHUB_STEP_SUMMARY", &summary)
                .env("GITHUB_EVENT_NAME", event);
            let mut path = vec![shim_dir.display().to_string()];
            path.extend(installed.iter().map(|p| p.display().to_string()));
            path.extend(["/usr/bin", "/bin"].map(String::from));
            cmd.env("PATH", path.join(":"));
            if let Some(vars) = step["env"].as_object() {
                for (k, v) in vars {
                    let v = v.as_str().unwrap_or_else(|| panic!("{k}: a string"));
                    let v = match (k.as_str(), v) {
                        ("KUBECONFIG_DATA", "${{ secrets.FEDERATION_KUBECONFIG }}") => {
                            kc_data.clone()
                        }
                        ("RELEASES", _) => releases.clone(),
                        ("VERSION", _) => {
                            assert_eq!(v, VERSION, "the recipe installs the current release");
                            v.to_string()
                        }
                        (_, v) => {
                            assert!(!v.contains("${{"), "{k}: {v}");
                            v.to_string()
                        }
                    };
                    cmd.env(k, v);
                }
            }
            let out = cmd.stdin(Stdio::null()).output().unwrap();
            let code = out.status.code();
            ran.push(format!("{event}: {name}"));
            if name.starts_with("Plan") {
                assert_eq!(
                    code,
                    Some(pending),
                    "changes pending: {}",
                    text(&out.stderr)
                );
            } else {
                assert_eq!(
                    code,
                    Some(0),
                    "{name}\nstdout:\n{}\nstderr:\n{}",
                    text(&out.stdout),
                    text(&out.stderr)
                );
            }
            if name.starts_with("Install") {
                let added = std::fs::read_to_string(&github_path).unwrap();
                let dir = PathBuf::from(added.trim());
                assert!(dir.join("kubefedctl").exists(), "{added}");
                assert!(!needs_a_loader(&dir.join("kubefedctl")));
                namespace_shim(
                    &shim_dir,
                    &dir.join("kubefedctl").display().to_string(),
                    f.fedns,
                );
                installed = Some(dir);
            }
        }
    }
    assert_eq!(
        ran,
        [
            "pull_request: Install kubefedctl (the release archive, checksum checked)",
            "pull_request: Kubeconfig",
            "pull_request: Plan (pull request)",
            "push: Kubeconfig",
            "push: Apply (merge)",
        ]
    );
    let md = std::fs::read_to_string(&summary).unwrap();
    assert!(
        md.contains(&format!("| create | `ConfigMap {}/web` |", f.ns)),
        "{md}"
    );
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(work.join("reconcile.json")).unwrap())
            .unwrap();
    assert!(report.to_string().contains("created"), "{report}");
    for c in ["member1", "member2"] {
        assert_eq!(cm(env, c, f.ns, "web").unwrap()["data"]["a"], "1", "{c}");
    }
    // The release archive installed is the one hack/release.sh made.
    assert_eq!(
        std::fs::read(runner_temp.join(r.archive.file_name().unwrap())).unwrap(),
        std::fs::read(&r.archive).unwrap()
    );

    // ---- GitLab CI: the jobs' lines in the CI image, as GitLab's runner
    // runs them (its shell preamble, the project directory mounted), the
    // host network for the test clusters on loopback.
    let g = Federation::new(env, "inst-gl", &["configmaps"]);
    g.reconcile(&[]).ok();
    let pipeline: Value = serde_saphyr::from_str(&recipe("## GitLab CI")).unwrap();
    let template = &pipeline[".kubefedctl"];
    let named = template["image"].as_str().unwrap();
    assert!(
        named.ends_with(&format!("/kubefedctl:{VERSION}-ci")),
        "the recipe names the current release's CI image: {named}"
    );
    let lines = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|l| l.as_str().unwrap().to_string())
            .collect()
    };
    let before = lines(&template["before_script"]);
    let project = scratch("gl-project");
    federation_files(&g, &project);
    namespace_shim(&project.join(".shim"), "/usr/local/bin/kubefedctl", g.fedns);
    // The container's user (65532) writes the artifacts into the project.
    for d in [
        project.clone(),
        project.join("federation"),
        project.join("federation/shop"),
    ] {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    let gl_kc = base64_of(&g.kc);
    let job = |name: &str| {
        let job = &pipeline[name];
        assert_eq!(job["extends"], ".kubefedctl");
        let mut script = String::from(
            "if set -o | grep pipefail > /dev/null; then set -o pipefail; fi; set -o errexit\n",
        );
        for l in before.iter().chain(&lines(&job["script"])) {
            script.push_str(l);
            script.push('\n');
        }
        podman_run(&[
            "-v",
            &format!("{}:/builds/project", project.display()),
            "-w",
            "/builds/project",
            "-e",
            &format!("FEDERATION_KUBECONFIG={gl_kc}"),
            "-e",
            "PATH=/builds/project/.shim:/usr/local/bin:/bin",
            image_ci,
            "sh",
            "-c",
            &script,
        ])
    };
    let plan = job("plan");
    assert_eq!(
        plan.status.code(),
        Some(pending),
        "changes pending fail the job (pipefail through tee)\nstdout:\n{}\nstderr:\n{}",
        text(&plan.stdout),
        text(&plan.stderr)
    );
    let md = std::fs::read_to_string(project.join("plan.md")).unwrap();
    assert!(
        md.contains(&format!("| create | `ConfigMap {}/web` |", g.ns)),
        "{md}"
    );
    assert!(
        text(&plan.stdout).contains("| create |"),
        "tee shows the plan in the log"
    );
    let apply = job("apply");
    assert_eq!(
        apply.status.code(),
        Some(0),
        "stdout:\n{}\nstderr:\n{}",
        text(&apply.stdout),
        text(&apply.stderr)
    );
    let report: Value =
        serde_json::from_str(&std::fs::read_to_string(project.join("reconcile.json")).unwrap())
            .unwrap();
    assert!(report.to_string().contains("created"), "{report}");
    for c in ["member1", "member2"] {
        assert_eq!(cm(env, c, g.ns, "web").unwrap()["data"]["a"], "1", "{c}");
    }
    // Converged: the plan now finds nothing to do.
    let plan = job("plan");
    assert_eq!(plan.status.code(), Some(0), "{}", text(&plan.stderr));
}

/// The README's five minutes on two clusters, line by line as written, with
/// kubectl and the plugin, against two clusters of an environment of its
/// own (it uses the default federation namespace and federated group).
#[test]
fn the_readme_five_minutes_run_as_written() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let section = &readme[readme.find("## Five minutes on your own clusters").unwrap()..];
    let start = section.find("```sh\n").unwrap() + 6;
    let block = &section[start..start + section[start..].find("```").unwrap()];
    let mut lines = block.lines();
    let first = lines.next().unwrap();
    assert!(
        first.starts_with("HOST="),
        "the contexts come first: {first}"
    );
    let script: String = lines.map(|l| format!("{l}\n")).collect();
    assert!(
        readme.find("## Install").unwrap() < readme.find("## Five minutes").unwrap()
            && readme.find("## Five minutes").unwrap()
                < readme
                    .find("## Set-up on a fresh machine: two commands")
                    .unwrap(),
        "the README starts with install, then the five minutes, then the contributors' commands"
    );

    let env = &TestEnv::start(&["hub", "spoke"]).unwrap();
    let kc = env.dir().join("readme-kubeconfig.yaml");
    env.kubeconfig()
        .current_context("spoke")
        .write(&kc)
        .unwrap();
    let plugin = Path::new(env!("CARGO_BIN_EXE_kubectl-fed"))
        .parent()
        .unwrap();
    let home = scratch("readme-home");
    let out = Command::new("bash")
        .args(["--noprofile", "--norc", "-euxo", "pipefail", "-c"])
        .arg(format!("HOST=hub MEMBER=spoke\n{script}"))
        .env_clear()
        .env("HOME", &home)
        .env("KUBECONFIG", &kc)
        .env("PATH", path_of(&[plugin]))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "stdout:\n{stdout}\nstderr:\n{stderr}");
    // The member holds the ConfigMap; status shows both clusters ready.
    assert!(stdout.contains("greeting"), "{stdout}");
    let copy = crate::fixtures::get(env, "spoke", "/api/v1/namespaces/hello/configmaps/greeting")
        .expect("the member holds the ConfigMap");
    assert_eq!(copy["data"]["text"], "hi");
    assert_eq!(
        copy["metadata"]["labels"]["kubefed.io/managed"], "true",
        "{copy}"
    );
}
