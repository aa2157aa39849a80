#!/usr/bin/env bash
# The soak test (tests/soak/soak_test.cc) for longer runs: builds the server
# and the test into ./build, then runs it for SECONDS (default 600).
#   scripts/soak.sh [SECONDS]
# Environment: ZL_SOAK_SEED (repeat a run), ZL_SOAK_CLIENTS (default 16).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-600}"
case "$seconds" in ''|*[!0-9]*) echo "usage: scripts/soak.sh [SECONDS]" >&2; exit 2 ;; esac
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$jobs" --target zerolayer soak_test
ZL_SOAK_SECONDS="$seconds" ./build/soak_test
