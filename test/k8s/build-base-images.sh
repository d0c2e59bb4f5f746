#!/usr/bin/env bash
# Builds the node's two local images as OCI layouts (no registry, no Docker), for node.ts to cache:
#   build-base-images.sh base OUT NODE_BINARY NPM_VERSION [CA_BUNDLE]
#     Debian bookworm (debootstrap --variant=minbase) with the project's pinned Node binary and the npm it
#     ships with, and a `node` user (uid 1000), like the official node:22-slim image the Dockerfiles default
#     to; tagged `base`. Our Dockerfiles build FROM it in tests (BASE_IMAGE=local/base:base).
#     CA_BUNDLE is the host's trusted certificates: where the host reaches the npm registry through a
#     TLS-intercepting proxy, `npm ci` in a build trusts what the host trusts (NODE_EXTRA_CA_CERTS).
#   build-base-images.sh pause OUT PAUSE_BINARY
#     The pod sandbox image (containerd's sandbox_image): the static program of pause/ alone; tagged `1`.
# OUT is written whole or not at all (built beside it, then renamed). The Debian mirror is the machine's own,
# from its apt sources (sources.sh; DEBIAN_MIRROR overrides).
set -euo pipefail
source "$(cd "$(dirname "$0")" && pwd)/sources.sh"

kind=$1 out=$2
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
layout="$work/layout"
step() { printf '  %s: %s (%ds)\n' "$kind" "$1" "$SECONDS" >&2; }

case "$kind" in
  base)
    node_binary=$3 npm_version=$4 ca_bundle=${5:-} rootfs="$work/rootfs"
    mirror=$(debian_mirror bookworm)
    step "debootstrap bookworm minbase from $mirror (about 1.5 min on a first run)"
    # debootstrap prints a line per package it fetches and unpacks; only its progress milestones are kept.
    debootstrap --variant=minbase bookworm "$rootfs" "$mirror" 2>&1 |
      grep -E '^I: (Retrieving Packages|Validating Packages|Resolving dependencies|Extracting base system|Installing core packages|Configuring the base system|Base system installed successfully)' >&2
    # Left by debootstrap for its chroot, or caches: the runtime provides /dev, and apt state only grows the image.
    rm -rf "$rootfs"/dev/* "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/usr/share/man "$rootfs"/usr/share/info
    find "$rootfs/usr/share/doc" -type f ! -name copyright -delete
    step "adding node $("$node_binary" --version) and npm $npm_version"
    install -D -m 0755 "$node_binary" "$rootfs/usr/local/bin/node"
    mkdir -p "$rootfs/usr/local/lib/node_modules/npm"
    (cd "$work" && npm pack --silent "npm@$npm_version" >/dev/null)
    tar -xzf "$work/npm-$npm_version.tgz" --strip-components=1 -C "$rootfs/usr/local/lib/node_modules/npm"
    ln -s ../lib/node_modules/npm/bin/npm-cli.js "$rootfs/usr/local/bin/npm"
    ln -s ../lib/node_modules/npm/bin/npx-cli.js "$rootfs/usr/local/bin/npx"
    ca_env=()
    if [[ -n $ca_bundle ]]; then
      install -D -m 0644 "$ca_bundle" "$rootfs/etc/ssl/certs/ca-certificates.crt"
      ca_env=(--config.env NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt)
    fi
    chroot "$rootfs" groupadd --gid 1000 node
    chroot "$rootfs" useradd --uid 1000 --gid node --shell /bin/bash --create-home node
    step "packing with umoci"
    umoci init --layout "$layout"
    umoci new --image "$layout:base"
    umoci insert --image "$layout:base" "$rootfs" /
    umoci config --image "$layout:base" --os linux --architecture amd64 \
      --config.env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
      --config.env "NODE_VERSION=$("$node_binary" --version | tr -d v)" "${ca_env[@]}" --config.cmd node
    ;;
  pause)
    pause_binary=$3
    umoci init --layout "$layout"
    umoci new --image "$layout:1"
    umoci insert --image "$layout:1" "$pause_binary" /pause
    umoci config --image "$layout:1" --os linux --architecture amd64 --config.entrypoint /pause --config.user 65535:65535
    ;;
  *)
    echo "usage: $0 base OUT NODE_BINARY NPM_VERSION | pause OUT PAUSE_BINARY" >&2
    exit 2
    ;;
esac
umoci gc --layout "$layout"
rm -rf "$out.partial"
mkdir -p "$(dirname "$out")"
cp -a "$layout" "$out.partial"
rm -rf "$out"
mv "$out.partial" "$out"
step "done: $out"
