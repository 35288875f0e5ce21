#!/usr/bin/env bash
# make fdbkv-check: compile, vet and link the fdbkv module (FoundationDB's
# official Go binding + our adapter) and the soak's FoundationDB mode
# (tools/cmd/soak -tags fdb) against a STUB libfdb_c, and run fdbkv's
# tests. The stub (fdbkv/internal/fdbcstub) is not FoundationDB: tests that
# need a cluster skip, only fdbkv's pure-Go tests really run (among them the
# tuple codec's differential test against the binding's pure-Go tuple and
# subspace packages, fdbkv/internal/tuplediff). This proves the
# adapter compiles and links, nothing about its behaviour on a real cluster;
# for that, see `make integration`.
# Needs: go, gcc, ar (binutils, installed with gcc). Network access for the
# first module download.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
stub="$root/fdbkv/internal/fdbcstub"
build="$stub/build"

echo "fdbkv-check: COMPILE/LINK CHECK AGAINST A STUB libfdb_c (not FoundationDB; cluster tests skip)"

# 1. The stub library.
bash scripts/fdbc-stub.sh
echo "fdbkv-check: built stub $build/libfdb_c.a (static: nothing to find at run time)"

cd "$root/fdbkv"

# 2. The module's go.mod/go.sum are tidy (no cgo needed for this).
if ! go mod tidy -diff >/dev/null; then
  echo "fdbkv-check: go mod tidy is not clean in ./fdbkv:" >&2
  go mod tidy -diff >&2 || true
  exit 1
fi

export CGO_ENABLED=1
export CGO_CFLAGS="-I$stub/include"
export CGO_LDFLAGS="-L$build -lfdb_c"

# 3. The stub defines every C function the binding calls (the link below
# would fail too, less readably).
binding=$(go list -m -f '{{.Dir}}' github.com/apple/foundationdb/bindings/go)
used=$( { grep -ho 'C\.fdb_[a-z_0-9]*' "$binding"/src/fdb/*.go; grep -ho 'fdb_[a-z_0-9]*(' "$binding"/src/fdb/futures.go | tr -d '('; } \
  | sed 's/^C\.//' | grep -v -x -e fdb_bool_t -e fdb_error_t -e fdb_future_block_until_ready | sort -u)
defined=$(nm "$build/libfdb_c.a" | awk '$2 == "T" { print $3 }' | sort -u)
missing=$(comm -23 <(echo "$used") <(echo "$defined"))
if [ -n "$missing" ]; then
  echo "fdbkv-check: the binding calls C functions the stub does not define:" >&2
  echo "$missing" >&2
  exit 1
fi
echo "fdbkv-check: stub defines all $(echo "$used" | wc -l) C functions the binding calls"

# 4. vet, build, test. No cluster: FDB_CLUSTER_FILE is unset on purpose.
go vet ./...
go build ./...
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! env -u FDB_CLUSTER_FILE -u FDBKV_REQUIRE_CLUSTER go test -count=1 -v ./... >"$log" 2>&1; then
  cat "$log"
  echo "fdbkv-check: FAILED (go test in ./fdbkv against the stub libfdb_c)" >&2
  exit 1
fi
passed=$(grep -c -E '^\s*--- PASS' "$log" || true)
skipped=$(grep -c -E '^\s*--- SKIP' "$log" || true)
reason=$(grep -m1 -o 'no FoundationDB cluster: .*' "$log" || true)
echo "fdbkv-check: go test: $passed passed (pure Go), $skipped skipped${reason:+ ($reason)}"
# 5. The soak's FoundationDB mode (tools/cmd/soak, -tags fdb) vets, builds
# and links; run against the stub, -cluster-file must fail cleanly when the
# database cannot be opened (exit 2 and a "soak:" line, not a panic).
cd "$root/tools"
go vet -tags fdb ./...
soakbin="$build/soak-fdb"
go build -tags fdb -o "$soakbin" ./cmd/soak
soak_status=0
soak_out=$("$soakbin" -cluster-file "$build/no-such.cluster" -duration 1s 2>&1) || soak_status=$?
if [ "$soak_status" -ne 2 ] || ! grep -q '^soak: ' <<<"$soak_out"; then
  echo "fdbkv-check: soak -cluster-file against the stub: want exit 2 and a 'soak:' error, got $soak_status:" >&2
  echo "$soak_out" >&2
  exit 1
fi
echo "fdbkv-check: tools/cmd/soak -tags fdb builds and links; against the stub -cluster-file fails cleanly ($soak_out)"

echo "fdbkv-check: ok: fdbkv and the soak's FoundationDB mode vet, build and link, and fdbkv's pure-Go tests pass, against the STUB libfdb_c; nothing ran against FoundationDB"
