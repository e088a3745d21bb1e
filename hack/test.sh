#!/usr/bin/env bash
# The project's test command (README, CI): provisions the test environment
# when it is missing (the first run on a machine builds Kubernetes v1.20.2
# once, ~8 minutes; later runs find it cached), then runs every test.
set -euo pipefail
cd "$(dirname "$0")/.."
hack/testenv.sh >/dev/null
exec cargo test --workspace "$@"
