#!/usr/bin/env bash
# HTTP/2 against HTTP/1.1 on one server (the real engine on stories260K),
# with h2load (Debian nghttp2-client) driving both: --h1 for HTTP/1.1, h2c
# prior knowledge for HTTP/2. Each round runs, back to back:
#   h1      CONNS connections, one request at a time each (HTTP/1.1 keep-alive)
#   h2      CONNS connections, one stream at a time each (the same shape over h2)
#   h2-mux  one connection, CONNS streams at once (h2's multiplexing)
# for a complete answer (stream=false) and a streamed one (stream=true). Every
# request generates exactly MAX_TOKENS tokens (end of sequence banned), so
# served tokens/s = requests/s x MAX_TOKENS. Prints the median over ROUNDS
# of requests/s and tokens/s per case, and h2 / h1 as the median of the
# rounds' paired ratios (each pair ran back to back: less exposed to load swings).
#
#   cmake --build build --target zerolayer
#   bench/h2_compare.sh [ROUNDS=5] [REQUESTS=400] [CONNS=8] [MAX_TOKENS=32]
set -euo pipefail
rounds=${1:-5}
n=${2:-400}
conns=${3:-8}
max_tokens=${4:-32}
dir=$(cd "$(dirname "$0")/.." && pwd)
model=${ZL_MODEL:-$dir/../shared/models/stories260K.gguf}
command -v h2load >/dev/null || { echo "h2load is not installed (nghttp2-client)"; exit 1; }
[ -f "$model" ] || { echo "model $model is absent"; exit 1; }
out=$(mktemp -d)
"$dir/build/zerolayer" serve --model "$model" --port 0 --ctx 512 --parallel "$conns" --threads 1 \
  --request-log false >"$out/stdout" 2>"$out/stderr" &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$out"' EXIT
url=""
for _ in $(seq 100); do
  url=$(grep -o 'http://127.0.0.1:[0-9]*' "$out/stdout" | head -1 || true)
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { cat "$out/stderr"; exit 1; }
for stream in false true; do
  printf '{"model":"m","max_tokens":%d,"temperature":0,"stream":%s,"logit_bias":{"2":-100},"messages":[{"role":"user","content":"Tell me a story"}]}' \
    "$max_tokens" "$stream" >"$out/body_$stream.json"
done
run() {  # case stream -> requests/s
  local args=()
  case $1 in
    h1) args=(--h1 -c "$conns" -m 1) ;;
    h2) args=(-c "$conns" -m 1) ;;
    h2-mux) args=(-c 1 -m "$conns") ;;
  esac
  h2load "${args[@]}" -n "$n" -d "$out/body_$2.json" -H 'content-type: application/json' \
    "$url/v1/chat/completions" 2>&1 | tee "$out/last" | awk '/^finished in/ { gsub(/,/, "", $4); print $4 }'
  grep -q "$n succeeded" "$out/last" || { echo "h2load failed:" >&2; cat "$out/last" >&2; exit 1; }
}
# Warm-up (the engine's first requests, the page cache).
run h1 false >/dev/null
for ((i = 0; i < rounds; i++)); do
  for stream in false true; do
    for c in h1 h2 h2-mux; do
      echo "$i $stream $c $(run $c $stream)" >>"$out/rows"
    done
  done
done
python3 - "$out/rows" "$max_tokens" "$rounds" "$n" "$conns" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
max_tokens, rounds, n, conns = (int(x) for x in sys.argv[2:6])
rps = {}
for r, stream, case, v in rows:
    rps.setdefault((stream, case), {})[int(r)] = float(v)
print(f"h2load, stories260K, {n} requests per run, {conns} at once, {max_tokens} tokens each; median of {rounds} rounds")
print("| stream | protocol | requests/s | tokens/s | vs h1 (paired median) |")
print("|---|---|---|---|---|")
for stream in ("false", "true"):
    h1 = rps[(stream, "h1")]
    for case in ("h1", "h2", "h2-mux"):
        v = rps[(stream, case)]
        med = statistics.median(v.values())
        ratio = statistics.median(v[r] / h1[r] for r in v)
        print(f"| {stream} | {case} | {med:.1f} | {med * max_tokens:.0f} | {ratio:.3f} |")
PY
