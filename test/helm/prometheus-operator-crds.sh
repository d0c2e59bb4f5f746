#!/usr/bin/env bash
# Prints the directory holding the Prometheus Operator's CRDs (example/prometheus-operator-crd/ of its Go
# module, downloaded once through the Go module proxy into the module cache), so that the charts' tests
# validate PrometheusRules, ServiceMonitors and PodMonitors against their real schemas.
set -euo pipefail
VERSION="${PROMETHEUS_OPERATOR_VERSION:-v0.85.0}"
command -v go >/dev/null || { echo "go is required to fetch the Prometheus Operator's CRDs (https://go.dev/dl/)" >&2; exit 1; }
cd "${TMPDIR:-/tmp}"  # outside any go.mod
dir="$(GOFLAGS=-mod=mod go mod download -json "github.com/prometheus-operator/prometheus-operator@${VERSION}" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')"
[[ -d "$dir/example/prometheus-operator-crd" ]] || { echo "no CRDs in github.com/prometheus-operator/prometheus-operator@${VERSION}" >&2; exit 1; }
echo "$dir/example/prometheus-operator-crd"
