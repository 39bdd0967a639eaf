#!/usr/bin/env bash
# Runs every libFuzzer target of a fuzz build for a bounded time each, over a temporary
# copy of its committed corpus, and fails when one crashes (or fails an invariant), leaks,
# times out on an input, or is missing. Builds nothing: build the targets first with
#   cmake --preset fuzz && cmake --build --preset fuzz
#
# Usage: tests/fuzz/run_fuzzers.sh [FUZZ_BUILD_DIR [SECONDS_PER_TARGET [TARGET...]]]
#   FUZZ_BUILD_DIR      the fuzz preset's build directory (default: build-fuzz)
#   SECONDS_PER_TARGET  -max_total_time of each target (default: 60)
#   TARGET...           only these targets (default: all of them)
# Environment: LONGHAUL_FUZZ_ARTIFACTS=DIR keeps crash reproducers and logs there
# (default: a temporary directory, kept only when something failed); NICE=N runs the
# fuzzers under nice -n N (default 10); LONGHAUL_FUZZ_RUNS=N also stops each target after
# N executions (the campaign: LONGHAUL_FUZZ_RUNS=10000000 with a generous time);
# LONGHAUL_FUZZ_CORPUS_OUT=DIR keeps each target's grown corpus in DIR/TARGET (default:
# discarded; minimise and commit finds by hand: see docs/reliability.md).
#
# Each target runs in one process (-jobs is not used), one after another.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
build_dir="${1:-build-fuzz}"
seconds="${2:-60}"
shift $(( $# > 2 ? 2 : $# ))

# target -> its corpus directory under tests/fuzz/corpus
declare -A corpus_of=(
  [wire_fuzz]=wire
  [handshake_fuzz]=handshake
  [bridge_frame_fuzz]=bridge
  [profile_fuzz]=profile
  [link_spec_fuzz]=link_spec
  [nccl_frames_fuzz]=nccl_frames
  [key_files_fuzz]=key_files
)
all_targets=(wire_fuzz handshake_fuzz bridge_frame_fuzz profile_fuzz link_spec_fuzz
             nccl_frames_fuzz key_files_fuzz)
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then targets=("${all_targets[@]}"); fi

if ! [[ "$seconds" =~ ^[0-9]+$ ]] || [[ "$seconds" -lt 1 ]]; then
  echo "run_fuzzers.sh: seconds per target must be a positive integer, not '$seconds'" >&2
  exit 2
fi

runs="${LONGHAUL_FUZZ_RUNS:--1}"
if ! [[ "$runs" =~ ^-?[0-9]+$ ]]; then
  echo "run_fuzzers.sh: LONGHAUL_FUZZ_RUNS must be a number of executions, not '$runs'" >&2
  exit 2
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/longhaul-fuzz.XXXXXX")"
artifacts="${LONGHAUL_FUZZ_ARTIFACTS:-$work/artifacts}"
mkdir -p "$artifacts"
failed=()

for t in "${targets[@]}"; do
  if [[ -z "${corpus_of[$t]:-}" ]]; then
    echo "run_fuzzers.sh: unknown target '$t' (known: ${all_targets[*]})" >&2
    failed+=("$t(unknown)")
    continue
  fi
  bin="$build_dir/fuzz/$t"
  if [[ ! -x "$bin" ]]; then
    echo "run_fuzzers.sh: $bin is missing; build the fuzz preset first" >&2
    failed+=("$t(missing)")
    continue
  fi
  corpus="$work/corpus-$t"
  if [[ -n "${LONGHAUL_FUZZ_CORPUS_OUT:-}" ]]; then corpus="$LONGHAUL_FUZZ_CORPUS_OUT/$t"; fi
  mkdir -p "$corpus" "$artifacts/$t"
  if [[ -d "$here/corpus/${corpus_of[$t]}" ]]; then
    cp -R "$here/corpus/${corpus_of[$t]}/." "$corpus/"
  fi
  log="$artifacts/$t.log"
  echo "== $t: ${seconds}s over $(ls "$corpus" | wc -l) corpus files"
  rc=0
  # -timeout: an input taking over 25 s is a hang; -rss_limit_mb: a runaway allocation.
  nice -n "${NICE:-10}" "$bin" -max_total_time="$seconds" -runs="$runs" -timeout=25 -rss_limit_mb=4096 \
    -print_final_stats=1 -artifact_prefix="$artifacts/$t/" "$corpus" >"$log" 2>&1 || rc=$?
  # The final stat lines: executions, speed, coverage.
  grep -E '^(Done|stat::number_of_executed_units|stat::average_exec_per_sec)' "$log" | sed 's/^/   /' || true
  grep -E '#[0-9]+.*(DONE|pulse|NEW|REDUCE).*cov:' "$log" | tail -n 1 | sed 's/^/   /' || true
  # libFuzzer names what it saves by kind; slow-unit-* files are reports, not failures.
  if [[ $rc -ne 0 ]] || compgen -G "$artifacts/$t/crash-*" >/dev/null ||
     compgen -G "$artifacts/$t/leak-*" >/dev/null || compgen -G "$artifacts/$t/timeout-*" >/dev/null ||
     compgen -G "$artifacts/$t/oom-*" >/dev/null; then
    echo "!! $t failed (exit $rc); log: $log; reproducers:" >&2
    ls "$artifacts/$t" >&2 || true
    tail -n 40 "$log" >&2 || true
    failed+=("$t")
  fi
done

rm -rf "$work/corpus-"*
if [[ ${#failed[@]} -ne 0 ]]; then
  echo "run_fuzzers.sh: FAILED: ${failed[*]} (artifacts in $artifacts)" >&2
  exit 1
fi
if [[ -z "${LONGHAUL_FUZZ_ARTIFACTS:-}" ]]; then rm -rf "$work"; fi
echo "run_fuzzers.sh: all ${#targets[@]} targets ran (${seconds}s or ${runs} executions each, -1: no count limit) without a crash"
