#!/usr/bin/env bash
# Sourced by the build scripts: where this machine gets Debian packages and Go modules, so that a machine
# with its own mirrors is used as configured. The public hosts are only the fallback for a machine that
# names none. Run directly, it prints what it found: `bash test/k8s/sources.sh [SUITE]`.

# debian_mirror [SUITE]: the first `deb` URI of the apt sources that serves SUITE (default bookworm), in
# apt's own order (sources.list, then sources.list.d/ by name; one-line *.list and deb822 *.sources, whose
# stanzas with `Enabled: no` are skipped). DEBIAN_MIRROR overrides; APT_SOURCES_DIR (default /etc/apt) is
# where the sources are read. Only an entry with SUITE and the `main` component counts: debootstrap needs
# the distribution's main archive, not a vendor's repository or the security archive.
debian_mirror() {
  local suite=${1:-bookworm} dir=${APT_SOURCES_DIR:-/etc/apt} found="" f
  if [[ -n ${DEBIAN_MIRROR:-} ]]; then
    printf '%s\n' "$DEBIAN_MIRROR"
    return
  fi
  for f in "$dir/sources.list" "$dir"/sources.list.d/*.list "$dir"/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    case $f in
      *.sources) found=$(awk -v suite="$suite" '
          function flush() {
            if (!printed && deb && enabled && uri != "" && index(suites " ", " " suite " ") && index(components " ", " main ")) { print uri; printed = 1; exit }
            deb = 0; enabled = 1; uri = ""; suites = ""; components = ""
          }
          BEGIN { enabled = 1 }
          /^[[:space:]]*$/ { flush(); next }
          /^[[:space:]]*#/ { next }
          tolower($1) == "types:" { for (i = 2; i <= NF; i++) if ($i == "deb") deb = 1 }
          tolower($1) == "enabled:" { enabled = (tolower($2) != "no") }
          tolower($1) == "uris:" { uri = $2 }
          tolower($1) == "suites:" { suites = ""; for (i = 2; i <= NF; i++) suites = suites " " $i }
          tolower($1) == "components:" { components = ""; for (i = 2; i <= NF; i++) components = components " " $i }
          END { flush() }' "$f") ;;
      *) found=$(awk -v suite="$suite" '
          $1 != "deb" { next }
          { i = 2 }
          # Options in brackets, e.g. [arch=amd64 signed-by=...], may span several fields.
          $i ~ /^\[/ { while (i <= NF && $i !~ /\]$/) i++; i++ }
          $(i + 1) != suite { next }
          { for (c = i + 2; c <= NF; c++) if ($c == "main") { print $i; exit } }' "$f") ;;
    esac
    if [[ $found =~ ^(https?|file):// ]]; then
      printf '%s\n' "${found%/}"
      return
    fi
  done
  printf '%s\n' "http://deb.debian.org/debian"
}

# go_proxy: the first proxy URL in `go env GOPROXY` (a list separated by `,` or `|`, where `direct` and `off`
# name no proxy). GOPROXY_URL overrides; without go or without a proxy URL, the public proxy.
go_proxy() {
  local entries=() entry
  if [[ -n ${GOPROXY_URL:-} ]]; then
    printf '%s\n' "${GOPROXY_URL%/}"
    return
  fi
  IFS=',|' read -ra entries <<<"$(go env GOPROXY 2>/dev/null || true)"
  for entry in "${entries[@]}"; do
    if [[ $entry =~ ^https?:// ]]; then
      printf '%s\n' "${entry%/}"
      return
    fi
  done
  printf '%s\n' "https://proxy.golang.org"
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then
  set -euo pipefail
  printf 'debian mirror: %s\ngo proxy: %s\n' "$(debian_mirror "${1:-bookworm}")" "$(go_proxy)"
fi
