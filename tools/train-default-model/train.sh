#!/usr/bin/env bash
# Trains zerolayer's built-in demo model from scratch and writes it as GGUF.
#
#   bash tools/train-default-model/train.sh [--out models/zerolayer-demo.gguf]
#        [--work build-train/default-model] [--steps 1400] [--quick]
#
# Steps: packages -> build zl_pack_gguf and zerolayer -> corpus -> SentencePiece
# tokenizer -> torch training -> GGUF export -> logit check against zerolayer ->
# samples and the dictionary-word check. Fails if any step fails. --quick runs
# 30 steps (a smoke test of the whole pipeline, a few minutes) and does not
# enforce the dictionary-word bar. Long steps run under `nice -n 19` with one
# torch thread: the machine is shared with compilers.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="$root/models/zerolayer-demo.gguf"
work="$root/build-train/default-model"
steps=1400
min_dict=0.8
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$(realpath -m "$2")"; shift 2 ;;
    --work) work="$(realpath -m "$2")"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --quick) steps=30; min_dict=0; shift ;;
    *) echo "usage: $0 [--out FILE.gguf] [--work DIR] [--steps N] [--quick]" >&2; exit 2 ;;
  esac
done
py=/usr/bin/python3  # Debian's interpreter: the one with python3-torch
step() { echo "== $* ($(date -u +%H:%M:%S))"; }
start=$(date +%s)

step "packages"
bash "$here/setup.sh"

mkdir -p "$work"
step "build zl_pack_gguf and zerolayer (log: $work/build.log)"
build="$root/build-train"
if ! { cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release &&
       nice -n 19 cmake --build "$build" -j1 --target zl_pack_gguf zerolayer; } >"$work/build.log" 2>&1; then
  tail -n 30 "$work/build.log" >&2
  exit 1
fi
pack="$build/tools/train-default-model/zl_pack_gguf"
zerolayer="$build/zerolayer"

corpus="$work/corpus"
step "corpus"
$py "$here/prepare_corpus.py" --out-dir "$corpus" | tee "$work/corpus.json"

step "tokenizer"
nice -n 19 $py "$here/train_tokenizer.py" --corpus-dir "$corpus"

step "train ($steps steps)"
nice -n 19 $py "$here/train.py" --corpus-dir "$corpus" --work-dir "$work" --steps "$steps" | tee "$work/train.log"

step "export"
$py "$here/export.py" --corpus-dir "$corpus" --work-dir "$work"
mkdir -p "$(dirname "$out")"
"$pack" "$work/gguf/manifest.json" "$out"
ls -l "$out"

step "logit check: zerolayer vs torch"
nice -n 19 $py "$here/check_logits.py" --corpus-dir "$corpus" --work-dir "$work" --model "$out" --zerolayer "$zerolayer"

step "samples and dictionary words"
nice -n 19 $py "$here/evaluate.py" --corpus-dir "$corpus" --work-dir "$work" --min-dict "$min_dict"

step "done in $(( ($(date +%s) - start) / 60 )) min: $out"
