# Sourced by the end-to-end scripts (tests/sdk/run.sh, tests/web/run.sh):
# start_server DIR CMD... runs CMD (a `serve --port 0 …` command line) in the
# background with its stdout/stderr in DIR, sets SERVER_PID and SERVER_URL
# (http://127.0.0.1:PORT, read from its startup line, within 10 s), and
# installs an EXIT trap that stops it and removes DIR. On failure it prints
# the server's stderr and exits 1.
start_server() {
  local dir=$1
  shift
  "$@" >"$dir/stdout" 2>"$dir/stderr" &
  SERVER_PID=$!
  SERVER_DIR=$dir
  trap 'kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; rm -rf "$SERVER_DIR"' EXIT
  SERVER_URL=""
  for _ in $(seq 100); do
    SERVER_URL=$(grep -o 'http://127.0.0.1:[0-9]*' "$dir/stdout" | head -1 || true)
    [ -n "$SERVER_URL" ] && return 0
    sleep 0.1
  done
  echo "server did not start:"
  cat "$dir/stderr"
  exit 1
}
