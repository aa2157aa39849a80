#!/usr/bin/env bash
# Sets up, builds and runs the default test suite (unit + e2e), then the soak
# test (tests/soak, about 2 minutes), then the hostile-input tests (GGUF
# parsing, model loading) and the matmul kernels again under AddressSanitizer
# + UndefinedBehaviorSanitizer, then a short fuzz pass (scripts/fuzz.sh: every
# libFuzzer target for ZL_FUZZ_SECONDS, default 30 s each). This is what CI runs.
# Tests that need ../shared (models, golden data, vocabularies) say SKIPPED when it is absent.
#   --no-sanitize   skip the sanitizer pass
#   --no-soak       skip the soak test
#   --no-fuzz       skip the fuzz pass (also ZL_FUZZ_SECONDS=0)
#   --tsan          also the ThreadSanitizer pass (scripts/tsan.sh; long: not in CI)
set -euo pipefail
cd "$(dirname "$0")/.."
sanitize=1
soak=1
tsan=0
fuzz_seconds=${ZL_FUZZ_SECONDS:-30}
ctest_args=()
for a in "$@"; do
  case "$a" in
    --no-sanitize) sanitize=0 ;;
    --no-soak) soak=0 ;;
    --no-fuzz) fuzz_seconds=0 ;;
    --tsan) tsan=1 ;;
    *) ctest_args+=("$a") ;;
  esac
done
jobs=$(nproc 2>/dev/null || echo 2)
bash scripts/setup.sh
bash scripts/build.sh
(cd build && ctest --output-on-failure -j"$jobs" -LE soak "${ctest_args[@]}")
# The soak test on its own (it loads every core): ZL_SOAK_SECONDS (default 100).
if [ "$soak" = 1 ]; then
  echo "== soak test (tests/soak)"
  (cd build && ctest --output-on-failure -L soak)
fi
if [ "$sanitize" = 1 ]; then
  echo "== sanitizer pass (ASan + UBSan): hostile-input tests and the SIMD kernels"
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DZL_SANITIZE=ON >/dev/null
  cmake --build build-asan -j"$jobs" --target gguf_test model_test matmul_test
  ./build-asan/gguf_test --gtest_brief=1
  ./build-asan/model_test --gtest_brief=1
  ./build-asan/matmul_test --gtest_brief=1
fi
if [ "$fuzz_seconds" != 0 ]; then
  echo "== fuzz pass (libFuzzer, ASan + UBSan): each target for ${fuzz_seconds} s"
  bash scripts/fuzz.sh "$fuzz_seconds"
fi
if [ "$tsan" = 1 ]; then
  bash scripts/tsan.sh
fi
