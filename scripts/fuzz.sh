#!/usr/bin/env bash
# Runs every fuzz target of the pure-Go modules (the library and tools/) for
# a bounded time each.
#   usage: scripts/fuzz.sh [FUZZTIME]    (default 10s; any -fuzztime value)
# Targets are discovered with `go test -list '^Fuzz' ./...`, so a Fuzz*
# function added to any package is picked up without editing this script.
# go test -fuzz accepts one package and one target per run, hence the loop.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime="${1:-10s}"

# `go test -list` prints the matching names of a package, then a line
# "ok  <import path>  <time>" (or "?  <import path>  [no test files]"). A
# package that does not build is reported as "FAIL <import path> [...]": its
# targets cannot be listed, which fails this script, but only after the
# targets of the other packages have run.
targets=()
failed=()
for mod in . tools; do
  list_status=0
  listing=$(cd "$mod" && go test -list '^Fuzz' ./... 2>&1) || list_status=$?
  names=()
  while IFS= read -r line; do
    case "$line" in
      Fuzz*) names+=("$line") ;;
      "ok "* | "?"*)
        pkg=$(awk '{print $2}' <<<"$line")
        for n in "${names[@]+"${names[@]}"}"; do targets+=("$mod $pkg $n"); done
        names=()
        ;;
      FAIL[[:space:]]*) # "FAIL<tab>pkg [build failed]" (the bare "FAIL" summary line has no package)
        failed+=("$(awk '{print $2}' <<<"$line") (could not list targets: does it build?)")
        names=()
        ;;
    esac
  done <<<"$listing"
  if [ "$list_status" -ne 0 ]; then
    echo "$listing" | grep -v '^Fuzz' >&2 || true
    [ "${#failed[@]}" -gt 0 ] || failed+=("go test -list in ./$mod exited with status $list_status")
  fi
done

for target in "${targets[@]+"${targets[@]}"}"; do
  read -r mod pkg name <<<"$target"
  echo "=== fuzz $pkg $name for $fuzztime"
  if ! (cd "$mod" && go test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg"); then
    failed+=("$pkg $name")
  fi
done

if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz: FAILED:" >&2
  printf '  %s\n' "${failed[@]}" >&2
  echo "failing inputs are saved under the package's testdata/fuzz/<Target>/; rerun with go test -run '<Target>/<file>'" >&2
  exit 1
fi
echo "fuzz: ${#targets[@]} target(s) passed"
