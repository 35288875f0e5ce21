#!/usr/bin/env bash
# Builds the STUB libfdb_c (fdbkv/internal/fdbcstub: not FoundationDB, every
# call fails) as a static library, fdbkv/internal/fdbcstub/build/libfdb_c.a,
# so that cgo code using FoundationDB's binding compiles and links without
# FoundationDB. Used by fdbkv-check.sh and release-check.sh; link with
#   CGO_CFLAGS="-I$stub/include" CGO_LDFLAGS="-L$stub/build -lfdb_c"
# Needs gcc and ar (binutils, installed with gcc).
set -euo pipefail
cd "$(dirname "$0")/.."
stub="$(pwd)/fdbkv/internal/fdbcstub"
build="$stub/build"
command -v gcc >/dev/null || { echo "fdbc-stub: gcc is required (apt-get install gcc)" >&2; exit 1; }
command -v ar >/dev/null || { echo "fdbc-stub: ar is required (apt-get install binutils)" >&2; exit 1; }
mkdir -p "$build"
gcc -std=c11 -Wall -Wextra -Werror -O2 -fPIC -I"$stub/include" \
  -c "$stub/fdb_c_stub.c" -o "$build/fdb_c_stub.o"
rm -f "$build/libfdb_c.a"
ar rcs "$build/libfdb_c.a" "$build/fdb_c_stub.o"
