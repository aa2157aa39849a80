#!/usr/bin/env bash
# Time to first token of the second turn of a Claude Code-style conversation
# over a cached long prefix, against the first turn's, through `zerolayer serve`.
#
#   bench/prefix_turns.sh MODEL.gguf [PREFIX_WORDS] [KV_TYPE]
#
# Turn 1: a long system prompt (PREFIX_WORDS words, default 3000: ~4k tokens
# with a llama3 vocabulary) and two tools, one user message. Turn 2: the same
# system prompt and tools, the first answer as an assistant message, one more
# user message. Each request is non-streaming with max_tokens 1, so its wall
# time is its time to first token (prefill + one token). Prints both, the
# ratio and the usage of turn 2 (cache_read_input_tokens: the reused prefix).
# Server on 127.0.0.1 (a free port), stopped by pid on exit.
set -euo pipefail
model=${1:?usage: prefix_turns.sh MODEL.gguf [PREFIX_WORDS] [KV_TYPE]}
words=${2:-3000}
kv=${3:-f16}
bin=${ZEROLAYER:-$(dirname "$0")/../build/zerolayer}
tmp=$(mktemp -d)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$bin" serve --model "$model" --host 127.0.0.1 --port "$port" --ctx "${CTX:-8192}" --parallel 1 --kv-type "$kv" \
  --threads "${THREADS:-2}" --request-log false 2>"$tmp/serve.log" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 1 600); do
  curl -sf "http://127.0.0.1:$port/ready" >/dev/null 2>&1 && break
  sleep 0.5
done
python3 - "$words" >"$tmp/system.json" <<'PY'
import json, sys
n = int(sys.argv[1])
vocab = ("file function module change test build error value return class string number list config server "
         "request response token cache memory thread kernel layer model prompt tool result output input").split()
words = [vocab[(i * 7 + i // 13) % len(vocab)] + ("." if i % 17 == 16 else "") for i in range(n)]
print(json.dumps(" ".join(words)))
PY
tools='[{"name":"read_file","description":"Read a file","input_schema":{"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}},{"name":"edit_file","description":"Replace text in a file","input_schema":{"type":"object","properties":{"path":{"type":"string"},"old":{"type":"string"},"new":{"type":"string"}},"required":["path","old","new"]}}]'
body() { echo "{\"model\":\"m\",\"temperature\":0,\"max_tokens\":1,\"system\":$(cat "$tmp/system.json"),\"tools\":$tools,\"messages\":$1}"; }
u1='{"role":"user","content":"Find the failing test and fix it."}'
body "[$u1]" >"$tmp/t1.json"
t1=$(curl -s -o "$tmp/r1.json" -w '%{time_total}' -H 'content-type: application/json' --data-binary @"$tmp/t1.json" "http://127.0.0.1:$port/v1/messages")
a1=$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(json.dumps("".join(b.get("text","") for b in d["content"]) or "ok"))' "$tmp/r1.json")
body "[$u1,{\"role\":\"assistant\",\"content\":$a1},{\"role\":\"user\",\"content\":\"Now run the tests again.\"}]" >"$tmp/t2.json"
t2=$(curl -s -o "$tmp/r2.json" -w '%{time_total}' -H 'content-type: application/json' --data-binary @"$tmp/t2.json" "http://127.0.0.1:$port/v1/messages")
python3 - "$t1" "$t2" "$tmp/r1.json" "$tmp/r2.json" "$kv" <<'PY'
import json, sys
t1, t2 = float(sys.argv[1]), float(sys.argv[2])
u1, u2 = json.load(open(sys.argv[3]))["usage"], json.load(open(sys.argv[4]))["usage"]
print(json.dumps({"kv_type": sys.argv[5], "turn1_ttft_s": round(t1, 3), "turn2_ttft_s": round(t2, 3),
                  "ratio": round(t2 / t1, 4), "turn1_usage": u1, "turn2_usage": u2}))
PY
