#!/usr/bin/env bash
# Builds kube-apiserver and kube-controller-manager from the Go module proxy into the per-version cache.
# `go install k8s.io/kubernetes/cmd/...@vX` is refused because k8s.io/kubernetes's go.mod points its
# staging modules at ./staging/...; a wrapper module that requires k8s.io/kubernetes and re-states each of
# those replaces as the matching published v0.x release builds the same code.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.33.13}"
STAGING_VERSION="v0.${K8S_VERSION#v1.}"
CACHE_DIR="${TEMPORA_CACHE_DIR:-$HOME/.cache/tempora}/k8s/${K8S_VERSION}"
BINARIES=(kube-apiserver kube-controller-manager)

missing=0
for b in "${BINARIES[@]}"; do [[ -x "$CACHE_DIR/$b" ]] || missing=1; done
if [[ $missing == 0 ]]; then echo "cached: $CACHE_DIR"; exit 0; fi

command -v go >/dev/null || { echo "go is required to build $K8S_VERSION (https://go.dev/dl/)" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"

# The staging modules are exactly the left-hand sides of k8s.io/kubernetes's local replaces.
curl -fsSL "${GOPROXY_URL:-https://proxy.golang.org}/k8s.io/kubernetes/@v/${K8S_VERSION}.mod" -o kubernetes.mod
staging=$(awk '/=> \.\/staging\/src\// { print $1 }' kubernetes.mod | sort -u)
[[ -n "$staging" ]] || { echo "no staging replaces found in k8s.io/kubernetes ${K8S_VERSION} go.mod" >&2; exit 1; }

{
  echo "module tempora.dev/k8s-binaries"
  echo
  echo "go $(awk '/^go / { print $2; exit }' kubernetes.mod)"
  echo
  echo "require k8s.io/kubernetes ${K8S_VERSION}"
  echo
  echo "replace ("
  for m in $staging; do echo "	$m => $m ${STAGING_VERSION}"; done
  echo ")"
} > go.mod
cat > tools.go <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
GO

export GOFLAGS="${GOFLAGS:--buildvcs=false} -mod=mod"
export CGO_ENABLED=0
go mod tidy -e >/dev/null 2>&1 || true
go get "k8s.io/kubernetes@${K8S_VERSION}"
mkdir -p "$CACHE_DIR.partial"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${K8S_VERSION} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2)"
for b in "${BINARIES[@]}"; do
  echo "building $b ${K8S_VERSION}"
  go build -trimpath -ldflags "$ldflags" -o "$CACHE_DIR.partial/$b" "k8s.io/kubernetes/cmd/$b"
done
rm -rf "$CACHE_DIR"
mv "$CACHE_DIR.partial" "$CACHE_DIR"
echo "built: $CACHE_DIR"
