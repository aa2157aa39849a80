#!/usr/bin/env bash
# Served tokens/s with metrics recording on (build/) against a -DZL_OBS=OFF
# build (build-obs-off/), alternated in the same run so that the machine's
# other load hits both alike. Prints, per concurrency level, the median over
# rounds of serve_bench's served tok/s and served/engine ratio for each build.
#
#   cmake -S . -B build-obs-off -DCMAKE_BUILD_TYPE=Release -DZL_OBS=OFF -DZL_BUILD_TESTS=OFF
#   cmake --build build-obs-off --target serve_bench; cmake --build build --target serve_bench
#   bench/obs_compare.sh [ROUNDS] [serve_bench flags...]
set -euo pipefail
rounds=${1:-10}
shift || true
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(--model ../shared/models/stories260K.gguf --streams 8,64 --max-tokens 128,64 --reps 3)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
for ((i = 0; i < rounds; i++)); do
  for b in on off; do
    dir=build; [ "$b" = off ] && dir=build-obs-off
    # Table rows: | streams | max_tokens | engine | served | ratio | ...
    "$dir/serve_bench" "${args[@]}" 2>/dev/null | awk -F'|' -v b="$b" '$2 ~ /^ *[0-9]+ *$/ {
      gsub(/ |%/, "", $2); gsub(/ /, "", $5); gsub(/ |%/, "", $6); print b, $2, $5, $6 }' >>"$out/rows"
  done
done
# ON/OFF paired: the median over rounds of (ON / OFF) of the two runs of a
# round, which ran back to back (less exposed to load swings than the ratio
# of the medians).
python3 - "$out/rows" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
levels = sorted({int(r[1]) for r in rows})
print("| streams | served tok/s ON | served tok/s OFF | ON/OFF paired | served/engine ON | served/engine OFF |")
print("|---|---|---|---|---|---|")
for lv in levels:
    sel = lambda b, k: [float(r[k]) for r in rows if r[0] == b and int(r[1]) == lv]
    on, off = sel("on", 2), sel("off", 2)
    paired = statistics.median(a / b for a, b in zip(on, off))
    print(f"| {lv} | {statistics.median(on):.0f} | {statistics.median(off):.0f} | {100 * paired:.1f}% | "
          f"{statistics.median(sel('on', 3)):.1f}% | {statistics.median(sel('off', 3)):.1f}% |")
PY
