# Sourced by the end-to-end scripts (tests/sdk/run.sh, tests/web/run.sh):
# start_server DIR CMD... runs CMD (a `serve --port 0 …` command line) in the
# background with its stdout/stderr in DIR, sets SERVER_PID and SERVER_URL
# (http[s]://127.0.0.1:PORT, read from its startup line, within 10 s); an EXIT
# trap stops every server started so and removes their DIRs. On failure it
# prints the server's stderr and exits 1.
SERVER_PIDS=()
SERVER_DIRS=()
stop_servers() {
  local p
  for p in "${SERVER_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${SERVER_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "${SERVER_DIRS[@]}"
}
trap stop_servers EXIT
start_server() {
  local dir=$1
  shift
  "$@" >"$dir/stdout" 2>"$dir/stderr" &
  SERVER_PID=$!
  SERVER_PIDS+=("$SERVER_PID")
  SERVER_DIRS+=("$dir")
  SERVER_URL=""
  for _ in $(seq 100); do
    SERVER_URL=$(grep -Eo 'https?://127.0.0.1:[0-9]*' "$dir/stdout" | head -1 || true)
    [ -n "$SERVER_URL" ] && return 0
    sleep 0.1
  done
  echo "server did not start:"
  cat "$dir/stderr"
  exit 1
}
