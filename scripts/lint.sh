#!/usr/bin/env bash
# gofmt, go vet and `go mod tidy -diff` in every module of the repository.
# go vet runs without cgo in the pure-Go modules (the library and tools/);
# fdbkv, and tools/' FoundationDB mode (-tags fdb), need cgo and libfdb_c and
# are vetted by scripts/fdbkv-check.sh against the stub library.
set -euo pipefail
cd "$(dirname "$0")/.."
unformatted=$(gofmt -l $(git ls-files '*.go' | xargs -r -n1 dirname | sort -u) 2>/dev/null || true)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi
for d in . tools; do
  (cd "$d" && CGO_ENABLED=0 go vet ./...)
done
for mod in $(git ls-files 'go.mod' '*/go.mod'); do
  d=$(dirname "$mod")
  if ! (cd "$d" && go mod tidy -diff >/dev/null); then
    echo "go mod tidy is not clean in ./$d"; (cd "$d" && go mod tidy -diff || true); exit 1
  fi
done
echo "lint: ok"
