#!/usr/bin/env bash
# Builds kind-config-check (this folder: kind's public v1alpha4 config types from the Go module proxy, at the
# version go.mod pins, plus kind's validation rules) into the cache and prints the binary's path. The cache
# key is a hash of the sources, so an edit rebuilds it; a build takes seconds once the modules are downloaded.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
key="$(cat "$HERE"/go.mod "$HERE"/go.sum "$HERE"/*.go | sha256sum | cut -c1-16)"
CACHE_DIR="${TEMPORA_CACHE_DIR:-$HOME/.cache/tempora}/kind-config-check/$key"
if [[ -x "$CACHE_DIR/kind-config-check" ]]; then echo "$CACHE_DIR/kind-config-check"; exit 0; fi
command -v go >/dev/null || { echo "go is required to build test/kind/kind-config-check (https://go.dev/dl/)" >&2; exit 1; }
mkdir -p "$CACHE_DIR"
cd "$HERE"
# -mod=readonly: go.sum pins what the proxy serves; a missing or changed sum fails instead of being rewritten.
CGO_ENABLED=0 GOFLAGS="-buildvcs=false -mod=readonly" go build -trimpath -o "$CACHE_DIR/kind-config-check.partial" . >&2
mv "$CACHE_DIR/kind-config-check.partial" "$CACHE_DIR/kind-config-check"
echo "$CACHE_DIR/kind-config-check"
