#!/usr/bin/env bash
# Fuzz every target in fuzz/ for SECONDS each (default 10). CI runs a short
# smoke (hack/fuzz.sh 5); run longer by hand, e.g. `hack/fuzz.sh 600`, or one
# target: `cargo +nightly fuzz run render -- -max_total_time=3600`.
#
# Needs nightly Rust (libFuzzer) and cargo-fuzz; both are installed when
# missing. New inputs go to fuzz/corpus/<target>/ (not committed); a crash
# is saved under fuzz/artifacts/<target>/ and the script fails: turn it into
# a regression test (unit test of the function involved) before fixing it.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
if ! rustup toolchain list | grep -q '^nightly'; then
  rustup toolchain install nightly --profile minimal
fi
if ! command -v cargo-fuzz >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi
# Seeds: the project's own inputs.
declare -A seeds=(
  [render]="testdata/demo testdata/seeds"
  [overrides]="fuzz/seeds/overrides"
  [selector]="fuzz/seeds/selector"
  [duration]="fuzz/seeds/duration"
  [kubeconfig]="fuzz/seeds/kubeconfig"
  [go_json]="fuzz/seeds/go_json"
)
# Memory safety is the compiler's; no sanitizer keeps builds and runs fast.
# Debug assertions (-a) turn integer overflow into findings.
build=(--sanitizer none -a)
# KUBEFEDCTL_FUZZ_TARGET_DIR: where the fuzz build goes (CI keeps it in the
# test environment's cache, so that a fresh clone builds only its crates).
if [ -n "${KUBEFEDCTL_FUZZ_TARGET_DIR:-}" ]; then
  build+=(--target-dir "$KUBEFEDCTL_FUZZ_TARGET_DIR")
fi
cargo +nightly fuzz build "${build[@]}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
for target in $(cargo +nightly fuzz list); do
  mkdir -p "fuzz/corpus/$target"
  echo "fuzz: $target for ${secs}s" >&2
  # shellcheck disable=SC2086
  if ! cargo +nightly fuzz run "${build[@]}" "$target" "fuzz/corpus/$target" ${seeds[$target]:-} -- \
      -max_total_time="$secs" -rss_limit_mb=4096 >"$log" 2>&1; then
    grep -v '^ *[0-9]*: \|^ *at ' "$log" | tail -n 25 >&2
    echo "fuzz: $target found a crash (input in fuzz/artifacts/$target/)" >&2
    exit 1
  fi
  grep -E '^Done [0-9]+ runs' "$log" >&2 || true
done
echo "fuzz: every target ran ${secs}s without a crash" >&2
