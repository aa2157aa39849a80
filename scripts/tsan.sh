#!/usr/bin/env bash
# ThreadSanitizer pass: builds the threaded suites with -DZL_SANITIZE=thread
# into ./build-tsan (RelWithDebInfo: optimized, with line numbers in reports)
# and runs them; any data race fails the run (halt_on_error).
#   scripts/tsan.sh [--soak SECONDS]   also run the soak test (tests/soak) for
#                                      SECONDS against the TSan-built server
# Suites: the engine (on the real tiny models; SKIPPED without ../shared), the
# scheduler and KV cache, the thread pool, the HTTP server and API service
# (offload_test: handlers run off the I/O thread),
# and the TSan-built `zerolayer serve` on stories260K (server_real_test; a
# race kills the server, halt_on_error, and fails the test).
# Not in CI's default run (too long for 2 cores: see the cost below);
# `scripts/test.sh --tsan` adds it.
# Cost (2-core machine): a cold build (no ccache) of the unit suites takes
# 760 CPU seconds (about 6.5 min of wall time on 2 idle cores); the suites use
# about 40 CPU seconds (engine_test, real models under TSan, 27 of them).
set -euo pipefail
cd "$(dirname "$0")/.."
soak=0
if [ "${1:-}" = "--soak" ]; then soak="${2:?usage: scripts/tsan.sh [--soak SECONDS]}"; fi
jobs=$(nproc 2>/dev/null || echo 2)
suites=(core_test kv_cache_test scheduler_test engine_test server_api_test server_tools_test offload_test server_real_test)
targets=("${suites[@]}")
if [ "$soak" != 0 ]; then targets+=(zerolayer soak_test); fi
cmake -S . -B build-tsan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZL_SANITIZE=thread >/dev/null
cmake --build build-tsan -j"$jobs" --target "${targets[@]}"
# No suppressions: every report so far was a real bug (fixed).
export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}"
for t in "${suites[@]}"; do
  echo "== tsan: $t"
  ./build-tsan/"$t" --gtest_brief=1
done
if [ "$soak" != 0 ]; then
  echo "== tsan: soak for $soak s"
  ZL_SOAK_SECONDS="$soak" ./build-tsan/soak_test
fi
