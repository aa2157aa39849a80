#!/usr/bin/env bash
# Installs every Debian package zerolayer's build and tests need.
# Run as root on Debian bookworm. Idempotent; quiet when everything is present.
set -euo pipefail

PACKAGES=(
  build-essential cmake g++ pkg-config git ca-certificates
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  libboost1.81-dev libboost-json1.81-dev
  libtomlplusplus-dev libcli11-dev
  clang-14 libclang-rt-14-dev
  wamerican
  prometheus  # promtool: the /metrics tests run `promtool check metrics` when present
  libssl-dev  # SHA-256 of API keys (limits/), TLS
  libhiredis-dev redis-server  # shared quota buckets (--redis); the tests start a redis-server
  libicu-dev  # the guard's Unicode normalisation (NFKC, case folding)
  libnghttp2-dev  # HTTP/2 (h2c and h2 over TLS) on the server's port
  nghttp2-client  # h2load: the HTTP/2 load tests and benchmark
  nginx-light  # deploy/: the loopback fleet tests put nginx in front of replicas
  python3-yaml  # deploy/: the tests parse every Kubernetes manifest
  chromium  # the web playground's end-to-end tests (Playwright drives it)
)

# Node.js runs the official SDK clients in the end-to-end tests; Debian's
# packages only when the machine has no node of its own.
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  PACKAGES+=(nodejs npm)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# npm packages from a committed lockfile (`npm ci`), skipped when already
# installed from the same lockfile: DIR (under the repository) and what they serve.
install_npm_dir() {
  local dir what="$2"
  dir="$(cd "$(dirname "$0")/.." && pwd)/$1"
  if ! command -v npm >/dev/null; then
    echo "setup: npm not found; $what will be skipped" >&2
    return 0
  fi
  if [ -f "$dir/node_modules/.package-lock.json" ] && [ "$dir/node_modules/.package-lock.json" -nt "$dir/package-lock.json" ]; then
    return 0
  fi
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >/dev/null) ||
    echo "setup: npm ci in $1 failed; $what will be skipped" >&2
}

# The official SDKs for the end-to-end tests (tests/sdk); esbuild, TypeScript
# and playwright-core for the web playground (web/: its build, unit and browser tests).
install_sdk_tests() {
  install_npm_dir tests/sdk "the SDK end-to-end tests"
  install_npm_dir web "the web playground's build from source (web/dist is embedded instead) and its tests"
}

if [ ${#missing[@]} -eq 0 ]; then
  install_sdk_tests
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing packages: ${missing[*]}; run this script as root" >&2
  exit 1
fi

echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
install_sdk_tests
