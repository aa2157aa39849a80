#!/usr/bin/env bash
# Installs the Debian packages that tools/train-default-model needs (on top of
# scripts/setup.sh, which brings the C++ toolchain and wamerican). Run as root
# on Debian bookworm. Idempotent; quiet when everything is present. CI does not
# retrain, so this is not part of scripts/setup.sh.
set -euo pipefail

PACKAGES=(
  python3 python3-torch python3-numpy python3-sentencepiece
  libopenblas0-pthread  # without it torch falls back to reference BLAS (~3x slower)
  fortunes fortunes-min fortune-anarchism  # corpus: fortune cookies
  sword-text-web libsword-utils            # corpus: World English Bible, read with mod2imp
  wamerican                                # English filter and the dictionary-word check
  cmake g++ libboost-json1.81-dev          # zl_pack_gguf and zerolayer
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
