#!/usr/bin/env bash
# The README's first command: a host and two members on loopback, and
# kubefedctl against them (init, join, unjoin). Provisions the test
# environment when missing. It becomes the offline `reconcile --from
# testdata/` render once reconcile lands.
set -euo pipefail
cd "$(dirname "$0")/.."
hack/testenv.sh >/dev/null
cargo build --quiet --bins --workspace
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; rm -rf "$work"' EXIT
target/debug/testenv up --clusters host,member1,member2 --kubeconfig "$work/kubeconfig" >"$work/up.log" 2>&1 &
pid=$!
for _ in $(seq 1 120); do
  grep -q 'Ctrl-C' "$work/up.log" 2>/dev/null && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/up.log"; exit 1; }
  sleep 0.5
done
export KUBECONFIG="$work/kubeconfig"
k=target/debug/kubefedctl
set -x
$k version
$k init
$k join member1
$k join member2
kubectl get kubefedclusters -n kube-federation-system
$k join member1 --error-on-existing=false
$k enable -f testdata/enabletypedirectives.yaml
kubectl get federatedtypeconfigs -n kube-federation-system
$k unjoin member2 --yes
set +x
