#!/usr/bin/env bash
# Sets up, builds and runs the default test suite (unit + e2e). This is what CI runs.
# Tests that need ../shared (models, golden data, vocabularies) say SKIPPED when it is absent.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
cd build
ctest --output-on-failure -j"$(nproc 2>/dev/null || echo 2)" "$@"
