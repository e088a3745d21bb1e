#!/usr/bin/env bash
# Release archives: one per platform, with its checksum, and the krew
# manifest for every archive built so far. The release workflow
# (.github/workflows/release.yml) runs it once per platform, then once with
# --manifest over all of them; the tests (tests/it/install.rs) run it for
# this machine's platform.
#
#   hack/release.sh [TARGET]   build TARGET (default: the host's triple) in
#                              release mode, archive it, write its .sha256,
#                              render dist/fed.yaml; print the paths
#   hack/release.sh --manifest render dist/fed.yaml from the archives'
#                              checksums in dist/ (the workflow's last job)
#
# An archive, kubefedctl-<version>-<target>.tar.gz, holds one directory of
# the same name: kubefedctl, kubectl-fed, kubectl_complete-fed, LICENSE,
# README.md and completions/. Linux builds (-gnu) are statically linked
# (`-C target-feature=+crt-static`): one archive runs on any distribution's
# glibc, or none (deploy/Dockerfile puts it in an image FROM scratch).
#
# Environment:
#   DIST_DIR                    where to write (default: dist/ in the checkout)
#   KUBEFEDCTL_RELEASE_URL      where the archives will be downloaded from, for
#                               the krew manifest's `uri`s (default: GitHub's
#                               release of the tag, when GITHUB_REPOSITORY is
#                               set (in Actions), else file://DIST_DIR)
#   CARGO_TARGET_DIR            as cargo (default: target/ in the checkout)
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
[ -n "$version" ] || { echo "release: no version in Cargo.toml" >&2; exit 1; }
dist=${DIST_DIR:-$root/dist}
mkdir -p "$dist"
dist=$(cd "$dist" && pwd)
if [ -n "${KUBEFEDCTL_RELEASE_URL:-}" ]; then
  base_url=$KUBEFEDCTL_RELEASE_URL
elif [ -n "${GITHUB_REPOSITORY:-}" ]; then
  base_url="${GITHUB_SERVER_URL:-https://github.com}/$GITHUB_REPOSITORY/releases/download/v$version"
else
  base_url="file://$dist"
fi

sha256() {
  if command -v sha256sum >/dev/null 2>&1; then sha256sum "$1"; else shasum -a 256 "$1"; fi | cut -d' ' -f1
}

# krew's os/arch for a Rust target triple.
krew_platform() {
  local os arch
  case "$1" in
    x86_64-*) arch=amd64 ;;
    aarch64-*) arch=arm64 ;;
    *) return 1 ;;
  esac
  case "$1" in
    *-linux-*) os=linux ;;
    *-apple-darwin) os=darwin ;;
    *-windows-*) os=windows ;;
    *) return 1 ;;
  esac
  echo "$os $arch"
}

# deploy/krew/fed.yaml with one platform per archive in dist/.
render_manifest() {
  local platforms="" sum_file archive target name os arch ext
  for sum_file in "$dist"/kubefedctl-"$version"-*.tar.gz.sha256; do
    [ -e "$sum_file" ] || continue
    archive=$(basename "$sum_file" .sha256)
    name=${archive%.tar.gz}
    target=${name#kubefedctl-"$version"-}
    read -r os arch < <(krew_platform "$target") || continue
    ext=""; [ "$os" = windows ] && ext=.exe
    platforms+="  - selector:
      matchLabels:
        os: $os
        arch: $arch
    uri: $base_url/$archive
    sha256: $(cut -d' ' -f1 "$sum_file")
    files:
      - from: $name/kubectl-fed$ext
        to: .
      - from: $name/kubectl_complete-fed$ext
        to: .
      - from: $name/LICENSE
        to: .
    bin: kubectl-fed$ext
"
  done
  [ -n "$platforms" ] || { echo "release: no archives in $dist" >&2; exit 1; }
  # The template's lines up to `platforms:`, then the platforms.
  {
    sed -e "s/@VERSION@/v$version/" -e '/^  platforms:/q' deploy/krew/fed.yaml
    printf '%s' "$platforms"
  } >"$dist/fed.yaml"
  echo "$dist/fed.yaml"
}

if [ "${1:-}" = "--manifest" ]; then
  render_manifest
  exit 0
fi

target=${1:-$(rustc -vV | sed -n 's/^host: //p')}
ext=""
case "$target" in *-windows-*) ext=.exe ;; esac
case "$target" in
  *-linux-gnu) export RUSTFLAGS="${RUSTFLAGS:-} -C target-feature=+crt-static" ;;
esac
target_dir=${CARGO_TARGET_DIR:-$root/target}
echo "release: building kubefedctl $version for $target (RUSTFLAGS=${RUSTFLAGS:-})" >&2
cargo build --release --locked --target "$target" \
  --bin kubefedctl --bin kubectl-fed --bin kubectl_complete-fed >&2

name=kubefedctl-$version-$target
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir "$stage/$name"
for bin in kubefedctl kubectl-fed kubectl_complete-fed; do
  cp "$target_dir/$target/release/$bin$ext" "$stage/$name/"
done
cp LICENSE README.md "$stage/$name/"
cp -R completions "$stage/$name/completions"
archive="$dist/$name.tar.gz"
# Reproducible: sorted names, fixed owner and times (the commit's), no
# name or time in the gzip header. BSD tar (macOS) takes none of the options.
mtime=$(git log -1 --format=%ct 2>/dev/null || echo 0)
tar_opts=()
if tar --version 2>/dev/null | grep -q GNU; then
  tar_opts=(--sort=name --owner=0 --group=0 --numeric-owner --mtime="@$mtime")
fi
tar ${tar_opts[@]+"${tar_opts[@]}"} -C "$stage" -cf - "$name" | gzip -9n >"$archive"
echo "$(sha256 "$archive")  $name.tar.gz" >"$archive.sha256"
echo "$archive"
echo "$archive.sha256"
render_manifest
