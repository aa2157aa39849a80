#!/usr/bin/env bash
# Per-type speed on the Llama-3.2-1B shape (issue 22's targets): for each type,
# `zerolayer make-model --shape llama3.2-1b --type T` into a temporary file,
# `zerolayer bench --threads THREADS --reps REPS --json` on it, one table row.
#
#   bench/types_1b.sh [TYPE...]      (default: Q5_K_M Q4_K_S Q3_K_M Q2_K IQ4_XS Q5_0 Q4_1)
#
# Environment: ZEROLAYER (default build/zerolayer), THREADS (2), REPS (2: every
# figure, decode included, is the best of REPS runs), VOCAB (default
# ../shared/vocab/ggml-vocab-llama-bpe.gguf), MODEL_DIR (/tmp), KEEP=1 keeps
# the model files (reused by a later run: make-model of a K-quant mix takes
# minutes), KERNELS (sets ZL_KERNELS for the bench, e.g. avx2).
# Columns: pp512 and its target (2x llama.cpp b10587's pp512 on the same shape,
# from the issue), tg128 and llama.cpp's tg128, decode_roofline (decode as a
# fraction of the weight bytes / the bandwidth probe of the same run; target
# >= 90%), the probe's bandwidth and the bench's cpu_share (< 1: the machine
# was busy with other work, absolute tokens/s are then low).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
bin=${ZEROLAYER:-$here/../build/zerolayer}
vocab=${VOCAB:-$here/../../shared/vocab/ggml-vocab-llama-bpe.gguf}
threads=${THREADS:-2}
reps=${REPS:-2}
dir=${MODEL_DIR:-/tmp}
types=("$@")
[ ${#types[@]} -eq 0 ] && types=(Q5_K_M Q4_K_S Q3_K_M Q2_K IQ4_XS Q5_0 Q4_1)

# llama.cpp b10587 on this shape, from issue 22: pp512 tg128.
ref() {
  case $1 in
    Q5_K_M) echo "48 26" ;; Q4_K_S) echo "106 35" ;; Q3_K_M) echo "64 31" ;; Q2_K) echo "66 31" ;;
    IQ4_XS) echo "41 26" ;; Q5_0) echo "70 21" ;; Q4_1) echo "37 18" ;; *) echo "0 0" ;;
  esac
}

echo "# $(date -u +%FT%TZ) $(uptime | sed 's/.*load/load/') kernels=${KERNELS:-default} threads=$threads reps=$reps"
echo "| type | pp512 | target | pp512/target | tg128 | llama.cpp tg128 | decode roofline | bandwidth GB/s | cpu_share |"
echo "|---|---|---|---|---|---|---|---|---|"
for t in "${types[@]}"; do
  model=$dir/zl-types-l1b-$t.gguf
  if [ ! -s "$model" ]; then
    "$bin" make-model --shape llama3.2-1b --type "$t" --vocab "$vocab" --out "$model" >/dev/null 2>&1 ||
      { echo "| $t | make-model failed |"; continue; }
  fi
  # ZL_KERNELS only when KERNELS is given (an empty ZL_KERNELS is not "unset").
  json=$( (if [ -n "${KERNELS:-}" ]; then export ZL_KERNELS=$KERNELS; fi
           "$bin" bench --model "$model" --threads "$threads" --reps "$reps" --json 2>/dev/null) | tail -1) || json=""
  [ "${KEEP:-0}" = 1 ] || rm -f "$model"
  if [ -z "$json" ]; then echo "| $t | bench failed |"; continue; fi
  read -r lpp ltg <<<"$(ref "$t")"
  echo "$json" | jq -r --arg t "$t" --argjson lpp "$lpp" --argjson ltg "$ltg" \
    '"| \($t) | \(.pp512 | . * 10 | round / 10) | \(2 * $lpp) | \(if $lpp > 0 then (.pp512 / (2 * $lpp) * 100 | round | tostring) + "%" else "-" end) | \(.tg128 | . * 10 | round / 10) | \($ltg) | \(.decode_roofline * 1000 | round / 10)% | \(.bandwidth_gbs) | \(.cpu_share) |"' ||
    echo "| $t | bench failed |"
done
