#!/usr/bin/env bash
# Sets up (Debian packages), builds (Release, build/) and runs the main job: a simulated
# Tokyo-Singapore transfer (100 Gbit/s, 58 ms RTT, loss 1e-4) of 20 GiB, then the same
# link with the commonly copied 1 MB window for contrast.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release -j"$(nproc)"
echo "== longhaul on tokyo-singapore (rate=100gbit,rtt=58ms,loss=1e-4), 20 GiB, simulated"
build/bin/longhaul-sim --link=tokyo-singapore --bytes=20GiB
echo
echo "== the same link with a 1 MB window (the copied recipe), 64 MiB"
build/bin/longhaul-sim --link=tokyo-singapore --bytes=64MiB --window=1MB
