#!/usr/bin/env bash
# Regenerates tuple/testdata/golden.json with the npm package fdb-tuple, an
# independent JavaScript implementation of the FoundationDB tuple layer.
# Needs Node.js and the npm registry; the Go tests only read the JSON.
set -euo pipefail
cd "$(dirname "$0")"
if [ -f package-lock.json ]; then
  npm ci --no-audit --no-fund --silent
else
  npm install --no-audit --no-fund --silent
fi
node golden.mjs
