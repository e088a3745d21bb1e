#!/usr/bin/env bash
# Regenerates completions/ from the current binary (a test fails when stale).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet --bin kubefedctl
bin=target/debug/kubefedctl
"$bin" completion bash >completions/kubefedctl.bash
"$bin" completion zsh >completions/_kubefedctl
"$bin" completion fish >completions/kubefedctl.fish
"$bin" completion powershell >completions/_kubefedctl.ps1
echo "completions/ updated"
