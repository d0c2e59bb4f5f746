#!/usr/bin/env bash
# Builds the helm v3 CLI from the Go module proxy into the per-version cache and prints its path.
# helm.sh/helm/v3 has no replace directives, so a plain `go install module@version` builds it (no wrapper
# module as test/k8s/build-binaries.sh needs for k8s.io/kubernetes). About 5 minutes on 2 cores the first
# time; later runs find the cached binary and return at once. Set HELM_VERSION to build another release.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.21.4}"
CACHE_DIR="${TEMPORA_CACHE_DIR:-$HOME/.cache/tempora}/helm/${HELM_VERSION}"

if [[ -x "$CACHE_DIR/helm" ]]; then echo "$CACHE_DIR/helm"; exit 0; fi

if ! command -v go >/dev/null; then
  if [[ -x /usr/local/go/bin/go ]]; then PATH="/usr/local/go/bin:$PATH"; else
    echo "go is required to build helm ${HELM_VERSION} (https://go.dev/dl/)" >&2; exit 1
  fi
fi

rm -rf "$CACHE_DIR.partial"
mkdir -p "$CACHE_DIR.partial"
export GOFLAGS="${GOFLAGS:--buildvcs=false}"
export CGO_ENABLED=0
echo "building helm ${HELM_VERSION}" >&2
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cd "${TMPDIR:-/tmp}"  # outside any go.mod, so that no caller's module takes part

# The ldflags of helm's own Makefile: its version, and the Kubernetes version that `helm template` and
# `helm lint` assume without a cluster (Capabilities.KubeVersion), derived from the k8s.io/client-go it
# requires (v0.36.x -> 1.36). Without them helm says "v3.x-dev" and assumes Kubernetes 1.20.
gomod="$(go mod download -json "helm.sh/helm/v3@${HELM_VERSION}" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')"
[[ -f "$gomod" ]] || { echo "could not download helm.sh/helm/v3@${HELM_VERSION}" >&2; exit 1; }
client_go="$(awk '$1 == "k8s.io/client-go" { print $2; exit }' "$gomod")"
[[ "$client_go" =~ ^v0\.([0-9]+)\. ]] || { echo "no k8s.io/client-go v0.x in helm's go.mod ($client_go)" >&2; exit 1; }
k8s_minor="${BASH_REMATCH[1]}"
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
  ldflags+=" -X ${pkg}.k8sVersionMajor=1 -X ${pkg}.k8sVersionMinor=${k8s_minor}"
done
# A line every 15 s with the packages compiled so far, instead of minutes of silence.
source "$HERE/../k8s/go-progress.sh"
GOBIN="$CACHE_DIR.partial" go install -v -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}" 2>&1 | progress "helm: compiled packages" 0 "about 5 min the first time"
rm -rf "$CACHE_DIR"
mv "$CACHE_DIR.partial" "$CACHE_DIR"
echo "built: $CACHE_DIR/helm" >&2
echo "$CACHE_DIR/helm"
