#!/usr/bin/env bash
# Runs the official SDKs (@anthropic-ai/sdk, openai; sdk_test.mjs) against
# `BIN serve` on a free port: without --real, BIN must be the test-only
# server (build/zerolayer_test_server) and serves its fake engine
# (--fake-engine); with --real MODEL, BIN (the product, build/zerolayer)
# serves the real engine on that model (a 512-token window).
# With --tls, the server speaks TLS only (--tls-cert/--tls-key: a test CA and
# a certificate made here with openssl) and the SDKs reach it at https://,
# trusting the test CA through NODE_EXTRA_CA_CERTS.
# Usage: run.sh path/to/zerolayer_test_server [--tls]
#        run.sh path/to/zerolayer --real path/to/stories260K.gguf
# Exit 77 (CTest: skipped) when node, tests/sdk/node_modules or the model is missing.
set -euo pipefail
BIN=${1:?usage: run.sh path/to/zerolayer_test_server | run.sh path/to/zerolayer --real MODEL}
MODEL=""
TLS=0
if [ "${2:-}" = "--tls" ]; then
  TLS=1
  if ! command -v openssl >/dev/null; then
    echo "SKIPPED: openssl is not installed"
    exit 77
  fi
fi
if [ "${2:-}" = "--real" ]; then
  MODEL=${3:?--real needs a model path}
  if [ ! -f "$MODEL" ]; then
    echo "SKIPPED: $MODEL is absent (needs ../shared)"
    exit 77
  fi
fi
DIR=$(cd "$(dirname "$0")" && pwd)
source "$DIR/../support/serve_bg.sh"
if ! command -v node >/dev/null; then
  echo "SKIPPED: node is not installed"
  exit 77
fi
if [ ! -d "$DIR/node_modules/@anthropic-ai/sdk" ] || [ ! -d "$DIR/node_modules/openai" ]; then
  echo "SKIPPED: $DIR/node_modules is missing (scripts/setup.sh runs npm ci there)"
  exit 77
fi
OUT=$(mktemp -d)
if [ -n "$MODEL" ]; then
  N_CTX=512
  ENGINE=(--model "$MODEL" --ctx "$N_CTX" --threads 1 --parallel 16)
else
  N_CTX=4096
  ENGINE=(--fake-engine --fake-ctx "$N_CTX")
fi
TLS_ARGS=()
if [ "$TLS" = 1 ]; then
  EC=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  openssl req -x509 "${EC[@]}" -keyout "$OUT/ca.key" -out "$OUT/ca.pem" -days 2 -subj /CN=zerolayer-test-ca 2>/dev/null
  openssl req "${EC[@]}" -keyout "$OUT/key.pem" -out "$OUT/leaf.csr" -subj /CN=localhost 2>/dev/null
  printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >"$OUT/ext.cnf"
  openssl x509 -req -in "$OUT/leaf.csr" -CA "$OUT/ca.pem" -CAkey "$OUT/ca.key" -CAcreateserial \
    -CAserial "$OUT/ca.srl" -out "$OUT/leaf.pem" -days 2 -extfile "$OUT/ext.cnf" 2>/dev/null
  cat "$OUT/leaf.pem" "$OUT/ca.pem" >"$OUT/cert.pem"
  TLS_ARGS=(--tls-cert "$OUT/cert.pem" --tls-key "$OUT/key.pem")
  export NODE_EXTRA_CA_CERTS="$OUT/ca.pem"
fi
# A 50 ms keep-alive interval: streams that wait for their first token
# (a long prefill; [[fake:prefill=MS]]) carry pings, which the SDKs must skip.
start_server "$OUT" "$BIN" serve "${ENGINE[@]}" --port 0 --api-key test-key --max-body-bytes 2000000 \
  --sse-ping-interval 0.05 "${TLS_ARGS[@]}"
ZL_BASE_URL=$SERVER_URL ZL_API_KEY=test-key ZL_N_CTX=$N_CTX ZL_REAL=$([ -n "$MODEL" ] && echo 1 || echo 0) node --test --test-reporter=spec "$DIR/sdk_test.mjs"
