#!/usr/bin/env bash
# Sets up, builds and starts `zerolayer serve` on the built-in demo model
# (models/zerolayer-demo.gguf) at http://127.0.0.1:8080.
# Extra arguments go to `zerolayer serve` (e.g. --port 9000, --model PATH).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
exec build/zerolayer serve "$@"
