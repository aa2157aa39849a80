#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz: clang-14, ASan + UBSan, in
# build-fuzz/, apart from the normal build) and runs each for SECONDS
# (default 60), one after another, from its seed corpus tests/fuzz/<target>/
# (regressions/ included). What a run adds to the corpus stays in
# build-fuzz/corpus/<target>/, never in the tree. Fails when a target
# crashes, leaks, times out on an input or passes the memory limit, and
# prints the reproducer (replay: build-fuzz/<target> <file>; keep it as
# tests/fuzz/<target>/regressions/<name> once fixed).
#   scripts/fuzz.sh [SECONDS] [TARGET...]
# ZL_FUZZ_VOCAB: a vocabulary GGUF for the targets that tokenize (default:
# models/zerolayer-demo.gguf).
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true

# Each target with its -max_len: the input size that covers its format
# (a GGUF header with a few tensors, a request body, a text stream).
declare -A max_len=(
  [fuzz_gguf]=65536
  [fuzz_tokenizer]=4096
  [fuzz_anthropic_request]=16384
  [fuzz_openai_request]=16384
  [fuzz_http]=16384
  [fuzz_stream_shaper]=4096
  [fuzz_chat_template]=4096
  [fuzz_tool_calls]=8192
  [fuzz_guard]=4096
  [fuzz_thinking]=4096
  [fuzz_jinja]=8192
  [fuzz_json_schema]=4096
  [fuzz_gbnf]=4096
)
targets=(fuzz_gguf fuzz_tokenizer fuzz_anthropic_request fuzz_openai_request fuzz_http fuzz_stream_shaper
         fuzz_chat_template fuzz_tool_calls fuzz_guard fuzz_thinking fuzz_jinja fuzz_json_schema fuzz_gbnf)
if [ $# -gt 0 ]; then targets=("$@"); fi
for t in "${targets[@]}"; do
  [ -n "${max_len[$t]:-}" ] || { echo "fuzz: unknown target $t (known: ${!max_len[*]})" >&2; exit 2; }
done

if ! command -v clang++-14 >/dev/null; then
  echo "fuzz: clang++-14 not found (scripts/setup.sh installs clang-14 and libclang-rt-14-dev)" >&2
  exit 1
fi
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
jobs=$(nproc 2>/dev/null || echo 2)
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER=clang++-14 \
  -DZL_FUZZ=ON -DZL_BUILD_TESTS=OFF "${launcher[@]}" >/dev/null
cmake --build build-fuzz -j"$jobs" --target "${targets[@]}"

failed=()
for t in "${targets[@]}"; do
  corpus=build-fuzz/corpus/$t
  artifacts=build-fuzz/artifacts/$t
  log=build-fuzz/$t.log
  mkdir -p "$corpus" "$artifacts"
  rm -f "$artifacts"/*
  seeds=()
  [ -d "tests/fuzz/$t" ] && seeds=("tests/fuzz/$t")
  set +e
  "./build-fuzz/$t" -max_total_time="$seconds" -max_len="${max_len[$t]}" -rss_limit_mb=2048 -timeout=10 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" "$corpus" "${seeds[@]}" >"$log" 2>&1
  rc=$?
  set -e
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
  time_s=$(sed -n 's/^Done [0-9]* runs in \([0-9]*\) second.*/\1/p' "$log")
  rate=$(( ${runs:-0} / (${time_s:-0} > 0 ? ${time_s:-1} : 1) ))
  if [ $rc -eq 0 ]; then
    printf 'fuzz: %-24s ok    %9s runs  %6s exec/s  corpus %s\n' "$t" "${runs:-?}" "$rate" "$(ls "$corpus" | wc -l)"
  else
    echo "fuzz: $t FAILED (exit $rc); last lines of $log:"
    grep -v '^#' "$log" | tail -n 40
    for f in "$artifacts"/*; do
      [ -e "$f" ] && echo "fuzz: reproducer: $f  (replay: ./build-fuzz/$t $f)"
    done
    failed+=("$t")
  fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: failed: ${failed[*]}" >&2
  exit 1
fi
