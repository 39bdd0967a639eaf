#!/usr/bin/env bash
# Loopback comparison on this machine, in one run: iperf3 UDP (-u -b 0 -l 8192, the
# receiver's rate) and longhaul-perf (8 KiB segments, payload verified), alternating.
#
#   tools/perf/bench_loopback.sh [BUILD_DIR] [ROUNDS] [SECONDS] [longhaul-perf flags...]
#   tools/perf/bench_loopback.sh build 3 10 --cc=bbr --rate=40gbit
#
# Prints one line per round and the medians. Traffic stays on 127.0.0.1; every process
# runs under `timeout` and is stopped by its process id.
set -euo pipefail
BUILD=${1:-build}
ROUNDS=${2:-3}
SECS=${3:-10}
shift $(( $# < 3 ? $# : 3 ))
EXTRA=("$@")
[ ${#EXTRA[@]} -eq 0 ] && EXTRA=(--cc=bbr --rate=40gbit)
PERF="$BUILD/bin/longhaul-perf"
command -v iperf3 >/dev/null || { echo "bench: iperf3 is not installed (tools/setup.sh)" >&2; exit 1; }
[ -x "$PERF" ] || { echo "bench: $PERF not built" >&2; exit 1; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

gbps_iperf3() {  # $1 port
  timeout $((SECS + 20)) iperf3 -s -1 -B 127.0.0.1 -p "$1" >/dev/null 2>&1 &
  local spid=$!
  sleep 0.5
  timeout $((SECS + 15)) iperf3 -c 127.0.0.1 -p "$1" -u -b 0 -l 8192 -t "$SECS" -J \
    >"$TMP/iperf3.json" 2>/dev/null || true
  wait "$spid" 2>/dev/null || true
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print("%.2f" % (j["end"]["sum_received"]["bits_per_second"]/1e9))' "$TMP/iperf3.json"
}

gbps_longhaul() {  # $1 port
  timeout $((SECS + 60)) "$PERF" --server --bind=127.0.0.1 --port="$1" --one_off >/dev/null 2>&1 &
  local spid=$!
  sleep 0.5
  timeout $((SECS + 50)) "$PERF" --client=127.0.0.1 --port="$1" --time="$SECS" --json \
    "${EXTRA[@]}" >"$TMP/lh.json" 2>/dev/null || true
  wait "$spid" 2>/dev/null || true
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); e=j["end"]; ok=e["longhaul"]["integrity"]["intact"]; print("%.2f%s" % (e["sum_received"]["bits_per_second"]/1e9, "" if ok else "(NOT-INTACT)"))' "$TMP/lh.json"
}

echo "host: $(nproc) CPUs, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "longhaul-perf flags: ${EXTRA[*]}"
I=() L=()
for r in $(seq 1 "$ROUNDS"); do
  base=$(( 20000 + (RANDOM % 20000) ))
  i=$(gbps_iperf3 "$base")
  l=$(gbps_longhaul "$((base + 1))")
  I+=("$i"); L+=("${l%%(*}")
  echo "round $r: iperf3 $i Gbit/s, longhaul-perf $l Gbit/s"
done
python3 - "${I[*]}" "${L[*]}" <<'PY'
import statistics, sys
i = [float(x) for x in sys.argv[1].split()]
l = [float(x) for x in sys.argv[2].split()]
mi, ml = statistics.median(i), statistics.median(l)
print(f"median: iperf3 {mi:.2f} Gbit/s, longhaul-perf {ml:.2f} Gbit/s, ratio {ml/mi:.2f}")
PY
