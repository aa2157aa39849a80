#!/usr/bin/env bash
# Unit tests of the playground's TypeScript (web/test: the SSE client,
# Markdown, Prometheus parsing) under node's test runner.
# Exit 77 (CTest: skipped) without node or web/node_modules.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_web_modules esbuild
cd "$WEB"
node --test --test-reporter=spec test/
