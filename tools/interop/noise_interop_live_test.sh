#!/usr/bin/env bash
# The live interop check of longhaul's Noise handshake: noise-c (npm noise-c.wasm, pinned
# in tools/interop/package.json) makes fresh vectors of random keys, prologues and
# payloads, and noise_interop_test checks our initiator and responder against them; the
# committed noise-c vectors are regenerated and must come out the same. Where dissononce is
# installed (Debian python3-dissononce), the same for its vectors of all three patterns.
# Where flynn/noise's
# published vectors are installed (Debian golang-github-flynn-noise-dev), they are replayed
# on noise-c and the committed subset is compared with them.
# Usage: noise_interop_live_test.sh NOISE_INTEROP_TEST_BINARY SOURCE_DIR
# Exit 77 (skipped) when node or the npm packages are missing:
#   npm ci --prefix tools/interop
set -euo pipefail
test_bin=$1
src=$2
script=$src/tools/interop/noise_vectors.mjs
data=$src/tests/unit/crypto/testdata
if ! command -v node >/dev/null 2>&1; then
  echo "SKIP: node is not installed, so noise-c cannot run"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

rc=0
node "$script" noise-c >"$work/fixed.txt" || rc=$?
if [[ $rc == 77 ]]; then
  echo "SKIP: the noise-c npm packages are not installed (npm ci --prefix $src/tools/interop)"
  exit 77
fi
[[ $rc == 0 ]] || { echo "FAIL: noise-c could not make the vectors"; exit 1; }
if ! diff -u "$data/noise_c_vectors.txt" "$work/fixed.txt"; then
  echo "FAIL: noise-c no longer makes the committed vectors"
  exit 1
fi
echo "noise-c makes the committed vectors"

node "$script" noise-c --random 64 >"$work/random.txt"
LONGHAUL_NOISE_VECTORS="$work/random.txt" "$test_bin"
echo "our handshake agrees with noise-c on 64 vectors of random inputs"

# dissononce is in Debian's Python, which a pyenv or venv python3 on PATH may not see.
py=
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import dissononce' 2>/dev/null; then
    py=$p
    break
  fi
done
if [[ -n $py ]]; then
  "$py" "$src/tools/interop/noise_vectors_dissononce.py" >"$work/dissononce.txt"
  if ! diff -u "$data/dissononce_vectors.txt" "$work/dissononce.txt"; then
    echo "FAIL: dissononce no longer makes the committed vectors"
    exit 1
  fi
  "$py" "$src/tools/interop/noise_vectors_dissononce.py" --random 32 >"$work/dissononce_random.txt"
  LONGHAUL_NOISE_VECTORS="$work/dissononce_random.txt" "$test_bin"
  echo "our handshake agrees with dissononce on 3 x 32 vectors of random inputs"
else
  echo "note: dissononce is not installed (python3-dissononce); its vectors were not remade"
fi

flynn=${LONGHAUL_FLYNN_NOISE_VECTORS:-/usr/share/gocode/src/github.com/flynn/noise/vectors.txt}
if [[ -r $flynn ]]; then
  node "$script" check-flynn "$flynn"
  node "$script" flynn "$flynn" >"$work/flynn.txt"
  if ! diff -u "$data/flynn_noise_vectors.txt" "$work/flynn.txt"; then
    echo "FAIL: the committed flynn/noise vectors differ from $flynn"
    exit 1
  fi
  echo "flynn/noise's vectors agree with noise-c and with the committed copy"
else
  echo "note: $flynn is not installed (golang-github-flynn-noise-dev);" \
       "its vectors were not replayed"
fi
