#!/usr/bin/env bash
# Builds Kubernetes binaries from the Go module proxy into the per-version cache: the ones named as
# arguments, by default the control plane's (kube-apiserver, kube-controller-manager); the node adds
# kubelet, kube-scheduler and kube-proxy. Only the missing ones are built.
# `go install k8s.io/kubernetes/cmd/...@vX` is refused because k8s.io/kubernetes's go.mod points its
# staging modules at ./staging/...; a wrapper module that requires k8s.io/kubernetes and re-states each of
# those replaces as the matching published v0.x release builds the same code.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.33.13}"
STAGING_VERSION="v0.${K8S_VERSION#v1.}"
CACHE_DIR="${TEMPORA_CACHE_DIR:-$HOME/.cache/tempora}/k8s/${K8S_VERSION}"
HERE="$(cd "$(dirname "$0")" && pwd)"
source "$HERE/go-progress.sh"
source "$HERE/sources.sh"
BINARIES=("$@")
((${#BINARIES[@]})) || BINARIES=(kube-apiserver kube-controller-manager)

missing=()
for b in "${BINARIES[@]}"; do [[ -x "$CACHE_DIR/$b" ]] || missing+=("$b"); done
if ((${#missing[@]} == 0)); then echo "cached: $CACHE_DIR"; exit 0; fi

command -v go >/dev/null || { echo "go is required to build $K8S_VERSION (https://go.dev/dl/)" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"

# The staging modules are exactly the left-hand sides of k8s.io/kubernetes's local replaces. The go.mod comes
# from the proxy `go env GOPROXY` names, as the go commands below fetch theirs (sources.sh).
curl -fsSL "$(go_proxy)/k8s.io/kubernetes/@v/${K8S_VERSION}.mod" -o kubernetes.mod
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
cat > tools.go <<GO
//go:build tools

package tools

import (
$(for b in "${missing[@]}"; do printf '\t_ "k8s.io/kubernetes/cmd/%s"\n' "$b"; done)
)
GO

export GOFLAGS="${GOFLAGS:--buildvcs=false} -mod=mod"
export CGO_ENABLED=0
hint="a first run with downloads takes 3-4 min per binary on 2 cores; the kubelet takes 1.5 GB"
echo "building ${missing[*]} ${K8S_VERSION} from the Go module proxy ($hint)"
go mod tidy -e 2>&1 | progress "downloaded modules" 0 "$hint" || true
go get "k8s.io/kubernetes@${K8S_VERSION}" 2>&1 | progress "downloaded modules" 0 "$hint"
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${K8S_VERSION} -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$K8S_VERSION" | cut -d. -f2)"
GO_BUILD_FLAGS=(-trimpath -ldflags "$ldflags")
mkdir -p "$work/out" "$CACHE_DIR"
go_build_with_progress "$work/out" "$hint" "${missing[@]/#/k8s.io/kubernetes/cmd/}"
# Each binary appears in the cache whole or not at all, so an interrupted build is simply redone.
for b in "${missing[@]}"; do cp "$work/out/$b" "$CACHE_DIR/$b.partial" && mv "$CACHE_DIR/$b.partial" "$CACHE_DIR/$b"; done
echo "built: ${missing[*]} in $CACHE_DIR"
