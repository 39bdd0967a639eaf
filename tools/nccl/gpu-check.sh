#!/bin/bash
# One bounded run of check-real-nccl on a GPU machine (docs/nccl-runs.md 4.4): the plugin and
# NCCL's Socket transport on loopback, then longhaul through longhaul-emu relays, then
# both transports through the emulator's TUN link between namespaces (root).
# Usage: tools/nccl/gpu-check.sh BUNDLE_DIR OUT_DIR   (about 5 minutes)
set -u
bundle=${1:?bundle directory}; out=${2:?output directory}
mkdir -p "$out/logs"
link=rate=1gbit,rtt=58ms,loss=1e-3
py=python3
{ date -u; nvidia-smi -L; nproc; uname -r; $py -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version())'; } 2>&1 | tee "$out/machine.txt"
run() {  # name, then check-real-nccl's arguments
  local name=$1; shift
  PYTHONUNBUFFERED=1 $py "$bundle/check-real-nccl" --bundle="$bundle" --json="$out/$name.json" \
      --logs="$out/logs/$name" "$@" 2>&1 | tee "$out/$name.log"
  echo "# exit ${PIPESTATUS[0]} ($name)" | tee -a "$out/$name.log"
}
run loopback --net=both --time-per-size=1 --timeout=150 --stall-timeout=60
run relay --net=longhaul --link=$link --step-factor=4 --max-bytes=64MiB --time-per-size=2 \
    --timeout=150 --stall-timeout=60
run netns --net=both --link=$link --netns --step-factor=4 --max-bytes=64MiB --time-per-size=2 \
    --timeout=220 --stall-timeout=60
tar -C "$out" -czf "$out/logs.tar.gz" logs && rm -rf "$out/logs"
