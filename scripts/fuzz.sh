#!/usr/bin/env bash
# Builds ferry's libFuzzer targets (fuzz/, clang, ASan + UBSan) in build-fuzz and runs each for a
# bounded time over its committed corpus (fuzz/corpus/<target>/, replayed first: regression
# inputs fail at once) plus the inputs earlier runs kept (build-fuzz/corpus/<target>/). Prints a
# line per target (runs, seconds, corpus size) and exits non-zero when any target found a
# failure; the failing input is then in build-fuzz/artifacts/ (add it to fuzz/corpus/<target>/
# once fixed). Used by scripts/test.sh.
#
# Usage: scripts/fuzz.sh [--build-only] [TARGET...]     (default: every target)
#   --build-only         configure and build the targets, run none (test.sh builds them while the
#                        sanitizer tests run)
#   FERRY_FUZZ_SECONDS   seconds of a core per target (default 60)
#   FERRY_FUZZ_JOBS      cores to share (default: all of them). Every target runs at once, for
#                        FERRY_FUZZ_SECONDS x targets / cores of wall time when there are more
#                        targets than cores: each fuzzer is one process, so each still gets its
#                        seconds of a core, and no core idles while the last ones finish (7
#                        targets in rounds of 2 left one core idle for the whole last round).
#   FERRY_FUZZ_BUILD     build directory (default build-fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."

build_only=0
if [ "${1:-}" = "--build-only" ]; then
  build_only=1
  shift
fi
seconds=${FERRY_FUZZ_SECONDS:-60}
build=${FERRY_FUZZ_BUILD:-build-fuzz}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(frame_decoder_fuzzer wire_format_fuzzer gzip_fuzzer
                                     json_fuzzer service_config_fuzzer authz_policy_fuzzer
                                     xds_bootstrap_fuzzer xds_resources_fuzzer
                                     server_connection_fuzzer
                                     http1_connection_fuzzer http1_client_fuzzer
                                     hpack_decoder_fuzzer hpack_differential_fuzzer
                                     h2_frame_server_fuzzer h2_frame_client_fuzzer
                                     h2_session_server_fuzzer trace_context_fuzzer)

if ! command -v clang++ >/dev/null 2>&1; then
  echo "fuzz: clang++ not found (apt-get install clang)" >&2
  exit 1
fi

mkdir -p "$build"
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DFERRY_BUILD_FUZZERS=ON -DFERRY_BUILD_TESTS=OFF -DFERRY_BUILD_BENCHMARKS=OFF \
  -DFERRY_BUILD_EXAMPLES=OFF -DFERRY_UNITY_LIBRARY=ON >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"
[ "$build_only" -eq 0 ] || exit 0

# Wall seconds per target: all run at once, sharing the cores equally.
jobs=${FERRY_FUZZ_JOBS:-$(nproc)}
wall=$seconds
[ ${#targets[@]} -le "$jobs" ] || wall=$(( (seconds * ${#targets[@]} + jobs - 1) / jobs ))
# fuzz_one TARGET: one target's run; prints its line, exits non-zero if it found a failure.
fuzz_one() {
  local t=$1 work="$build/corpus/$1" log="$build/logs/$1.log" rc=0 runs units
  mkdir -p "$work" "$build/artifacts" "$build/logs"
  # -max_total_time bounds the run; timeout guards against a hang the fuzzer cannot interrupt.
  timeout -k 10 $((wall + 120)) "$build/fuzz/$t" -max_total_time="$wall" \
    -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" "$work" "fuzz/corpus/$t" \
    >"$log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  units=$(find "$work" -type f | wc -l)
  if [ "$rc" -eq 0 ]; then
    echo "fuzz $t: ok, ${runs:-?} runs in ${wall}s (${#targets[@]} at once on $jobs cores), corpus $units kept + $(ls "fuzz/corpus/$t" | wc -l) committed"
  else
    echo "fuzz $t: FAILED (exit $rc) after ${runs:-?} runs; log $log" >&2
    grep -E "FUZZ_CHECK|ERROR:|runtime error|SUMMARY|Test unit written" "$log" | head -n 20 >&2 || true
    return 1
  fi
}
status=0
pids=()
for t in "${targets[@]}"; do
  fuzz_one "$t" &
  pids+=($!)
done
for pid in "${pids[@]}"; do
  wait "$pid" || status=1
done
exit $status
