#!/usr/bin/env bash
# Loopback comparison on this machine, in one run: iperf3 UDP (-u -b 0 -l 8192, the
# receiver's rate), longhaul-perf (8 KiB segments, payload verified) and, when it is
# built, UDT4 through tools/bench's longhaul-udt-peer (bulk, its default 9000-byte MSS),
# alternating.
#
#   tools/perf/bench_loopback.sh [BUILD_DIR] [ROUNDS] [SECONDS] [longhaul-perf flags...]
#   tools/perf/bench_loopback.sh build 3 10 --cc=bbr --rate=40gbit
#   BENCH_SECURITY="--psk_file=k.psk" tools/perf/bench_loopback.sh build 3 10
#
# longhaul-perf runs plaintext (--insecure, as iperf3 and UDT are) unless BENCH_SECURITY
# gives its key flags for both sides (BENCH_CLIENT_SECURITY, when set, the client's where
# they differ: static key pairs); BENCH_SECURITY=none passes none (a build from before
# packet protection, which knows no --insecure).
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
UDT="$BUILD/bin/longhaul-udt-peer"
command -v iperf3 >/dev/null || { echo "bench: iperf3 is not installed (tools/setup.sh)" >&2; exit 1; }
[ -x "$PERF" ] || { echo "bench: $PERF not built" >&2; exit 1; }
if [ -z "${BENCH_SECURITY:-}" ]; then
  BENCH_SECURITY=none
  "$PERF" --help 2>/dev/null | grep -q -- '--insecure' && BENCH_SECURITY=--insecure
fi
SECURITY=() CLIENT_SECURITY=()
[ "$BENCH_SECURITY" != none ] && read -r -a SECURITY <<<"$BENCH_SECURITY"
CLIENT_SECURITY=(${SECURITY[@]+"${SECURITY[@]}"})
if [ -n "${BENCH_CLIENT_SECURITY:-}" ]; then
  CLIENT_SECURITY=()
  [ "$BENCH_CLIENT_SECURITY" != none ] && read -r -a CLIENT_SECURITY <<<"$BENCH_CLIENT_SECURITY"
fi
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
  timeout $((SECS + 60)) "$PERF" --server --bind=127.0.0.1 --port="$1" --one_off \
    ${SECURITY[@]+"${SECURITY[@]}"} >/dev/null 2>&1 &
  local spid=$!
  sleep 0.5
  timeout $((SECS + 50)) "$PERF" --client=127.0.0.1 --port="$1" --time="$SECS" --json \
    ${CLIENT_SECURITY[@]+"${CLIENT_SECURITY[@]}"} "${EXTRA[@]}" >"$TMP/lh.json" 2>/dev/null || true
  wait "$spid" 2>/dev/null || true
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); e=j["end"]; ok=e["longhaul"]["integrity"]["intact"]; print("%.2f%s" % (e["sum_received"]["bits_per_second"]/1e9, "" if ok else "(NOT-INTACT)"))' "$TMP/lh.json"
}

gbps_udt() {  # $1 port
  timeout $((SECS + 60)) "$UDT" --server --bind=127.0.0.1 --port="$1" --one_off >/dev/null 2>&1 &
  local spid=$!
  sleep 0.5
  timeout $((SECS + 50)) "$UDT" --client=127.0.0.1 --port="$1" --workload=bulk --time="$SECS" \
    >"$TMP/udt.json" 2>/dev/null || true
  wait "$spid" 2>/dev/null || true
  python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print("%.2f" % (j["end"]["sum_received"]["bits_per_second"]/1e9))' "$TMP/udt.json" 2>/dev/null || echo "n/a"
}

echo "host: $(nproc) CPUs, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "longhaul-perf flags: ${EXTRA[*]}; security: ${SECURITY[*]:-none (a build without packet protection)}"
I=() L=() U=()
for r in $(seq 1 "$ROUNDS"); do
  base=$(( 20000 + (RANDOM % 20000) ))
  i=$(gbps_iperf3 "$base")
  l=$(gbps_longhaul "$((base + 1))")
  u=n/a
  [ -x "$UDT" ] && u=$(gbps_udt "$((base + 2))")
  I+=("$i"); L+=("${l%%(*}"); [ "$u" != n/a ] && U+=("$u")
  echo "round $r: iperf3 $i Gbit/s, longhaul-perf $l Gbit/s, UDT $u Gbit/s"
done
python3 - "${I[*]}" "${L[*]}" "${U[*]:-}" <<'PY'
import statistics, sys
i = [float(x) for x in sys.argv[1].split()]
l = [float(x) for x in sys.argv[2].split()]
u = [float(x) for x in sys.argv[3].split()]
mi, ml = statistics.median(i), statistics.median(l)
line = f"median: iperf3 {mi:.2f} Gbit/s, longhaul-perf {ml:.2f} Gbit/s ({ml/mi:.2f} x iperf3)"
if u:
    mu = statistics.median(u)
    line += f", UDT {mu:.2f} Gbit/s ({ml/mu:.2f} x UDT)"
print(line)
PY
