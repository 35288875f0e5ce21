#!/usr/bin/env bash
# make doccounts: the README's counts of the conformance suites' checks are
# the suites' own. Runs kvtest on memdb (memdb TestConformance) and
# queuetest on memdb (TestLayerConformance) once each and counts their
# subtests as the README does:
#   kvtest:    "N named checks, M with their cases": N subtests at
#              TestConformance/<area>/<check>, M leaves (a check's cases
#              replace it);
#   queuetest: "K checks: ... and J for the JobQueue": K subtests below
#              TestLayerConformance/<area>, J of them below the Jobs area.
# Fails, naming the numbers, when the README says otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

names() { # the names of the subtests go test -v reports for $1 in $2
  local out
  out=$(go test -count=1 -v -run "^$1\$" "$2") || { echo "doccounts: $1 in $2 failed" >&2; exit 1; }
  echo "$out" | awk '$1 == "---" {print $3}'
}

kv=$(names TestConformance ./memdb)
named=$(echo "$kv" | awk -F/ 'NF == 3' | wc -l)
cased=$(echo "$kv" | awk -F/ 'NF == 4 {print $1 "/" $2 "/" $3}' | sort -u | wc -l)
leaves=$((named - cased + $(echo "$kv" | awk -F/ 'NF == 4' | wc -l)))

layer=$(names TestLayerConformance .)
checks=$(echo "$layer" | awk -F/ 'NF >= 3' | wc -l)
jobs=$(echo "$layer" | awk -F/ 'NF >= 3 && $2 == "Jobs"' | wc -l)

fail=0
want() { # want <pattern> <what>: the README must contain the pattern
  if ! grep -qF -- "$1" README.md; then
    echo "doccounts: README.md should say \"$1\" ($2)" >&2
    fail=1
  fi
}
want "($named named checks, one per rule" "kvtest's checks"
want "($named named checks, $leaves with their cases)" "kvtest's checks and cases"
want "($checks checks:" "queuetest's checks"
want "and $jobs for the \`JobQueue\`" "queuetest's JobQueue checks"
if [ "$fail" = 0 ]; then
  echo "doccounts: README counts match (kvtest $named named, $leaves with cases; queuetest $checks, $jobs JobQueue)"
fi
exit "$fail"
