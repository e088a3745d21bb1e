#!/usr/bin/env bash
# The image of deploy/Dockerfile, from a release archive, with no registry:
# FROM scratch, the statically linked kubefedctl, the build machine's CA
# certificates and user 65532. Nothing is pulled (`--pull=never`).
#
#   hack/image.sh [ARCHIVE]    build localhost/kubefedctl:<version> and
#                              localhost/kubefedctl:<version>-ci; print both
#
# ARCHIVE defaults to dist/kubefedctl-<version>-x86_64-unknown-linux-gnu.tar.gz
# (hack/release.sh builds it). The `-ci` variant adds a shell and the usual
# commands (busybox-static's `sh`, `base64`, `tee`, ...) and a writable /tmp
# for CI jobs, which run their scripts in a shell (GitLab CI: docs/ci.md);
# its entrypoint is the shell, kubefedctl is on PATH.
#
# Environment:
#   IMAGE      the image's name (default localhost/kubefedctl); tags are
#              <version> and <version>-ci
#   BUILDER    buildah (default when installed), podman or docker
#   CA_BUNDLE  the CA certificates to put in (default the machine's,
#              /etc/ssl/certs/ca-certificates.crt)
#   BUSYBOX    a statically linked busybox for the -ci variant (default
#              /bin/busybox, Debian's busybox-static)
set -euo pipefail
cd "$(dirname "$0")/.."
version=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -1)
archive=${1:-dist/kubefedctl-$version-x86_64-unknown-linux-gnu.tar.gz}
image=${IMAGE:-localhost/kubefedctl}
ca=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
busybox=${BUSYBOX:-/bin/busybox}
[ -f "$archive" ] || { echo "image: no $archive (hack/release.sh builds it)" >&2; exit 1; }
[ -f "$ca" ] || { echo "image: no CA bundle at $ca (Debian: apt-get install ca-certificates)" >&2; exit 1; }
[ -x "$busybox" ] || { echo "image: no busybox at $busybox (Debian: apt-get install busybox-static)" >&2; exit 1; }
if [ -z "${BUILDER:-}" ]; then
  for b in buildah podman docker; do
    if command -v "$b" >/dev/null 2>&1; then BUILDER=$b; break; fi
  done
fi
[ -n "${BUILDER:-}" ] || { echo "image: needs buildah, podman or docker" >&2; exit 1; }

ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
# rootfs/: what both images hold.
mkdir -p "$ctx/unpack" "$ctx/rootfs/usr/local/bin" "$ctx/rootfs/etc/ssl/certs"
tar -xzf "$archive" -C "$ctx/unpack"
bin=$(find "$ctx/unpack" -name kubefedctl -type f | head -1)
[ -n "$bin" ] || { echo "image: no kubefedctl in $archive" >&2; exit 1; }
# FROM scratch has no dynamic loader: both programs must be static (ldd
# names a loader or libraries only for a dynamic executable).
for program in "$bin" "$busybox"; do
  if command -v ldd >/dev/null 2>&1 && ldd "$program" 2>&1 | grep -q -e '=>' -e 'ld-linux'; then
    echo "image: $program is dynamically linked; FROM scratch needs a static build" >&2
    exit 1
  fi
done
install -m 0755 "$bin" "$ctx/rootfs/usr/local/bin/kubefedctl"
install -m 0644 "$ca" "$ctx/rootfs/etc/ssl/certs/ca-certificates.crt"
echo "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin" >"$ctx/rootfs/etc/passwd"
echo "nonroot:x:65532:" >"$ctx/rootfs/etc/group"
# shell/: the -ci variant's additions.
mkdir -p "$ctx/shell/bin" "$ctx/shell/tmp" "$ctx/shell/home/nonroot"
chmod 1777 "$ctx/shell/tmp"
chown 65532:65532 "$ctx/shell/home/nonroot" 2>/dev/null || chmod 0777 "$ctx/shell/home/nonroot"
install -m 0755 "$busybox" "$ctx/shell/bin/busybox"
for applet in $("$busybox" --list); do
  [ "$applet" = busybox ] || ln -s busybox "$ctx/shell/bin/$applet"
done

build() { # TARGET TAG
  case "$BUILDER" in
    buildah) buildah bud --pull=never --layers=false -q -f deploy/Dockerfile --target "$1" -t "$2" "$ctx" ;;
    podman) podman build --pull=never -q -f deploy/Dockerfile --target "$1" -t "$2" "$ctx" ;;
    docker) docker build -q -f deploy/Dockerfile --target "$1" -t "$2" "$ctx" ;;
    *) echo "image: unknown BUILDER $BUILDER" >&2; exit 1 ;;
  esac >&2
}
build image "$image:$version"
build ci "$image:$version-ci"
echo "$image:$version"
echo "$image:$version-ci"
