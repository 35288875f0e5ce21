#!/usr/bin/env bash
# make release-check: proves that `go get` works for a user, before a tag.
#
# 1. Serves the library (.) and fdbkv at $VERSION (default v0.1.0, the
#    version fdbkv's go.mod requires of the library) from a local file-system
#    proxy, built by tools/cmd/modproxy from the files git tracks: what the go
#    command would download once both are tagged (v0.1.0 and fdbkv/v0.1.0),
#    each with a LICENSE (fdbkv gets the root one, as from the go command).
# 2. In throwaway consumer modules outside the repository, with replace
#    directives out of reach, runs `go get` at that version:
#    - one that imports only the library (and kvtest in a test): builds,
#      vets and runs it on memdb; its `go mod graph` must list no plotting,
#      PDF, font, LaTeX, image, porcupine or OpenTelemetry SDK module
#      (tools/ has those; the library needs only the metric API);
#    - one that imports fdbkv: builds it with cgo against the stub libfdb_c
#      (scripts/fdbc-stub.sh), and checks the same graph rule.
#
# Our modules come only from the local proxy (GONOSUMDB: they have no
# checksum database entry yet); the consumers use a fresh module cache, so
# the test versions never enter the real one. Third-party modules come from
# the real module cache (as a file proxy), else from the configured GOPROXY;
# their checksums are seeded from the repository's go.sum files, so the
# checksum database is not consulted for them either.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
VERSION=${VERSION:-v0.1.0}
lib=github.com/fdbqueue/fdbqueue
# Module paths of tools/ that a library user must never get. The check is
# run against tools/' own graph first, so a pattern that matches nothing
# cannot pass silently.
forbidden='gonum\.org|/plot[@ ]|pdf|font|latex|porcupine|freetype|svgo|golang\.org/x/image|sbinet/gg|go\.opentelemetry\.io/otel/sdk'

say() { echo "release-check: $*"; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/release-check.XXXXXX")
cleanup() { chmod -R u+w "$tmp" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

realcache=$(go env GOMODCACHE)
userproxy=$(go env GOPROXY)
userflags=$(go env GOFLAGS)

# The pattern finds tools/' plotting and porcupine modules. The graph is
# captured first: under pipefail, `go mod graph | grep -q` fails at random
# when grep exits at its first match and the writer dies of SIGPIPE.
toolsgraph=$(cd tools && go mod graph)
if ! grep -qE "$forbidden" <<<"$toolsgraph"; then
  say "the forbidden-module pattern matches nothing in tools/' graph: fix the pattern" >&2
  exit 1
fi

# 1. The proxy.
(cd tools && go run ./cmd/modproxy -o "$tmp/proxy" -version "$VERSION" -require-license "$root" "$root/fdbkv") |
  sed 's/^/release-check: /'

bash scripts/fdbc-stub.sh
stub="$root/fdbkv/internal/fdbcstub"

export GOMODCACHE="$tmp/modcache"
export GOPROXY="file://$tmp/proxy,file://$realcache/cache/download${userproxy:+,$userproxy}"
export GONOSUMDB="$lib" GOPRIVATE="" GONOPROXY="" GOINSECURE=""
export GOFLAGS="${userflags:+$userflags }-mod=mod -modcacherw"
export GOWORK=off GOTOOLCHAIN=local
godirective=$(sed -n 's/^go \([0-9.]*\)$/\1/p' go.mod)

# newconsumer DIR: an empty module requiring nothing yet, with the checksums
# of the repository's third-party dependencies.
newconsumer() {
  mkdir -p "$1"
  printf 'module example.com/consumer\n\ngo %s\n' "$godirective" >"$1/go.mod"
  cat go.sum fdbkv/go.sum | sort -u >"$1/go.sum"
}

# checkgraph DIR: the consumer's graph has our modules at $VERSION, no
# replacement, and none of tools/' dependencies.
checkgraph() {
  local graph bad got
  graph=$(cd "$1" && go mod graph)
  bad=$(grep -E "$forbidden" <<<"$graph" || true)
  if [ -n "$bad" ]; then
    say "FAILED: the module graph of $2 pulls modules only tools/ needs:" >&2
    echo "$bad" >&2
    exit 1
  fi
  got=$(cd "$1" && go list -m -f '{{.Path}} {{.Version}}{{with .Replace}} => {{.Path}}{{end}}' "$lib")
  if [ "$got" != "$lib $VERSION" ]; then
    say "FAILED: $2 resolved the library as '$got', not '$lib $VERSION'" >&2
    exit 1
  fi
  say "$2: $(wc -l <<<"$graph") edges in go mod graph, no plotting/PDF/font/LaTeX/porcupine/OTel SDK module:"
  (cd "$1" && go list -m all) | sed 's/^/release-check:   /'
}

# 2a. A library user on memdb.
c1="$tmp/consumer-lib"
newconsumer "$c1"
cat >"$c1/main.go" <<'EOF'
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/memdb"
	"github.com/fdbqueue/fdbqueue/tuple"
)

func main() {
	ctx := context.Background()
	db := memdb.New()
	defer db.Close()
	sub, err := fdbqueue.NewSubspace(tuple.Tuple{"release-check"})
	if err == nil {
		var q *fdbqueue.Queue
		if q, err = fdbqueue.NewQueue(sub); err == nil {
			if err = q.Enqueue(ctx, db, []byte("hello from v0.1.0")); err == nil {
				var v []byte
				if v, err = q.Dequeue(ctx, db); err == nil {
					fmt.Println(string(v))
				}
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
EOF
cat >"$c1/kvtest_test.go" <<'EOF'
package main

import "github.com/fdbqueue/fdbqueue/kvtest"

// Compiled by go vet: the exported conformance suite builds for a user.
var _ = kvtest.RunConformanceTests
EOF
say "consumer of the library: go get $lib@$VERSION"
(cd "$c1" && go get "$lib@$VERSION" && go mod tidy && CGO_ENABLED=0 go build ./... && go vet ./...)
out=$(cd "$c1" && go run .)
if [ "$out" != "hello from v0.1.0" ]; then
  say "FAILED: the library consumer printed '$out'" >&2
  exit 1
fi
checkgraph "$c1" "a consumer of the library"
# testify is in the graph because the exported kvtest suite uses it; a
# program that does not import kvtest must not compile it.
linked=$(cd "$c1" && go list -deps . | grep -E '^github\.com/stretchr/' || true)
if [ -n "$linked" ]; then
  say "FAILED: a program using the library (not kvtest) compiles testify: $linked" >&2
  exit 1
fi
say "a consumer of the library: its program compiles no testify package (only kvtest needs it)"

# 2b. An fdbkv user, built against the stub libfdb_c.
c2="$tmp/consumer-fdbkv"
newconsumer "$c2"
cat >"$c2/main.go" <<'EOF'
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/fdbqueue/fdbqueue"
	"github.com/fdbqueue/fdbqueue/fdbkv"
	"github.com/fdbqueue/fdbqueue/tuple"
)

func main() {
	db, err := fdbkv.OpenWithAPIVersion(730, os.Getenv("FDB_CLUSTER_FILE"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer db.Close()
	sub, _ := fdbqueue.NewSubspace(tuple.Tuple{"release-check"})
	q, _ := fdbqueue.NewQueue(sub)
	fmt.Println(q.Enqueue(context.Background(), db, []byte("hello")))
}
EOF
say "consumer of fdbkv: go get $lib/fdbkv@$VERSION (cgo, stub libfdb_c)"
(cd "$c2" && go get "$lib/fdbkv@$VERSION" && go mod tidy &&
  CGO_ENABLED=1 CGO_CFLAGS="-I$stub/include" CGO_LDFLAGS="-L$stub/build -lfdb_c" go build -o /dev/null .)
checkgraph "$c2" "a consumer of fdbkv"

say "ok: $lib and $lib/fdbkv at $VERSION go get and build from a proxy, with a lean module graph"
