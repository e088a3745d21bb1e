#!/usr/bin/env bash
# Regenerates what is generated from the command tree: completions/ (from
# the current binary) and the man pages in docs/man/. A test fails while
# either is stale.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet --bin kubefedctl
bin="${CARGO_TARGET_DIR:-target}/debug/kubefedctl"
"$bin" completion bash >completions/kubefedctl.bash
"$bin" completion zsh >completions/_kubefedctl
"$bin" completion fish >completions/kubefedctl.fish
"$bin" completion powershell >completions/_kubefedctl.ps1
echo "completions/ updated"
UPDATE_MAN=1 cargo test --quiet --test it cli::man_pages_are_current >/dev/null
echo "docs/man/ updated"
