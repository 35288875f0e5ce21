#!/usr/bin/env bash
# make integration: run fdbkv's tests (kvtest, the layer suite and the
# adapter's own), the example programs (via fdbkv/cmd/examples) and a short
# soak (tools/cmd/soak -tags fdb; SOAK_FLAGS, default "-seeds 4 -duration
# 1m") against a throwaway single-process FoundationDB cluster on a random
# loopback port, with a temporary data directory and cluster file, removed
# on exit.
#
# Needs fdbserver and fdbcli on PATH and FoundationDB's client library and
# headers (libfdb_c, fdb_c.h), i.e. FoundationDB's client and server
# packages. Without them it explains how to get them and exits 0: not
# having FoundationDB is not a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

FDB_VERSION=7.3.77 # keep in step with docker-compose.yml and .github/workflows/ci.yml

# The packages put fdbserver in /usr/sbin (Linux) or /usr/local/libexec
# (macOS), which a non-root PATH often lacks.
PATH="$PATH:/usr/sbin:/usr/local/sbin:/usr/local/libexec"
if ! command -v fdbserver >/dev/null || ! command -v fdbcli >/dev/null; then
  cat <<MSG
integration: FoundationDB is not installed here (no fdbserver and fdbcli on PATH or in /usr/sbin);
integration: skipping the integration tests. This is not a failure.

To run them, either install FoundationDB's client and server packages
(the .deb files of https://github.com/apple/foundationdb/releases), e.g. on Debian/Ubuntu amd64:

  curl -fLO https://github.com/apple/foundationdb/releases/download/${FDB_VERSION}/foundationdb-clients_${FDB_VERSION}-1_amd64.deb
  curl -fLO https://github.com/apple/foundationdb/releases/download/${FDB_VERSION}/foundationdb-server_${FDB_VERSION}-1_amd64.deb
  sudo dpkg -i foundationdb-clients_${FDB_VERSION}-1_amd64.deb foundationdb-server_${FDB_VERSION}-1_amd64.deb
  make integration

(the server package also starts a system-wide fdbserver; this script starts its own
throwaway one anyway), or run a cluster in Docker and install only the clients package
(for libfdb_c and fdb_c.h):

  docker compose up -d        # FoundationDB ${FDB_VERSION} on 127.0.0.1:4500, configured
  echo 'docker:docker@127.0.0.1:4500' > /tmp/fdb.cluster
  cd fdbkv && FDB_CLUSTER_FILE=/tmp/fdb.cluster FDBKV_REQUIRE_CLUSTER=1 go test -count=1 ./...
MSG
  exit 0
fi

header_found=false
for d in /usr/include /usr/local/include; do
  [ -f "$d/foundationdb/fdb_c.h" ] && header_found=true
done
if ! $header_found && [ -z "${CGO_CFLAGS:-}" ]; then
  echo "integration: fdbserver is installed but FoundationDB's C header (foundationdb/fdb_c.h) is not;" >&2
  echo "integration: install the foundationdb-clients package (or set CGO_CFLAGS/CGO_LDFLAGS to it)." >&2
  exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/fdbkv-integration.XXXXXX")
server_pid=""
cleanup() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A free loopback port (checked by trying to connect; fdbserver failing to
# bind is caught below anyway).
port=""
for _ in $(seq 1 50); do
  p=$(( (RANDOM * 32768 + RANDOM) % 30000 + 20000 ))
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then port=$p; break; fi
done
[ -n "$port" ] || { echo "integration: found no free port on 127.0.0.1" >&2; exit 1; }

cluster_file="$tmp/fdb.cluster"
cluster_id=$(head -c 8 /dev/urandom | od -An -tx1 | tr -d ' \n')
echo "fdbkv_it:${cluster_id}@127.0.0.1:${port}" > "$cluster_file"
mkdir -p "$tmp/data" "$tmp/logs"

echo "integration: starting fdbserver on 127.0.0.1:$port (data in $tmp)"
fdbserver --public-address "127.0.0.1:$port" --listen-address "127.0.0.1:$port" \
  --cluster-file "$cluster_file" --datadir "$tmp/data" --logdir "$tmp/logs" \
  --knob_disable_posix_kernel_aio=1 >"$tmp/fdbserver.out" 2>&1 &
server_pid=$!

server_alive() {
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "integration: fdbserver exited:" >&2
    tail -n 20 "$tmp/fdbserver.out" >&2 || true
    exit 1
  fi
}

configured=false
for _ in $(seq 1 30); do
  server_alive
  out=$(fdbcli -C "$cluster_file" --timeout 10 --exec "configure new single memory" 2>&1 || true)
  if grep -q -e "Database created" -e "already exists" <<<"$out"; then configured=true; break; fi
  sleep 1
done
$configured || { echo "integration: could not configure the database; last fdbcli output:" >&2; echo "$out" >&2; exit 1; }

available=false
for _ in $(seq 1 60); do
  server_alive
  status=$(fdbcli -C "$cluster_file" --timeout 5 --exec "status minimal" 2>/dev/null || true)
  if grep -q "The database is available" <<<"$status"; then
    available=true; break
  fi
  sleep 1
done
$available || { echo "integration: the database did not become available within 60s" >&2; fdbcli -C "$cluster_file" --timeout 5 --exec status >&2 || true; exit 1; }
echo "integration: cluster available ($cluster_file)"

export FDB_CLUSTER_FILE="$cluster_file"
export FDBKV_REQUIRE_CLUSTER=1 # a cluster that cannot be reached fails the tests instead of skipping them
export CGO_ENABLED=1

echo "integration: go test ./... in fdbkv against the cluster"
(cd "$root/fdbkv" && go test -count=1 ./...)

# The example programs on FoundationDB (the root module's examples/ run on
# the embedded engine only; fdbkv/cmd/examples runs their logic here).
if [ -f "$root/fdbkv/cmd/examples/main.go" ]; then
  limit=() # bound each example's time where coreutils' timeout exists (not on stock macOS)
  if command -v timeout >/dev/null; then limit=(timeout 300); fi
  for ex in "workqueue -items 500" "scheduler" "jobs -jobs 300"; do
    echo "integration: go run ./cmd/examples $ex -cluster-file $cluster_file"
    # shellcheck disable=SC2086 # $ex is the example name and its flags
    (cd "$root/fdbkv" && ${limit[@]+"${limit[@]}"} go run ./cmd/examples $ex -cluster-file "$cluster_file")
  done
else
  echo "integration: fdbkv/cmd/examples not found; examples skipped"
fi

# A short soak: the simulation's seeds, checked for linearizability and
# item conservation, on the cluster (no injected faults there).
echo "integration: short soak on the cluster: go run -tags fdb ./cmd/soak -cluster-file $cluster_file ${SOAK_FLAGS:=-seeds 4 -duration 1m}"
# shellcheck disable=SC2086 # SOAK_FLAGS are flags
(cd "$root/tools" && go run -tags fdb ./cmd/soak -cluster-file "$cluster_file" $SOAK_FLAGS -html "$tmp/soak-failure.html" -history "$tmp/soak-failure.txt")

echo "integration: ok"
