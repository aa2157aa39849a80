#!/usr/bin/env bash
# Unit tests of the playground's TypeScript (web/test: the SSE client,
# Markdown, Prometheus parsing) under node's test runner.
# Exit 77 (CTest: skipped) without node or web/node_modules.
set -euo pipefail
WEB=$(cd "$(dirname "$0")/../../web" && pwd)
if ! command -v node >/dev/null; then
  echo "SKIPPED: node is not installed"
  exit 77
fi
if [ ! -d "$WEB/node_modules/esbuild" ]; then
  echo "SKIPPED: $WEB/node_modules is missing (scripts/setup.sh runs npm ci there)"
  exit 77
fi
cd "$WEB"
node --test --test-reporter=spec test/
