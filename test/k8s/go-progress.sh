# Sourced by the build scripts: runs long `go` steps with a progress line every 15 s instead of minutes of
# silence. Go prints nothing while it downloads or compiles, except one line per module (`go: downloading`)
# or per compiled package (`go build -v`); those lines are counted, everything else is passed through.

# progress LABEL TOTAL HINT: reads a go command's output on stdin. TOTAL is how many counted lines make the
# whole job (0 when unknown); HINT is what a first run usually takes, shown while no rate can be estimated.
progress() {
  local label=$1 total=$2 hint=$3 done=0 start=$SECONDS last=$SECONDS line status
  while :; do
    if IFS= read -r -t 15 line; then
      if [[ $line == "go: downloading "* || $line =~ ^[A-Za-z0-9._~/-]+$ ]]; then
        done=$((done + 1))
      else
        printf '%s\n' "$line" >&2
      fi
    else
      status=$?
      ((status > 128)) || break # end of input; above 128 the read only timed out
    fi
    if ((SECONDS - last >= 15)); then
      last=$SECONDS
      local elapsed=$((SECONDS - start)) eta=""
      if ((total > 0 && done > 0 && done < total)); then
        eta=", about $(((elapsed * (total - done) / done + 59) / 60)) min left"
        printf '  %s: %d/%d, %dm%02ds%s\n' "$label" "$done" "$total" $((elapsed / 60)) $((elapsed % 60)) "$eta" >&2
      else
        printf '  %s: %d so far, %dm%02ds (%s)\n' "$label" "$done" $((elapsed / 60)) $((elapsed % 60)) "$hint" >&2
      fi
    fi
  done
}

# go_build_with_progress OUTDIR HINT PACKAGE...: builds the main packages into OUTDIR, printing how many of
# their packages have been compiled. Extra `go build` flags come from GO_BUILD_FLAGS (an array).
go_build_with_progress() {
  local out=$1 hint=$2 started=$SECONDS
  shift 2
  echo "resolving modules for $*" >&2
  # Listing the dependencies downloads every module the build needs.
  local list total
  list=$(mktemp)
  # Standard-library packages come precompiled with the toolchain; go build -v lists only what it compiles.
  { go list -deps -f '{{if not .Standard}}{{.ImportPath}}{{end}}' "$@" >"$list"; } 2>&1 | progress "downloaded modules" 0 "$hint"
  if ((PIPESTATUS[0] != 0)); then rm -f "$list"; return 1; fi
  total=$(grep -c . "$list" || true)
  rm -f "$list"
  echo "compiling $* ($total packages; $hint)" >&2
  go build -v "${GO_BUILD_FLAGS[@]}" -o "$out/" "$@" 2>&1 | progress "compiled packages" "$total" "$hint"
  local status=${PIPESTATUS[0]}
  # Each first-run build says what it cost, so a slow first `npm test` shows where its time went.
  ((status == 0)) && printf 'built %s in %dm%02ds\n' "$*" $(((SECONDS - started) / 60)) $(((SECONDS - started) % 60)) >&2
  return "$status"
}
