#!/usr/bin/env bash
# Sets up (Debian packages), builds (Release, build/) and runs the test suite.
# Usage: tools/test.sh [extra ctest arguments, e.g. -L unit]
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release -j"$(nproc)"
ctest --test-dir build --output-on-failure -j"$(nproc)" --timeout 900 "$@"
