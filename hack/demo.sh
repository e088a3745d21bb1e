#!/usr/bin/env bash
# The live flow on loopback: a host and two members, and kubefedctl against
# them (init, join, enable, federate, reconcile, status, unjoin). Provisions
# the test environment when missing.
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
kubectl create namespace shop
kubectl -n shop create configmap settings --from-literal=colour=blue
$k federate namespaces shop --contents
$k reconcile
$k status configmaps -n shop
kubectl --context member2 -n shop get configmaps
$k unjoin member2 --yes
set +x
