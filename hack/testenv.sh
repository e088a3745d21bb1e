#!/usr/bin/env bash
# Provision the test environment: real kube-apiserver and kube-controller-manager
# v1.20.2, built from Debian bookworm's own `kubernetes` source package, plus
# Debian's etcd. The build is cached outside the checkout, so only the first run
# on a machine pays for it (about 8-10 minutes on 2 cores).
#
#   hack/testenv.sh          build when missing, print the bin directory
#   hack/testenv.sh --check  exit 0 when everything is in place, 1 otherwise
#
# Cache: ${KUBEFEDCTL_TESTENV_CACHE:-$HOME/.cache/kubefedctl/testenv}/v1.20.2/bin
set -euo pipefail

K8S_VERSION=v1.20.2
CACHE_ROOT=${KUBEFEDCTL_TESTENV_CACHE:-$HOME/.cache/kubefedctl/testenv}
BIN_DIR="$CACHE_ROOT/$K8S_VERSION/bin"
WORK_DIR="$CACHE_ROOT/$K8S_VERSION/work"
SRC_LIST=/etc/apt/sources.list.d/kubefedctl-testenv-src.sources

log() { printf 'testenv: %s\n' "$*" >&2; }
die() { printf 'testenv: error: %s\n' "$*" >&2; exit 1; }

have_binaries() {
  [ -x "$BIN_DIR/kube-apiserver" ] && [ -x "$BIN_DIR/kube-controller-manager" ] &&
    command -v etcd >/dev/null 2>&1
}

if [ "${1:-}" = "--check" ]; then
  have_binaries && exit 0 || exit 1
fi

# kubectl: a test (kubectl finds the plugin) and the benchmark's side-by-side
# comparison run it; Debian's kubernetes-client when none is installed.
if ! command -v kubectl >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  log "installing kubectl (Debian's kubernetes-client)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kubernetes-client >/dev/null ||
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends kubernetes-client >/dev/null; } ||
    log "kubectl could not be installed; the kubectl plugin test will fail"
fi

if have_binaries; then
  echo "$BIN_DIR"
  exit 0
fi

# ---- prerequisites -------------------------------------------------------
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
rm -rf "$BIN_DIR" && mv "$BIN_DIR.tmp" "$BIN_DIR"
"$BIN_DIR/kube-apiserver" --version >&2
log "ready: $BIN_DIR"
echo "$BIN_DIR"
