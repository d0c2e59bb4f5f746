#!/usr/bin/env bash
# build-go-tool.sh NAME VERSION MODULE PACKAGE...: builds commands of a Go module from the Go module proxy
# into ${TEMPORA_CACHE_DIR:-~/.cache/tempora}/NAME/VERSION (one binary per package, named after its last
# path element), once per version; go-tool.ts calls it for every Go program the tests run (BuildKit, CoreDNS,
# the registry, kube-router, Traefik, prometheus-adapter, KEDA).
# `go install MODULE/cmd/x@VERSION` refuses modules whose go.mod has replace or exclude directives (BuildKit
# has excludes). A wrapper module whose go.mod is the module's own, renamed and requiring the module itself,
# keeps those directives in force and builds the same code.
set -euo pipefail

NAME=$1 VERSION=$2 MODULE=$3
shift 3
PACKAGES=("$@")
CACHE_DIR="${TEMPORA_CACHE_DIR:-$HOME/.cache/tempora}/$NAME/$VERSION"
HERE="$(cd "$(dirname "$0")" && pwd)"
source "$HERE/go-progress.sh"

missing=()
for p in "${PACKAGES[@]}"; do [[ -x "$CACHE_DIR/${p##*/}" ]] || missing+=("$p"); done
if ((${#missing[@]} == 0)); then echo "cached: $CACHE_DIR"; exit 0; fi

command -v go >/dev/null || { echo "go is required to build $NAME $VERSION (https://go.dev/dl/)" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"

export GOFLAGS="${GOFLAGS:--buildvcs=false} -mod=mod"
export CGO_ENABLED=0
hint="a first run with downloads takes ${BUILD_HINT:-a few minutes} on 2 cores"
echo "building $NAME $VERSION (${missing[*]##*/}) from the Go module proxy ($hint)"
gomod=$(go mod download -json "$MODULE@$VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p')
[[ -f "$gomod" ]] || { echo "no go.mod found for $MODULE@$VERSION" >&2; exit 1; }
sed "s|^module .*|module tempora.dev/$NAME-build|" "$gomod" >go.mod
printf '\nrequire %s %s\n' "$MODULE" "$VERSION" >>go.mod
{
  printf '//go:build tools\n\npackage tools\n\nimport (\n'
  for p in "${missing[@]}"; do printf '\t_ "%s"\n' "$p"; done
  printf ')\n'
} >tools.go

GO_BUILD_FLAGS=(-trimpath -ldflags "-s -w ${EXTRA_LDFLAGS:-}")
mkdir -p "$work/out" "$CACHE_DIR"
go_build_with_progress "$work/out" "$hint" "${missing[@]}"
# Each binary appears in the cache whole or not at all, so an interrupted build is simply redone.
for p in "${missing[@]}"; do
  b=${p##*/}
  cp "$work/out/$b" "$CACHE_DIR/$b.partial" && mv "$CACHE_DIR/$b.partial" "$CACHE_DIR/$b"
done
echo "built: ${missing[*]##*/} in $CACHE_DIR"
