#!/usr/bin/env bash
# The committed build web/dist (what a build without node embeds) must be
# what web/src builds to now, and the TypeScript must type-check.
# Exit 77 (CTest: skipped) without node or web/node_modules.
set -euo pipefail
source "$(dirname "$0")/lib.sh"
need_web_modules esbuild
OUT=$(mktemp -d)
trap 'rm -rf "$OUT"' EXIT
node "$WEB/build.mjs" --out "$OUT"
if ! diff -r "$OUT" "$WEB/dist" >/dev/null; then
  echo "FAILED: web/dist is not the build of web/src; run: npm --prefix web run build, and commit web/dist"
  diff -rq "$OUT" "$WEB/dist" || true
  exit 1
fi
(cd "$WEB" && node node_modules/typescript/bin/tsc --noEmit -p .)
size=$(cat "$WEB"/dist/* | wc -c)
if [ "$size" -ge 409600 ]; then
  echo "FAILED: the page weighs $size bytes (budget: 400 KB)"
  exit 1
fi
echo "web/dist matches web/src ($size bytes); type check passed"
