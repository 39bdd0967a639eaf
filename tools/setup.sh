#!/usr/bin/env bash
# Installs the Debian packages longhaul needs to build, test and benchmark.
# Idempotent: when everything is present it prints nothing and changes nothing.
# Needs root (or sudo) only when something is missing.
set -euo pipefail

PACKAGES=(
  # build
  cmake ninja-build g++ ccache pkg-config
  # fuzzing and sanitizers
  clang libclang-rt-14-dev
  # libraries
  libabsl-dev libgflags-dev libgoogle-glog-dev libgtest-dev libgmock-dev libbenchmark-dev
  libboost-dev libisal-dev libibverbs-dev nlohmann-json3-dev libssl-dev
  # compressibility of captured datagrams in the packet-protection tests
  zlib1g-dev
)
# AES-256-GCM with VAES/AVX-512 for packet protection (Debian ships it for amd64 only).
if [ "$(dpkg --print-architecture 2>/dev/null)" = amd64 ]; then PACKAGES+=(libipsec-mb-dev); fi
PACKAGES+=(
  # benchmark peers, network namespaces, plots, the bench package's tests (pytest)
  iproute2 iperf3 libudt-dev python3 python3-matplotlib python3-pytest
  # longhaul-bridge's comparison (tools/bench/bridge-compare): kcptun and an HTTP client
  kcptun curl
  # the rdma tier's soft-RoCE testbed (tools/testbed): guests under qemu on Debian's
  # kernel package (downloaded into a cache by the testbed, not installed), rdma-core
  # tools and perftest inside them
  qemu-system-x86 busybox-static kmod rdma-core ibverbs-utils perftest
  # packaging (docs/install.md): man pages from --help, Debian packages and their checks,
  # the bridge's systemd unit checked with systemd-analyze
  help2man dpkg-dev lintian systemd
  # the Noise handshake checked against other implementations (tests/unit/crypto:
  # dissononce runs, flynn/noise's published vectors are replayed on noise-c)
  python3-dissononce golang-github-flynn-noise-dev
  # function lengths (tools/dev/function-lengths)
  universal-ctags
)

# noise-c (the Noise reference implementation, as WebAssembly from the npm registry,
# pinned with integrity hashes in tools/interop/package-lock.json) for the live interop
# test; without node and npm, or without the registry, that test skips and says why.
interop=tools/interop
if command -v npm >/dev/null 2>&1 && [ -f "$(dirname "$0")/../$interop/package-lock.json" ]; then
  dir="$(cd "$(dirname "$0")/.." && pwd)/$interop"
  if [ ! "$dir/node_modules/.package-lock.json" -nt "$dir/package-lock.json" ]; then
    npm ci --prefix "$dir" --no-audit --no-fund --loglevel=error >/dev/null 2>&1 ||
      echo "setup: npm ci in $interop failed; noise_interop_live_test will skip" >&2
  fi
fi

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "setup: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >/dev/null
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done" >&2
