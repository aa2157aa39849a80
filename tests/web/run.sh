#!/usr/bin/env bash
# The web playground in a real browser: `BIN serve` on MODEL (stories260K)
# with an API key, then ui_e2e.mjs drives Debian's chromium through
# playwright-core (web/node_modules) against it; with TEST_SERVER (the
# test-only build/zerolayer_test_server) also serving its fake engine, the
# tool round trip runs against that one too. Screenshots go to ARTIFACTS.
# Usage: run.sh path/to/zerolayer path/to/stories260K.gguf ARTIFACTS_DIR [TEST_SERVER]
# Exit 77 (CTest: skipped) when node, web/node_modules, chromium or the model is missing.
set -euo pipefail
BIN=${1:?usage: run.sh BIN MODEL ARTIFACTS_DIR}
MODEL=${2:?usage: run.sh BIN MODEL ARTIFACTS_DIR}
ARTIFACTS=${3:?usage: run.sh BIN MODEL ARTIFACTS_DIR}
TEST_SERVER=${4:-}
DIR=$(cd "$(dirname "$0")" && pwd)
source "$DIR/lib.sh"
source "$DIR/../support/serve_bg.sh"
CHROMIUM=${ZL_CHROMIUM:-$(command -v chromium || true)}
if [ ! -f "$MODEL" ]; then
  echo "SKIPPED: $MODEL is absent (needs ../shared)"
  exit 77
fi
need_web_modules playwright-core
if [ -z "$CHROMIUM" ] || [ ! -x "$CHROMIUM" ]; then
  echo "SKIPPED: chromium is not installed (Debian package chromium; scripts/setup.sh)"
  exit 77
fi
mkdir -p "$ARTIFACTS"
# A 4096-token window: a long answer (thousands of tokens, about a second or
# more) gives the stop button something to cancel.
start_server "$(mktemp -d)" "$BIN" serve --model "$MODEL" --ctx 4096 --threads 1 --parallel 2 --port 0 --api-key test-key
REAL_URL=$SERVER_URL
FAKE_URL=""
if [ -n "$TEST_SERVER" ]; then
  start_server "$(mktemp -d)" "$TEST_SERVER" serve --fake-engine --port 0 --api-key test-key
  FAKE_URL=$SERVER_URL
fi
ZL_BASE_URL=$REAL_URL ZL_FAKE_URL=$FAKE_URL ZL_API_KEY=test-key ZL_CHROMIUM=$CHROMIUM ZL_WEB_DIR=$WEB \
  ZL_ARTIFACTS=$ARTIFACTS node --test --test-reporter=spec "$DIR/ui_e2e.mjs"
