#!/usr/bin/env bash
# Sets up, builds and runs zerolayer on the built-in demo model.
# Extra arguments go to `zerolayer generate` (e.g. --prompt "..." -n 100).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
if [ $# -eq 0 ]; then
  set -- --prompt "Once upon a time" -n 64
fi
exec build/zerolayer generate "$@"
