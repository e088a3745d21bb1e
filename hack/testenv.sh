#!/usr/bin/env bash
# Provision the test environment: real kube-apiserver, kube-controller-manager
# and etcd of two Kubernetes releases, cached outside the checkout so that
# only the first run on a machine pays for them.
#
#   v1.37.2  the current release, the primary target: k8s.io/kubernetes and
#            its own etcd (v3.7.0, the version that release requires) built
#            from the Go module proxy with the machine's Go (>= 1.26);
#            about 15 minutes on 2 cores, ~700 MB of modules. v1.37.2 is the
#            newest 1.37 the module proxy serves.
#   v1.20.2  the compatibility target (KubeFed v0.10's era, the oldest this
#            tool supports): built from Debian bookworm's own `kubernetes`
#            source package with Debian's Go 1.19, beside Debian's etcd 3.4;
#            about 8 minutes.
#
#   KubeFed v0.10.0  KubeFed's own kubefedctl, controller-manager and e2e
#            test binary from the Go module proxy with the machine's Go: the
#            reference the tests compare this tool with and the suite they
#            run against it; 1.5 to 4 minutes on 2 cores, built whatever
#            VERSIONs are named.
#
#   Karmada v1.13.0  its karmada-controller-manager, karmada-scheduler,
#            karmada-aggregated-apiserver and karmada-webhook (without it
#            bindings get no permanent id, and one binding's clean-up of
#            "orphan" Works deletes the others' member objects) from the Go
#            module proxy, and its
#            CRDs (charts/karmada/_crds/bases/) beside them: `export karmada`
#            is checked against them (tests/it/karmada.rs); about 3 minutes.
#
#   Install tools (tests/it/install.rs): krew v0.4.3 (`krew`, and `kubectl-krew`
#            so that `kubectl krew` works), its validate-krew-manifest and
#            actionlint v1.7.12, from the Go module proxy with the machine's
#            Go, seconds once; Debian's buildah, podman, runc, busybox-static
#            and ca-certificates (the image and its CI variant).
#
#   Cluster inventory: a consumer of sigs.k8s.io/cluster-inventory-api v0.1.2's
#            pkg/access (testenv/go/inventory-consumer), and that module's
#            ClusterProfile CRD in the module cache; about 2 minutes once.
#
#   A node (tests/it/pods.rs): kubelet, kube-scheduler and kube-proxy of the
#            current release, built in its module graph (about a minute each
#            with the Go build cache warm), a pause image from the release's
#            own pause.c, and Debian's containerd, runc, conntrack and CNI
#            plugins; testenv/src/node.rs runs them.
#
#   hack/testenv.sh [VERSION...]          build the missing ones (default: both
#                                         releases), print their bin directories
#   hack/testenv.sh --check [VERSION...]  exit 0 when they are all in place
#
# Cache: ${KUBEFEDCTL_TESTENV_CACHE:-$HOME/.cache/kubefedctl/testenv}/<version>/bin,
#        .../node-v1.37.2/{bin,pause.tar} (kubelet, kube-scheduler, kube-proxy; the pause image)
#        .../kubefed-v0.10.0/bin, .../karmada-v1.13.0/{bin,crds} and .../tools/bin
set -euo pipefail

CURRENT_VERSION=v1.37.2
OLD_VERSION=v1.20.2
CACHE_ROOT=${KUBEFEDCTL_TESTENV_CACHE:-$HOME/.cache/kubefedctl/testenv}
SRC_LIST=/etc/apt/sources.list.d/kubefedctl-testenv-src.sources

log() { printf 'testenv: %s\n' "$*" >&2; }
die() { printf 'testenv: error: %s\n' "$*" >&2; exit 1; }

# A release is in place when its two binaries are, and its etcd (built
# beside the current release, Debian's on PATH beside 1.20).
# The fixes the old release's build carries (below); binaries built
# without one of them are built again.
OLD_FIXES="reflect2-1.0.2 openapi-gen empty-string"

have_binaries() {
  local bin="$CACHE_ROOT/$1/bin"
  [ -x "$bin/kube-apiserver" ] && [ -x "$bin/kube-controller-manager" ] || return 1
  if [ "$1" = "$OLD_VERSION" ] && [ "$(cat "$bin/.fixes" 2>/dev/null)" != "$OLD_FIXES" ]; then
    return 1
  fi
  if [ "$1" = "$OLD_VERSION" ]; then command -v etcd >/dev/null 2>&1; else [ -x "$bin/etcd" ]; fi
}

KUBEFED_VERSION=v0.10.0
KUBEFED_BIN="$CACHE_ROOT/kubefed-$KUBEFED_VERSION/bin"

# KubeFed is in place when its three programs are: kubefedctl and the
# controller-manager (tests/it/kubefed_ref.rs, tests/it/handover.rs) and its
# e2e suite's binary (tests/it/kubefed_e2e.rs), so that CI always has them
# and none of those tests skips for want of one.
have_kubefed() {
  [ -x "$KUBEFED_BIN/kubefedctl" ] && [ -x "$KUBEFED_BIN/controller-manager" ] && [ -x "$KUBEFED_BIN/e2e.test" ]
}

KARMADA_VERSION=v1.13.0
KARMADA_DIR="$CACHE_ROOT/karmada-$KARMADA_VERSION"

# Karmada is in place when its three programs and its CRDs are.
have_karmada() {
  [ -x "$KARMADA_DIR/bin/karmada-controller-manager" ] && [ -x "$KARMADA_DIR/bin/karmada-scheduler" ] &&
    [ -x "$KARMADA_DIR/bin/karmada-aggregated-apiserver" ] && [ -x "$KARMADA_DIR/bin/karmada-webhook" ] &&
    [ -f "$KARMADA_DIR/crds/policy.karmada.io_propagationpolicies.yaml" ]
}

check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi
versions=("$@")
[ ${#versions[@]} -gt 0 ] || versions=("$CURRENT_VERSION" "$OLD_VERSION")
for v in "${versions[@]}"; do
  case "$v" in
    "$CURRENT_VERSION" | "$OLD_VERSION") ;;
    *) die "unknown version $v (this script builds $CURRENT_VERSION and $OLD_VERSION)" ;;
  esac
done
# The install tests' tools: krew and its manifest validator (the krew
# plugin), actionlint (the release workflow), an OCI builder and runtime
# (the image). Required like the rest: tests/it/install.rs fails without
# them, it never skips.
KREW_VERSION=v0.4.3
ACTIONLINT_VERSION=v1.7.12
TOOLS_BIN="$CACHE_ROOT/tools/bin"
TOOL_PACKAGES="buildah podman runc busybox-static ca-certificates"
have_tools() {
  [ -x "$TOOLS_BIN/krew" ] && [ -x "$TOOLS_BIN/kubectl-krew" ] &&
    [ -x "$TOOLS_BIN/validate-krew-manifest" ] && [ -x "$TOOLS_BIN/actionlint" ] &&
    [ "$(cat "$TOOLS_BIN/.versions" 2>/dev/null)" = "$KREW_VERSION $ACTIONLINT_VERSION" ] &&
    command -v buildah >/dev/null 2>&1 && command -v podman >/dev/null 2>&1 &&
    command -v runc >/dev/null 2>&1 && have_static_busybox &&
    [ -f /etc/ssl/certs/ca-certificates.crt ]
}

# The cluster inventory's consumer library (tests/it/inventory.rs):
# testenv/go/inventory-consumer built against sigs.k8s.io/cluster-inventory-api
# (its pkg/access, as Kueue and the Argo CD syncer use it), with the module's
# ClusterProfile CRD beside it in the module cache. Built again when its
# source changes (the stamp is the source's digest).
INVENTORY_VERSION=v0.1.2
INVENTORY_DIR="$CACHE_ROOT/cluster-inventory-$INVENTORY_VERSION"
INVENTORY_SRC="$(cd "$(dirname "$0")/.." && pwd)/testenv/go/inventory-consumer"
inventory_stamp() { cat "$INVENTORY_SRC/main.go" "$INVENTORY_SRC/go.mod" | sha256sum | cut -d' ' -f1; }
have_inventory() {
  [ -x "$INVENTORY_DIR/bin/inventory-consumer" ] &&
    [ "$(cat "$INVENTORY_DIR/bin/.stamp" 2>/dev/null)" = "$(inventory_stamp)" ] &&
    [ -f "$CACHE_ROOT/gomod/sigs.k8s.io/cluster-inventory-api@$INVENTORY_VERSION/config/crd/bases/multicluster.x-k8s.io_clusterprofiles.yaml" ]
}
build_inventory() {
  command -v go >/dev/null 2>&1 || die "the inventory consumer needs Go on PATH (the machine's Go toolchain)"
  export GOMODCACHE="$CACHE_ROOT/gomod" GOCACHE="$CACHE_ROOT/go-build-cache"
  export GOFLAGS="-modcacherw -mod=mod -buildvcs=false" GOTOOLCHAIN=local CGO_ENABLED=0
  local work="$INVENTORY_DIR/work"
  rm -rf "$work" "$INVENTORY_DIR/bin.tmp" && mkdir -p "$work" "$INVENTORY_DIR/bin.tmp"
  cp "$INVENTORY_SRC/main.go" "$INVENTORY_SRC/go.mod" "$work/"
  log "building the inventory consumer against sigs.k8s.io/cluster-inventory-api $INVENTORY_VERSION (Go module proxy)"
  (cd "$work" && go mod download "sigs.k8s.io/cluster-inventory-api@$INVENTORY_VERSION" &&
    go build -trimpath -ldflags "-s -w" -o "$INVENTORY_DIR/bin.tmp/inventory-consumer" .) ||
    die "the inventory consumer did not build"
  inventory_stamp >"$INVENTORY_DIR/bin.tmp/.stamp"
  rm -rf "$INVENTORY_DIR/bin" && mv "$INVENTORY_DIR/bin.tmp" "$INVENTORY_DIR/bin"
}

# The JUnit check of `status --drift -o junit` (tests/it/strategies.rs):
# junit-10.xsd, the schema Jenkins' xunit plugin reads JUnit reports with,
# as pytest's source distribution ships it (pytest checks its own reports
# against it), and Debian's xmllint to validate with.
JUNIT_DIR="$CACHE_ROOT/tools/junit"
PYTEST_SDIST=pytest-8.4.2.tar.gz
PYTEST_SDIST_SHA256=86c0d0b93306b961d58d62a4db4879f27fe25513d4b969df351abdddb3c30e01
have_junit() {
  [ -f "$JUNIT_DIR/junit-10.xsd" ] && command -v xmllint >/dev/null 2>&1
}
install_junit() {
  command -v xmllint >/dev/null 2>&1 || apt_install "the JUnit check" libxml2-utils
  log "fetching junit-10.xsd from $PYTEST_SDIST (PyPI)"
  local url
  url=$(curl -fsSL https://pypi.org/simple/pytest/ | grep -o "https://[^\"#]*/$PYTEST_SDIST" | head -1)
  [ -n "$url" ] || die "PyPI does not list $PYTEST_SDIST"
  rm -rf "$JUNIT_DIR.tmp" && mkdir -p "$JUNIT_DIR.tmp"
  curl -fsSL -o "$JUNIT_DIR.tmp/$PYTEST_SDIST" "$url" || die "could not fetch $url"
  echo "$PYTEST_SDIST_SHA256  $JUNIT_DIR.tmp/$PYTEST_SDIST" | sha256sum -c --quiet ||
    die "$PYTEST_SDIST is not the one this script knows"
  tar -xzf "$JUNIT_DIR.tmp/$PYTEST_SDIST" -O "${PYTEST_SDIST%.tar.gz}/testing/example_scripts/junit-10.xsd" \
    >"$JUNIT_DIR.tmp/junit-10.xsd" || die "$PYTEST_SDIST holds no junit-10.xsd"
  rm -f "$JUNIT_DIR.tmp/$PYTEST_SDIST"
  rm -rf "$JUNIT_DIR" && mv "$JUNIT_DIR.tmp" "$JUNIT_DIR"
}

# Debian's busybox package is dynamically linked; the image needs
# busybox-static's (ldd names a loader or libraries only for a dynamic one).
have_static_busybox() {
  [ -x /bin/busybox ] && ! ldd /bin/busybox 2>&1 | grep -q -e '=>' -e 'ld-linux'
}

# apt_install WHAT PACKAGES...: Debian's packages, as root; the package
# lists are refreshed only when the first try fails.
apt_install() {
  local what=$1; shift
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 ||
    die "$what needs $* (Debian packages): run as root on Debian, or install them"
  log "installing $* (Debian)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1 ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null; } ||
    die "could not install $*"
}

install_tools() {
  if ! command -v buildah >/dev/null 2>&1 || ! command -v podman >/dev/null 2>&1 ||
    ! command -v runc >/dev/null 2>&1 || ! have_static_busybox || [ ! -f /etc/ssl/certs/ca-certificates.crt ]; then
    # shellcheck disable=SC2086
    apt_install "the install tests" $TOOL_PACKAGES
  fi
  command -v go >/dev/null 2>&1 || die "the install tests' tools need Go on PATH (the machine's Go toolchain)"
  log "building krew $KREW_VERSION, validate-krew-manifest and actionlint $ACTIONLINT_VERSION (Go module proxy)"
  rm -rf "$TOOLS_BIN.tmp" && mkdir -p "$TOOLS_BIN.tmp"
  (
    export GOBIN="$TOOLS_BIN.tmp" GOMODCACHE="$CACHE_ROOT/gomod" GOCACHE="$CACHE_ROOT/go-build-cache"
    export GOFLAGS="-modcacherw -buildvcs=false" GOTOOLCHAIN=local CGO_ENABLED=0
    go install -trimpath "sigs.k8s.io/krew/cmd/krew@$KREW_VERSION"
    go install -trimpath "sigs.k8s.io/krew/cmd/validate-krew-manifest@$KREW_VERSION"
    go install -trimpath "github.com/rhysd/actionlint/cmd/actionlint@$ACTIONLINT_VERSION"
  ) || die "building the install tests' tools failed"
  # `kubectl krew ...` runs kubectl-krew from PATH, as krew's own installer
  # arranges; validate-krew-manifest calls it so.
  ln -sf krew "$TOOLS_BIN.tmp/kubectl-krew"
  echo "$KREW_VERSION $ACTIONLINT_VERSION" >"$TOOLS_BIN.tmp/.versions"
  rm -rf "$TOOLS_BIN" && mv "$TOOLS_BIN.tmp" "$TOOLS_BIN"
}

# ---- a node: what makes pods run (tests/it/pods.rs) -------------------------
# kubelet, kube-scheduler and kube-proxy of the current release, built in the
# module graph build_current resolves (upstream's own mains); Debian's
# containerd, runc, conntrack and CNI plugins; a pause image built from the
# release's own build/pause/linux/pause.c (no registry is ever asked).
# ../shared/reference/node-here.md has the settings this machine needs; the
# test environment writes them (testenv/src/node.rs).
NODE_PACKAGES="containerd runc conntrack containernetworking-plugins iptables iproute2 buildah"
NODE_DIR="$CACHE_ROOT/node-$CURRENT_VERSION"
have_node() {
  [ -x "$NODE_DIR/bin/kubelet" ] && [ -x "$NODE_DIR/bin/kube-scheduler" ] &&
    [ -x "$NODE_DIR/bin/kube-proxy" ] && [ -f "$NODE_DIR/pause.tar" ] &&
    command -v containerd >/dev/null 2>&1 && command -v ctr >/dev/null 2>&1 &&
    command -v runc >/dev/null 2>&1 && command -v conntrack >/dev/null 2>&1 &&
    [ -x /usr/lib/cni/bridge ] && [ -x /usr/lib/cni/host-local ] && [ -x /usr/lib/cni/loopback ]
}
build_node() {
  local work="$NODE_DIR/work" upstream
  if ! command -v containerd >/dev/null 2>&1 || ! command -v conntrack >/dev/null 2>&1 || [ ! -x /usr/lib/cni/bridge ]; then
    # shellcheck disable=SC2086
    apt_install "a node" $NODE_PACKAGES
    # Debian starts containerd as a service on install; each node runs its own.
    (systemctl disable --now containerd 2>/dev/null || service containerd stop 2>/dev/null || true) >/dev/null 2>&1
  fi
  local kube_work="$CACHE_ROOT/$CURRENT_VERSION/work"
  [ -f "$kube_work/go.mod" ] || die "the node is built in $CURRENT_VERSION's module graph: build $CURRENT_VERSION first"
  export GOMODCACHE="$CACHE_ROOT/gomod" GOCACHE="$CACHE_ROOT/go-build-cache"
  export GOFLAGS="-modcacherw -mod=mod -buildvcs=false" GOTOOLCHAIN=local CGO_ENABLED=0
  upstream=$(cd "$kube_work" && go mod download -json "k8s.io/kubernetes@$CURRENT_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [ -d "$upstream" ] || die "k8s.io/kubernetes $CURRENT_VERSION: the module proxy gave no source"
  rm -rf "$work" && mkdir -p "$work" "$NODE_DIR/bin.tmp"
  cp -r "$kube_work/go.mod" "$kube_work/go.sum" "$work/"
  mkdir -p "$work/kubelet" "$work/kube-scheduler" "$work/kube-proxy"
  cp "$upstream/cmd/kubelet/kubelet.go" "$work/kubelet/main.go"
  cp "$upstream/cmd/kube-scheduler/scheduler.go" "$work/kube-scheduler/main.go"
  cp "$upstream/cmd/kube-proxy/proxy.go" "$work/kube-proxy/main.go"
  cd "$work"
  go mod tidy >"$work/tidy.log" 2>&1 || { tail -20 "$work/tidy.log" >&2; die "go mod tidy failed (node)"; }
  local minor=${CURRENT_VERSION#v1.}; minor=${minor%%.*}
  local ldflags="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags="$ldflags -X $p.gitVersion=$CURRENT_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  for cmd in kubelet kube-scheduler kube-proxy; do
    log "building $cmd $CURRENT_VERSION (about a minute each)"
    go build -trimpath -ldflags "$ldflags" -o "$NODE_DIR/bin.tmp/$cmd" "./$cmd"
  done
  # The pause image: upstream's pause.c, static, alone in an image.
  log "building the pause image from $CURRENT_VERSION's build/pause/linux/pause.c"
  local ctx; ctx=$(mktemp -d)
  gcc -Os -static -o "$ctx/pause" "$upstream/build/pause/linux/pause.c" -DVERSION="$CURRENT_VERSION-kubefedctl" ||
    die "the pause program did not build"
  strip "$ctx/pause"
  printf 'FROM scratch\nCOPY pause /pause\nUSER 65535:65535\nENTRYPOINT ["/pause"]\n' >"$ctx/Containerfile"
  buildah bud --quiet --pull=never -t "$PAUSE_IMAGE" -f "$ctx/Containerfile" "$ctx" >/dev/null ||
    die "the pause image did not build"
  rm -f "$NODE_DIR/bin.tmp/../pause.tar"
  podman save --format docker-archive -o "$NODE_DIR/pause.tar" "$PAUSE_IMAGE" >/dev/null ||
    die "the pause image could not be saved"
  rm -rf "$ctx"
  rm -rf "$NODE_DIR/bin" && mv "$NODE_DIR/bin.tmp" "$NODE_DIR/bin"
}
# The sandbox image every node's containerd names (testenv/src/node.rs).
PAUSE_IMAGE=localhost/kubefedctl-testenv/pause:3.10

if [ "$check" = 1 ]; then
  for v in "${versions[@]}"; do have_binaries "$v" || exit 1; done
  have_kubefed || exit 1
  have_karmada || exit 1
  have_tools || exit 1
  have_junit || exit 1
  have_inventory || exit 1
  have_node || exit 1
  exit 0
fi

have_tools || install_tools
have_junit || install_junit

# kubectl: a test (kubectl finds the plugin) and the benchmark's side-by-side
# comparison run it; Debian's kubernetes-client when none is installed.
if ! command -v kubectl >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  log "installing kubectl (Debian's kubernetes-client)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kubernetes-client >/dev/null ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kubernetes-client >/dev/null; } ||
    log "kubectl could not be installed; the kubectl plugin test will fail"
fi

# ---- the current release: k8s.io/kubernetes from the Go module proxy ------
# Upstream's go.mod replaces every k8s.io/<staging> module with ./staging/...,
# which a dependent module cannot see; the wrapper module pins each of them to
# the published v0.X.Y of the same release instead, and copies upstream's `go`
# and `godebug` lines so the binaries behave as upstream's own builds. etcd
# comes from the same module graph: go.etcd.io/etcd/server/v3 at the version
# this release of Kubernetes requires (its own tested etcd).
build_current() {
  local version=$1 bin_dir=$2 work_dir=$3
  command -v go >/dev/null 2>&1 ||
    die "building Kubernetes $version needs Go >= 1.26 on PATH (the machine's Go toolchain)"
  export GOMODCACHE="$CACHE_ROOT/gomod" GOCACHE="$CACHE_ROOT/go-build-cache"
  export GOFLAGS="-modcacherw -mod=mod -buildvcs=false" GOTOOLCHAIN=local CGO_ENABLED=0
  local staging_version="v0.${version#v1.}"
  log "downloading k8s.io/kubernetes $version (Go module proxy)"
  local upstream
  upstream=$(go mod download -json "k8s.io/kubernetes@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  [ -d "$upstream" ] || die "k8s.io/kubernetes $version: the module proxy gave no source"
  local etcd_version
  etcd_version=$(sed -n 's|^\tgo.etcd.io/etcd/server/v3 \(v[^ ]*\).*|\1|p' "$upstream/go.mod" | head -1)
  [ -n "$etcd_version" ] || die "k8s.io/kubernetes $version names no go.etcd.io/etcd/server/v3"

  rm -rf "$work_dir" && mkdir -p "$work_dir"/{kube-apiserver,kube-controller-manager,etcd}
  {
    echo "module kubefedctl.testenv/kubernetes"
    echo
    grep -E '^(go|godebug) ' "$upstream/go.mod"
    echo
    echo "require ("
    echo "	k8s.io/kubernetes $version"
    echo "	go.etcd.io/etcd/server/v3 $etcd_version"
    echo ")"
    echo
    echo "replace ("
    sed -n 's|^\t\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*|\1|p' "$upstream/go.mod" |
      while read -r m; do printf '\t%s => %s %s\n' "$m" "$m" "$staging_version"; done
    echo ")"
  } >"$work_dir/go.mod"
  # Upstream's own mains, unchanged.
  cp "$upstream/cmd/kube-apiserver/apiserver.go" "$work_dir/kube-apiserver/main.go"
  cp "$upstream/cmd/kube-controller-manager/controller-manager.go" "$work_dir/kube-controller-manager/main.go"
  cat >"$work_dir/etcd/main.go" <<'GO'
// etcd, as etcd's own main.go starts it.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
GO
  cd "$work_dir"
  log "resolving the module graph (about 700 MB of modules, once)"
  go mod tidy >"$work_dir/tidy.log" 2>&1 || { tail -20 "$work_dir/tidy.log" >&2; die "go mod tidy failed"; }
  local minor=${version#v1.}; minor=${minor%%.*}
  local ldflags="-s -w"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags="$ldflags -X $p.gitVersion=$version -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  mkdir -p "$bin_dir.tmp"
  for cmd in etcd kube-controller-manager kube-apiserver; do
    log "building $cmd $( [ "$cmd" = etcd ] && echo "$etcd_version" || echo "$version") (kube-apiserver is the slow part: ~10 min on 2 cores)"
    go build -trimpath -ldflags "$ldflags" -o "$bin_dir.tmp/$cmd" "./$cmd"
  done
  rm -rf "$bin_dir" && mv "$bin_dir.tmp" "$bin_dir"
}

# ---- KubeFed v0.10.0 from the Go module proxy -----------------------------
# The reference: KubeFed's own programs, built from its published module with
# the machine's Go. A wrapper module requires sigs.k8s.io/kubefed v0.10.0 and
# pins only what must change for a Go of today:
#   - `go 1.16`, KubeFed's own go line: a newer one turns on Go 1.22's
#     per-iteration loop variables and newer vet rules under KubeFed's code,
#     so it would no longer be the program KubeFed shipped;
#   - github.com/modern-go/reflect2 v1.0.2: KubeFed's v1.0.1 reads Go
#     runtime internals that changed in Go 1.18 and crashes at run time
#     (modern-go/reflect2#24);
#   - github.com/json-iterator/go v1.1.12: the json-iterator release made
#     for reflect2 v1.0.2 (the one KubeFed requires predates it).
# Nothing else is replaced: every other module is the version KubeFed v0.10.0
# requires. CGO is off, as in KubeFed's release builds (static binaries).
build_kubefed() {
  local work_dir="$CACHE_ROOT/kubefed-$KUBEFED_VERSION/work"
  command -v go >/dev/null 2>&1 ||
    die "building KubeFed $KUBEFED_VERSION needs Go on PATH (the machine's Go toolchain)"
  export GOMODCACHE="$CACHE_ROOT/gomod" GOCACHE="$CACHE_ROOT/go-build-cache"
  export GOFLAGS="-modcacherw -mod=mod -buildvcs=false" GOTOOLCHAIN=local CGO_ENABLED=0
  rm -rf "$work_dir" && mkdir -p "$work_dir"
  cat >"$work_dir/go.mod" <<GOMOD
module kubefedctl.testenv/kubefed

go 1.16

require sigs.k8s.io/kubefed $KUBEFED_VERSION

replace (
	github.com/modern-go/reflect2 => github.com/modern-go/reflect2 v1.0.2
	github.com/json-iterator/go => github.com/json-iterator/go v1.1.12
)
GOMOD
  cd "$work_dir"
  local ldflags="-s -w -X sigs.k8s.io/kubefed/pkg/version.version=$KUBEFED_VERSION -X sigs.k8s.io/kubefed/pkg/version.gitTreeState=clean"
  mkdir -p "$KUBEFED_BIN.tmp"
  for cmd in kubefedctl controller-manager; do
    log "building KubeFed's $cmd $KUBEFED_VERSION (Go module proxy)"
    go build -trimpath -ldflags "$ldflags" -o "$KUBEFED_BIN.tmp/$cmd" "sigs.k8s.io/kubefed/cmd/$cmd"
  done
  # KubeFed's e2e suite as a binary: tests/it/kubefed_e2e.rs runs it with
  # this tool as the controller. Required like the other two: a failed
  # build fails the script, so the cache is never left without it.
  log "building KubeFed's e2e test binary"
  go test -c -trimpath -ldflags "-s -w" -o "$KUBEFED_BIN.tmp/e2e.test" sigs.k8s.io/kubefed/test/e2e \
    >"$work_dir/e2e.log" 2>&1 || { tail -20 "$work_dir/e2e.log" >&2; die "KubeFed's e2e test binary did not build (see $work_dir/e2e.log)"; }
  rm -rf "$KUBEFED_BIN" && mv "$KUBEFED_BIN.tmp" "$KUBEFED_BIN"
}

# ---- Karmada v1.13.0 from the Go module proxy -----------------------------
# Exactly v1.13.0 (the proxy here refuses newer ones and version listings).
# Its module zip holds no vendored code, so it is built inside a copy of the
# module with -mod=mod: its own go.mod (and replace lines) decide every
# dependency, as in Karmada's own builds. CGO off, static binaries.
build_karmada() {
  local work_dir="$KARMADA_DIR/work"
  command -v go >/dev/null 2>&1 ||
    die "building Karmada $KARMADA_VERSION needs Go on PATH (the machine's Go toolchain)"
  export GOMODCACHE="$CACHE_ROOT/gomod" GOCACHE="$CACHE_ROOT/go-build-cache"
  export GOTOOLCHAIN=local CGO_ENABLED=0
  local src
  src=$(GOFLAGS=-modcacherw go mod download -json "github.com/karmada-io/karmada@$KARMADA_VERSION" |
    sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
  [ -d "$src" ] || die "the Go module proxy did not give github.com/karmada-io/karmada@$KARMADA_VERSION"
  rm -rf "$work_dir" && mkdir -p "$(dirname "$work_dir")" && cp -r "$src" "$work_dir" && chmod -R u+w "$work_dir"
  export GOFLAGS="-modcacherw -mod=mod -buildvcs=false"
  cd "$work_dir"
  rm -rf "$KARMADA_DIR/bin.tmp" && mkdir -p "$KARMADA_DIR/bin.tmp"
  for cmd in controller-manager scheduler aggregated-apiserver webhook; do
    log "building karmada-$cmd $KARMADA_VERSION (Go module proxy)"
    go build -trimpath -ldflags "-s -w" -o "$KARMADA_DIR/bin.tmp/karmada-$cmd" "./cmd/$cmd"
  done
  rm -rf "$KARMADA_DIR/crds.tmp" && mkdir -p "$KARMADA_DIR/crds.tmp"
  find charts/karmada/_crds/bases -name '*.yaml' -exec cp {} "$KARMADA_DIR/crds.tmp/" \;
  rm -rf "$KARMADA_DIR/bin" "$KARMADA_DIR/crds"
  mv "$KARMADA_DIR/bin.tmp" "$KARMADA_DIR/bin" && mv "$KARMADA_DIR/crds.tmp" "$KARMADA_DIR/crds"
  cd / && rm -rf "$work_dir"
}

# ---- 1.20.2 from Debian's source package -----------------------------------
build_old() {
BIN_DIR="$CACHE_ROOT/$OLD_VERSION/bin"
WORK_DIR="$CACHE_ROOT/$OLD_VERSION/work"
K8S_VERSION=$OLD_VERSION
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  die "building the test environment needs root and apt-get (Debian bookworm):
  it installs golang-1.19-go, etcd-server and golang-github-modern-go-reflect2-dev,
  downloads Debian's 'kubernetes' source package and builds kube-apiserver and
  kube-controller-manager $K8S_VERSION into $BIN_DIR.
  Run it as root on such a machine, or put those two binaries there yourself
  (and etcd on PATH)."
fi

export DEBIAN_FRONTEND=noninteractive
add_deb_src() {
  # Same mirror and suites as the machine's own Debian sources, as deb-src.
  local main=/etc/apt/sources.list.d/debian.sources
  [ -f "$main" ] || die "no $main: cannot derive the deb-src entry"
  sed -n '/^Types:/,/^$/p' "$main" | sed 's/^Types:.*/Types: deb-src/' >"$SRC_LIST"
}
remove_deb_src() { rm -f "$SRC_LIST"; }
trap remove_deb_src EXIT

log "installing Debian packages (golang-1.19-go, etcd-server, dpkg-dev, reflect2)"
add_deb_src
apt-get update -qq
apt-get install -y -qq --no-install-recommends \
  golang-1.19-go etcd-server golang-github-modern-go-reflect2-dev dpkg-dev ca-certificates openssl >/dev/null
# Debian starts etcd as a service on install; the tests run their own.
(systemctl disable --now etcd 2>/dev/null || service etcd stop 2>/dev/null || pkill -x etcd || true) >/dev/null 2>&1

mkdir -p "$WORK_DIR"
cd "$WORK_DIR"
if ! ls kubernetes_*.dsc >/dev/null 2>&1; then
  log "downloading Debian's kubernetes source package"
  apt-get source --download-only -qq kubernetes >/dev/null
fi
remove_deb_src

TREE="$WORK_DIR/gopath/src/k8s.io/kubernetes"
if [ ! -f "$TREE/cmd/kube-apiserver/apiserver.go" ]; then
  log "unpacking"
  rm -rf "$WORK_DIR/src" "$WORK_DIR/gopath"
  dpkg-source --no-check -x kubernetes_*.dsc "$WORK_DIR/src" >/dev/null
  mkdir -p "$(dirname "$TREE")"
  ln -s "$WORK_DIR/src" "$TREE"
fi

export GOROOT=/usr/lib/go-1.19
export PATH="$GOROOT/bin:$PATH"
export GOPATH="$WORK_DIR/gopath"
export GO111MODULE=off
export CGO_ENABLED=0
export GOCACHE="$CACHE_ROOT/go-build-cache"
cd "$TREE"

# Fix 3: vendored reflect2 v1.0.1 crashes under Go >= 1.18 on the first
# custom-resource create; use Debian's 1.0.2.
if ! grep -q 'reflect2 1.0.2' vendor/github.com/modern-go/reflect2/.kubefedctl 2>/dev/null; then
  log "replacing vendored modern-go/reflect2 with Debian's 1.0.2"
  rm -rf vendor/github.com/modern-go/reflect2
  cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 vendor/github.com/modern-go/reflect2
  rm -f vendor/github.com/modern-go/reflect2/go.mod vendor/github.com/modern-go/reflect2/*_test.go
  echo 'reflect2 1.0.2' >vendor/github.com/modern-go/reflect2/.kubefedctl
fi

# Fix 4: go-openapi's type check takes a value equal to its type's zero
# value for null, by comparing two reflect.Values. Under Go 1.15, which
# 1.20 was released with, those never compared equal for a non-nil value;
# from Go 1.19 on, reflect.Zero and an interface holding "" share the
# runtime's zero buffer, so they do, and the server refused "" in any
# `type: string` field of a custom resource (`Invalid value: "null"`),
# which real 1.20 servers accept (KubeFed writes such strings: a
# KubeFedCluster's `proxyURL: ""`, a PropagatedVersion's `templateVersion:
# ""`). Restore the released behaviour: only nil is null.
for f in vendor/github.com/go-openapi/validate/type.go vendor/k8s.io/kube-openapi/pkg/validation/validate/type.go; do
  if [ -f "$f" ] && grep -q 'data == nil || reflect.DeepEqual(reflect.Zero' "$f"; then
    log "patching $f: an empty string is not null"
    sed -i 's/if data == nil || reflect.DeepEqual(reflect.Zero(reflect.TypeOf(data)), reflect.ValueOf(data)) {/if data == nil {/' "$f"
  fi
done

# Fix 2: the OpenAPI definitions are generated, not checked in, for 1.20.
OPENAPI=pkg/generated/openapi/zz_generated.openapi.go
if [ ! -s "$OPENAPI" ] || ! grep -q 'apiextensions/v1.CustomResourceDefinition"' "$OPENAPI"; then
  log "generating $OPENAPI"
  go build -o "$WORK_DIR/openapi-gen" k8s.io/kubernetes/vendor/k8s.io/kube-openapi/cmd/openapi-gen
  # Every package tagged for openapi-gen, as the 1.20 Makefile lists them:
  # the staging repos by their vendor/ path (vendor/k8s.io/* are symlinks
  # into staging/, which grep -r does not follow).
  pkgs=$(grep -rl --include='*.go' '+k8s:openapi-gen=' pkg staging/src vendor 2>/dev/null |
    grep -v '_test.go$' | xargs -n1 dirname | sed 's|^staging/src/|vendor/|' | sort -u |
    sed 's|^|k8s.io/kubernetes/|' | paste -sd, -)
  "$WORK_DIR/openapi-gen" \
    --input-dirs "$pkgs" \
    --output-package k8s.io/kubernetes/pkg/generated/openapi \
    -O zz_generated.openapi \
    -h hack/boilerplate/boilerplate.generatego.txt \
    -r "$WORK_DIR/openapi-violations.txt" \
    --output-base "$GOPATH/src" >"$WORK_DIR/openapi-gen.log" 2>&1 ||
    { tail -20 "$WORK_DIR/openapi-gen.log" >&2; die "openapi-gen failed"; }
  [ -s "$OPENAPI" ] || die "openapi-gen wrote no $OPENAPI"
fi

# Fix 1 (GOPATH mode) is the environment above. Version stamps go on the
# vendored paths, or /version reports v0.0.0.
V=k8s.io/kubernetes/vendor/k8s.io
LDFLAGS="-s -w"
for p in "$V/component-base/version" "$V/client-go/pkg/version"; do
  LDFLAGS="$LDFLAGS -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=1 -X $p.gitMinor=20 -X $p.gitTreeState=clean"
done
mkdir -p "$BIN_DIR.tmp"
for cmd in kube-apiserver kube-controller-manager; do
  log "building $cmd (this is the slow part)"
  go build -ldflags "$LDFLAGS" -o "$BIN_DIR.tmp/$cmd" "k8s.io/kubernetes/cmd/$cmd"
done
echo "$OLD_FIXES" >"$BIN_DIR.tmp/.fixes"
rm -rf "$BIN_DIR" && mv "$BIN_DIR.tmp" "$BIN_DIR"
}

for v in "${versions[@]}"; do
  bin="$CACHE_ROOT/$v/bin"
  if ! have_binaries "$v"; then
    started=$SECONDS
    if [ "$v" = "$OLD_VERSION" ]; then
      (build_old)
    else
      (build_current "$v" "$bin" "$CACHE_ROOT/$v/work")
    fi
    log "$v ready in $(( (SECONDS - started) / 60 )) min: $("$bin/kube-apiserver" --version)"
  fi
  echo "$bin"
done

if ! have_kubefed; then
  started=$SECONDS
  (build_kubefed)
  log "KubeFed $KUBEFED_VERSION ready in $(( (SECONDS - started) / 60 )) min: $("$KUBEFED_BIN/kubefedctl" version)"
fi
have_inventory || (build_inventory)
if ! have_node; then
  started=$SECONDS
  (build_node)
  log "the node's programs ready in $(( (SECONDS - started) / 60 )) min"
fi
echo "$KUBEFED_BIN"
if ! have_karmada; then
  started=$SECONDS
  (build_karmada)
  log "Karmada $KARMADA_VERSION ready in $(( (SECONDS - started) / 60 )) min"
fi
echo "$KARMADA_DIR/bin"
echo "$TOOLS_BIN"
echo "$INVENTORY_DIR/bin"
echo "$NODE_DIR/bin"
