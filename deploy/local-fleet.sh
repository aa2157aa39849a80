#!/usr/bin/env bash
# A zerolayer fleet on this machine, loopback only: redis-server (shared
# quota buckets), N replicas named replica-1..N, nginx in front with
# deploy/nginx/zerolayer.conf (affinity, X-Engine-Host pinning, canary split,
# passive health checks).
#
#   deploy/local-fleet.sh up --replicas N --port P --model M [--api-key K] [--keys F]
#                            [--zerolayer BIN] [-- more serve flags...]
#   deploy/local-fleet.sh status
#   deploy/local-fleet.sh kill replica-2 [--signal TERM]   (default KILL: a crash)
#   deploy/local-fleet.sh down
#
# State (pids, logs, generated configs) lives in $ZL_FLEET_DIR, by default
# ${TMPDIR:-/tmp}/zerolayer-fleet-$UID; everything is stopped by the pids
# recorded there, nothing by name. It installs nothing: a missing program
# is reported with the Debian package that provides it. The canary pool of
# the local fleet is the stable one (there is one build); the split is
# still configured (canary.conf) so that the config under test is the real one.
set -euo pipefail

SCRIPT_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
STATE="${ZL_FLEET_DIR:-${TMPDIR:-/tmp}/zerolayer-fleet-$(id -u)}"

die() { echo "local-fleet: $*" >&2; exit 1; }
usage() { sed -n '8,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 2; }

need() {  # need PROGRAM PACKAGE [PATHS...]
  local prog="$1" pkg="$2"; shift 2
  if command -v "$prog" >/dev/null 2>&1; then command -v "$prog"; return; fi
  for p in "$@"; do [[ -x "$p" ]] && { echo "$p"; return; }; done
  die "$prog is not installed: apt-get install $pkg (nothing was started)"
}

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

free_port() {
  local p
  for _ in $(seq 1 200); do
    p=$(( 20000 + RANDOM % 40000 ))
    if port_free "$p"; then echo "$p"; return; fi
  done
  die "no free loopback port found"
}

# redis_ping PORT SECONDS: until the server on PORT answers PING with +PONG.
redis_ping() {
  local deadline=$(( SECONDS + $2 )) reply
  while (( SECONDS < deadline )); do
    if { exec 3<>"/dev/tcp/127.0.0.1/$1"; } 2>/dev/null; then
      printf 'PING\r\n' >&3
      reply=""
      read -r -t 1 reply <&3 || true
      exec 3>&- 3<&-
      [[ "$reply" == +PONG* ]] && return 0
    fi
    sleep 0.05
  done
  return 1
}

# wait_http URL SECONDS: until URL answers 200.
wait_http() {
  local url="$1" deadline=$(( SECONDS + $2 ))
  while (( SECONDS < deadline )); do
    [[ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$url" || true)" == 200 ]] && return 0
    sleep 0.1
  done
  return 1
}

# stop_pids PIDFILE...: TERM to all at once, then KILL what still runs after 5 s.
stop_pids() {
  local f pids=()
  for f in "$@"; do
    [[ -f "$f" ]] || continue
    pids+=("$(cat "$f")")
    rm -f "$f"
  done
  (( ${#pids[@]} )) || return 0
  kill -TERM "${pids[@]}" 2>/dev/null || true
  local p alive
  for _ in $(seq 1 100); do
    alive=0
    for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    (( alive )) || return 0
    sleep 0.05
  done
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
}

cmd_up() {
  local replicas=3 port="" model="" api_key="" keys="" bin=""
  local extra=()
  while (( $# )); do
    case "$1" in
      --replicas) replicas="$2"; shift 2 ;;
      --port) port="$2"; shift 2 ;;
      --model) model="$2"; shift 2 ;;
      --api-key) api_key="$2"; shift 2 ;;
      --keys) keys="$2"; shift 2 ;;
      --zerolayer) bin="$2"; shift 2 ;;
      --) shift; extra=("$@"); break ;;
      *) echo "local-fleet: unknown flag '$1'" >&2; usage ;;
    esac
  done
  [[ -n "$port" && -n "$model" ]] || { echo "local-fleet: --port and --model are required" >&2; usage; }
  [[ "$replicas" =~ ^[0-9]+$ ]] && (( replicas >= 1 && replicas <= 64 )) || die "--replicas must be in [1, 64]"
  [[ "$port" =~ ^[0-9]+$ ]] && (( port >= 1 && port <= 65535 )) || die "--port must be a port number"
  [[ -n "$keys" && ! -r "$keys" ]] && die "cannot read the keys file '$keys'"
  if [[ -z "$bin" ]]; then bin="$(command -v zerolayer || true)"; fi
  [[ -n "$bin" && -x "$bin" ]] || die "no zerolayer binary: pass --zerolayer BIN (e.g. build/zerolayer)"
  local nginx redis
  nginx="$(need nginx nginx-light /usr/sbin/nginx)"
  redis="$(need redis-server redis-server /usr/bin/redis-server)"
  need curl curl >/dev/null
  [[ -f "$STATE/fleet.env" ]] && die "a fleet is already up (state in $STATE): run '$0 down' first"
  port_free "$port" || die "port $port is in use on 127.0.0.1"
  mkdir -p "$STATE/pids" "$STATE/logs" "$STATE/nginx"
  # From here on, a failure takes down what was started.
  # (The logs stay for reading; `down` removes them.)
  trap 'echo "local-fleet: start failed, stopped what was started (logs: $STATE/logs)" >&2; stop_all' ERR

  local redis_port
  redis_port="$(free_port)"
  "$redis" --bind 127.0.0.1 --port "$redis_port" --save "" --appendonly no --dir "$STATE" \
    --logfile "$STATE/logs/redis.log" --daemonize no >/dev/null 2>&1 &
  echo $! > "$STATE/pids/redis.pid"
  # Up before the replicas: one that cannot reach Redis at start counts alone.
  redis_ping "$redis_port" 20 || { echo "local-fleet: redis-server did not answer PING" >&2; false; }

  local serve_flags=(--host 127.0.0.1 --port 0 --model "$model")
  [[ -n "$api_key" ]] && serve_flags+=(--api-key "$api_key")
  [[ -n "$keys" ]] && serve_flags+=(--keys "$keys" --redis "redis://127.0.0.1:$redis_port")
  : > "$STATE/replicas.conf"
  {
    echo 'map $zl_pin_name $zl_pin_addr {'
    echo '    ""       "";'
    echo '    default  unknown;'
  } > "$STATE/pins.conf"
  local i name rport
  for i in $(seq 1 "$replicas"); do
    name="replica-$i"
    "$bin" serve "${serve_flags[@]}" --host-name "$name" "${extra[@]}" \
      > "$STATE/logs/$name.out" 2> "$STATE/logs/$name.log" &
    echo $! > "$STATE/pids/$name.pid"
  done
  for i in $(seq 1 "$replicas"); do
    name="replica-$i"
    rport=""
    for _ in $(seq 1 600); do  # the model loads: up to 60 s
      rport="$(grep -o 'http://127.0.0.1:[0-9]*' "$STATE/logs/$name.out" 2>/dev/null | head -1 | sed 's/.*://' || true)"
      [[ -n "$rport" ]] && break
      kill -0 "$(cat "$STATE/pids/$name.pid")" 2>/dev/null || { tail -5 "$STATE/logs/$name.log" >&2; false; }
      sleep 0.1
    done
    [[ -n "$rport" ]] || { echo "local-fleet: $name did not start" >&2; false; }
    wait_http "http://127.0.0.1:$rport/ready" 60 || { echo "local-fleet: $name is not ready" >&2; false; }
    echo "$name 127.0.0.1:$rport" >> "$STATE/replicas.txt"
    echo "server 127.0.0.1:$rport max_fails=1 fail_timeout=10s;" >> "$STATE/replicas.conf"
    echo "    $name  127.0.0.1:$rport;" >> "$STATE/pins.conf"
  done
  echo '}' >> "$STATE/pins.conf"
  # canary.conf: the same split, the canary pool = the stable replicas.
  sed -n '/^split_clients/,/^}/p' "$SCRIPT_DIR/nginx/canary.conf" > "$STATE/nginx/canary.conf"
  {
    echo 'upstream zerolayer_canary {'
    echo '    hash $zl_affinity_key consistent;'
    sed 's/^/    /' "$STATE/replicas.conf"
    echo '}'
  } >> "$STATE/nginx/canary.conf"
  cp "$STATE/replicas.conf" "$STATE/pins.conf" "$STATE/nginx/"
  sed "s/^\(\s*\)listen 8080;.*/\1listen 127.0.0.1:$port;/" "$SCRIPT_DIR/nginx/zerolayer.conf" > "$STATE/nginx/zerolayer.conf"
  cat > "$STATE/nginx/nginx.conf" <<NGINX
worker_processes 2;
daemon off;
pid $STATE/nginx/nginx.pid;
error_log $STATE/logs/nginx.error.log warn;
events { worker_connections 1024; }
http {
    access_log $STATE/logs/nginx.access.log;
    client_body_temp_path $STATE/nginx/body;
    proxy_temp_path $STATE/nginx/proxy;
    fastcgi_temp_path $STATE/nginx/fastcgi;
    uwsgi_temp_path $STATE/nginx/uwsgi;
    scgi_temp_path $STATE/nginx/scgi;
    include $STATE/nginx/zerolayer.conf;
}
NGINX
  "$nginx" -t -q -p "$STATE/nginx" -c "$STATE/nginx/nginx.conf" -e "$STATE/logs/nginx.error.log" \
    > "$STATE/logs/nginx.out" 2>&1 || { cat "$STATE/logs/nginx.out" >&2; false; }
  "$nginx" -p "$STATE/nginx" -c "$STATE/nginx/nginx.conf" -e "$STATE/logs/nginx.error.log" \
    > "$STATE/logs/nginx.out" 2>&1 &
  echo $! > "$STATE/pids/nginx.pid"
  wait_http "http://127.0.0.1:$port/health" 10 || { echo "local-fleet: nginx does not answer on $port" >&2; false; }
  trap - ERR
  {
    echo "URL=http://127.0.0.1:$port"
    echo "REPLICAS=$replicas"
    echo "REDIS=redis://127.0.0.1:$redis_port"
  } > "$STATE/fleet.env"
  echo "local-fleet: $replicas replicas behind nginx, Redis at redis://127.0.0.1:$redis_port (state: $STATE)"
  echo "http://127.0.0.1:$port"
}

cmd_kill() {
  local name="${1:-}" sig=KILL
  [[ -n "$name" ]] || usage
  shift
  [[ "${1:-}" == "--signal" ]] && sig="${2:-KILL}"
  [[ "$name" =~ ^replica-[0-9]+$ ]] || die "'$name' is not a replica name (replica-1..N)"
  local f="$STATE/pids/$name.pid"
  [[ -f "$f" ]] || die "no running $name in $STATE"
  kill -"$sig" "$(cat "$f")" 2>/dev/null || true
  if [[ "$sig" == KILL ]]; then rm -f "$f"; fi
  echo "local-fleet: sent SIG$sig to $name"
}

cmd_status() {
  [[ -f "$STATE/fleet.env" ]] || die "no fleet is up (state: $STATE)"
  cat "$STATE/fleet.env"
  local f
  for f in "$STATE"/pids/*.pid; do
    [[ -f "$f" ]] || continue
    if kill -0 "$(cat "$f")" 2>/dev/null; then echo "$(basename "$f" .pid) running (pid $(cat "$f"))";
    else echo "$(basename "$f" .pid) stopped"; fi
  done
}

stop_all() {
  stop_pids "$STATE/pids/nginx.pid"  # first: no new request reaches a replica
  stop_pids "$STATE"/pids/replica-*.pid "$STATE/pids/redis.pid"
}

cmd_down() {
  [[ -d "$STATE" ]] || { echo "local-fleet: nothing to stop (no $STATE)"; return 0; }
  stop_all
  rm -rf "$STATE"
  echo "local-fleet: stopped"
}

case "${1:-}" in
  up) shift; cmd_up "$@" ;;
  kill) shift; cmd_kill "$@" ;;
  status) cmd_status ;;
  down) cmd_down ;;
  *) usage ;;
esac
