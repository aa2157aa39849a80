#!/usr/bin/env bash
# Runs the official SDKs (@anthropic-ai/sdk, openai; sdk_test.mjs) against
# `zerolayer serve --fake-engine` on a free port. Usage: run.sh path/to/zerolayer
# Exit 77 (CTest: skipped) when node or tests/sdk/node_modules is missing.
set -euo pipefail
BIN=${1:?usage: run.sh path/to/zerolayer}
DIR=$(cd "$(dirname "$0")" && pwd)
if ! command -v node >/dev/null; then
  echo "SKIPPED: node is not installed"
  exit 77
fi
if [ ! -d "$DIR/node_modules/@anthropic-ai/sdk" ] || [ ! -d "$DIR/node_modules/openai" ]; then
  echo "SKIPPED: $DIR/node_modules is missing (scripts/setup.sh runs npm ci there)"
  exit 77
fi
OUT=$(mktemp -d)
"$BIN" serve --fake-engine --port 0 --api-key test-key --max-body-bytes 2000000 --fake-ctx 4096 \
  >"$OUT/stdout" 2>"$OUT/stderr" &
PID=$!
cleanup() {
  kill "$PID" 2>/dev/null || true
  wait "$PID" 2>/dev/null || true
  rm -rf "$OUT"
}
trap cleanup EXIT
URL=""
for _ in $(seq 100); do
  URL=$(grep -o 'http://127.0.0.1:[0-9]*' "$OUT/stdout" | head -1 || true)
  [ -n "$URL" ] && break
  sleep 0.1
done
if [ -z "$URL" ]; then
  echo "server did not start:"
  cat "$OUT/stderr"
  exit 1
fi
ZL_BASE_URL=$URL ZL_API_KEY=test-key node --test --test-reporter=spec "$DIR/sdk_test.mjs"
