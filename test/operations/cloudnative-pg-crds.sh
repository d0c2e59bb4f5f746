#!/usr/bin/env bash
# Prints the directory holding CloudNativePG's Cluster and ScheduledBackup CRDs (config/crd/bases/ of its
# Go module, fetched once from the Go module proxy into ~/.cache/tempora), so that the CloudNativePG
# manifests of docs/examples/ are validated against CloudNativePG's own schemas.
set -euo pipefail
VERSION="${CLOUDNATIVE_PG_VERSION:-v1.28.0}"
MODULE=github.com/cloudnative-pg/cloudnative-pg
source "$(dirname "${BASH_SOURCE[0]}")/../k8s/sources.sh"
dir="${TEMPORA_CACHE_DIR:-$HOME/.cache/tempora}/cloudnative-pg/$VERSION"
crds=(postgresql.cnpg.io_clusters.yaml postgresql.cnpg.io_scheduledbackups.yaml)
if [[ ! -s "$dir/${crds[1]}" ]]; then
  mkdir -p "$dir"
  zip="$(mktemp)"
  trap 'rm -f "$zip"' EXIT
  curl -fsSL --retry 3 -o "$zip" "$(go_proxy)/$MODULE/@v/$VERSION.zip"
  for crd in "${crds[@]}"; do unzip -p "$zip" "$MODULE@$VERSION/config/crd/bases/$crd" > "$dir/$crd.part" && mv "$dir/$crd.part" "$dir/$crd"; done
fi
echo "$dir"
