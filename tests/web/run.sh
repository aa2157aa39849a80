#!/usr/bin/env bash
# The web playground in a real browser: `BIN serve` on MODEL (stories260K)
# with an API key, then ui_e2e.mjs drives Debian's chromium through
# playwright-core (web/node_modules) against it. Screenshots go to ARTIFACTS.
# Usage: run.sh path/to/zerolayer path/to/stories260K.gguf ARTIFACTS_DIR
# Exit 77 (CTest: skipped) when node, web/node_modules, chromium or the model is missing.
set -euo pipefail
BIN=${1:?usage: run.sh BIN MODEL ARTIFACTS_DIR}
MODEL=${2:?usage: run.sh BIN MODEL ARTIFACTS_DIR}
ARTIFACTS=${3:?usage: run.sh BIN MODEL ARTIFACTS_DIR}
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
ZL_BASE_URL=$SERVER_URL ZL_API_KEY=test-key ZL_CHROMIUM=$CHROMIUM ZL_WEB_DIR=$WEB ZL_ARTIFACTS=$ARTIFACTS \
  node --test --test-reporter=spec --test-concurrency=1 "$DIR/ui_e2e.mjs"
