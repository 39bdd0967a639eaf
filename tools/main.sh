#!/usr/bin/env bash
# The main job. Sets up (Debian packages), builds (Release, build/), then on this one
# machine, without root:
#   1. a longhaul-perf server and client through longhaul-emu on loopback, over a
#      Tokyo-Singapore-like link scaled to what a small machine carries
#      (profiles/links/ts-1g.link: rate=1gbit, rtt=58ms, loss=1e-3, MTU 9000), with the
#      link's tuned profile: interval lines and the result;
#   2. the same emulated link with the commonly copied recipe (MTU 4096, 1 MB window,
#      fixed FEC 32,8) for contrast;
#   3. the full-size link (100 Gbit/s, 58 ms, loss 1e-4) in the simulator, 20 GiB.
# longhaul-perf runs protected (Noise IK, AES-256-GCM): longhaul-keygen writes a key pair
# for each side into build/keys once (kept for later runs), and both sides name theirs.
# Everything it starts is bounded in time and stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/setup.sh
cmake --preset release >/dev/null
cmake --build --preset release -j"$(nproc)"

B=build/bin
TIME=${LONGHAUL_MAIN_TIME:-20}
tmp=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

free_port() {
  python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
wait_for() {  # wait_for DESCRIPTION COMMAND...: polls for up to 10 s
  local what=$1; shift
  for _ in $(seq 100); do "$@" && return 0; sleep 0.1; done
  echo "main: $what did not come up" >&2; exit 1
}

# Packet protection: a key pair per side (each holds its own private key and the other's
# public key), written once.
K=build/keys
mkdir -p "$K"
for side in server client; do
  [ -f "$K/$side.key" ] && [ -f "$K/$side.pub" ] || "$B/longhaul-keygen" --out="$K/$side" --force >/dev/null
done
server_keys=(--key="$K/server.key" --peer_key="$K/client.pub")
client_keys=(--key="$K/client.key" --peer_key="$K/server.pub")
echo "== packet protection: static keys (Noise IK) from $K (longhaul-keygen), server key $(cut -c1-16 "$K/server.pub")..."

server_port=$(free_port)
"$B/longhaul-perf" --server --bind=127.0.0.1 --port="$server_port" --max_test_duration=300s \
  "${server_keys[@]}" >"$tmp/server.log" 2>&1 &
pids+=($!)
udp_listening() { ss -uln | grep -q "127.0.0.1:$1 "; }
wait_for "longhaul-perf server" udp_listening "$server_port"

"$B/longhaul-emu" --link=ts-1g --listen=127.0.0.1:0 --forward=127.0.0.1:"$server_port" \
  --port_file="$tmp/emu.port" --max_time=900s >"$tmp/emu.log" 2>&1 &
pids+=($!)
wait_for "longhaul-emu" test -s "$tmp/emu.port"
emu_port=$(cat "$tmp/emu.port")

if [ -f profiles/ts-1g.profile ]; then
  tuned=(--profile=profiles/ts-1g.profile)
else
  tuned=(--rate=1gbit --mtu=9000 --fec=auto)
fi

echo "== longhaul over an emulated Tokyo-Singapore link scaled to 1 Gbit/s"
echo "   (ts-1g: rate=1gbit, rtt=58ms, loss=1e-3, MTU 9000), ${TIME} s, ${tuned[*]}"
"$B/longhaul-perf" --client=127.0.0.1 --port="$emu_port" --time="$TIME" "${tuned[@]}" \
  "${client_keys[@]}"
echo
echo "== the same link with the commonly copied recipe (MTU 4096, 1 MB window, FEC 32,8)"
"$B/longhaul-perf" --client=127.0.0.1 --port="$emu_port" --time="$TIME" \
  --profile=profiles/seed-recipe.profile --rate=1gbit "${client_keys[@]}"
echo
echo "== the full-size link, simulated: tokyo-singapore (100 Gbit/s, 58 ms, loss 1e-4), 20 GiB"
"$B/longhaul-sim" --link=tokyo-singapore --bytes=20GiB
