#!/usr/bin/env bash
# Installs every Debian package zerolayer's build and tests need.
# Run as root on Debian bookworm. Idempotent; quiet when everything is present.
set -euo pipefail

PACKAGES=(
  build-essential cmake g++ pkg-config git ca-certificates
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  libboost1.81-dev libboost-json1.81-dev
  libpcre2-dev
  wamerican
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
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
