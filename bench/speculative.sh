#!/usr/bin/env bash
# Speculative decoding (n-gram drafts) against plain decoding, in one run, with `zerolayer generate
# --json` (decode_tokens_per_s from the engine's own timings: the model load is not counted).
#
#   bench/speculative.sh MODEL.gguf [N_TOKENS] [REPS]
#
# Cases, each run REPS times (default 5) alternating plain / speculative, medians reported:
#   repeating   greedy after a prompt of one token repeated 64 times: the random-weight 1B-shape
#               model then falls into loops of one or a few tokens (copying, as code edits copy
#               their input): drafts hit;
#   plain-text  greedy after "The quick brown fox": this model's output does not repeat (a few
#               short n-gram matches, drafts that miss): the cost when nothing repeats;
#   misses      greedy after a phrase of 5 tokens repeated 12 times, --spec-ngram-min 1: the prompt
#               and the output share single tokens, the output does not repeat the phrase: drafts
#               proposed that mostly miss (the adaptive back-off's cost);
#   sampled     temperature 1.5, top-k 0, seed 7, --spec-ngram-min 1: sampled output that does not
#               repeat (with this model's flat distributions: no draft at all); seeded, so the ids
#               must match too.
# The ids of the two runs of a case must be identical (greedy, and seeded sampling: speculation
# consumes the sampler's RNG as plain decoding does); a difference stops the script.
# THREADS (default 2) compute threads; CASES: a comma-separated subset (default all);
# ZEROLAYER: the binary (default build/zerolayer).
# DRAFT_MODEL=FILE.gguf (or DRAFT=): the speculative runs draft with that model (`--speculative draft
# --draft-model FILE`) instead of n-grams; DRAFT_P_MIN: its --draft-p-min (default the binary's).
set -euo pipefail
model=${1:?usage: speculative.sh MODEL.gguf [N_TOKENS] [REPS]}
n=${2:-200}
reps=${3:-5}
bin=${ZEROLAYER:-$(dirname "$0")/../build/zerolayer}
python3 - "$bin" "$model" "$n" "$reps" "${THREADS:-2}" "${CASES:-}" "${DRAFT_MODEL:-${DRAFT:-}}" "${DRAFT_P_MIN:-}" <<'PY'
import json, statistics, subprocess, sys
binary, model, n, reps, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
wanted = [c for c in sys.argv[6].split(",") if c]
draft_model, draft_p_min = sys.argv[7], sys.argv[8]
spec_args = ["--speculative", "ngram"]
if draft_model:
    spec_args = ["--speculative", "draft", "--draft-model", draft_model]
    if draft_p_min:
        spec_args += ["--draft-p-min", draft_p_min]
text = ["--prompt", "The quick brown fox"]
cases = {
    "repeating": ["--prompt-ids", ",".join(["1"] * 64), "--temperature", "0"],
    "plain-text": text + ["--temperature", "0"],
    "misses": ["--prompt-ids", ",".join(["1"] + ["1000", "2000", "3000", "4000", "5000"] * 12), "--temperature", "0",
               "--spec-ngram-min", "1"],
    "sampled": text + ["--temperature", "1.5", "--top-k", "0", "--top-p", "1", "--seed", "7", "--spec-ngram-min", "1"],
}
def run(extra, spec):
    args = [binary, "generate", "--model", model, "-n", n, "--threads", threads,
            "--ignore-eos", "--json"] + extra + (spec_args if spec else [])
    out = subprocess.run(args, check=True, capture_output=True, text=True).stdout
    return json.loads(out)
print(f"model {model}, {n} tokens, {threads} threads, {reps} reps (medians; the machine may be shared); "
      f"drafts: {'draft model ' + draft_model if draft_model else 'n-grams'}")
for name, extra in cases.items():
    if wanted and name not in wanted:
        continue
    plain, spec, ratios = [], [], []
    last = None
    for _ in range(reps):
        a = run(extra, False)
        b = run(extra, True)
        if a["generated_ids"] != b["generated_ids"]:
            sys.exit(f"{name}: the ids differ with speculation\n{a['generated_ids']}\n{b['generated_ids']}")
        plain.append(a["decode_tokens_per_s"])
        spec.append(b["decode_tokens_per_s"])
        ratios.append(b["decode_tokens_per_s"] / a["decode_tokens_per_s"])
        last = b
    acc = last["spec_accepted_tokens"] / max(1, last["spec_draft_tokens"])
    per_pass = last["spec_accepted_tokens"] / max(1, last["spec_passes"])
    print(f"{name:11s} plain {statistics.median(plain):7.2f} tok/s  speculative {statistics.median(spec):7.2f} tok/s  "
          f"ratio median {statistics.median(ratios):.3f} (min {min(ratios):.3f}, max {max(ratios):.3f})  "
          f"drafts {last['spec_draft_tokens']} accepted {last['spec_accepted_tokens']} ({acc:.0%}) "
          f"passes {last['spec_passes']} ({per_pass:.2f} accepted/pass)  ids identical")
PY
