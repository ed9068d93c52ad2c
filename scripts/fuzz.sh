#!/usr/bin/env bash
# Builds ferry's libFuzzer targets (fuzz/, clang, ASan + UBSan) in build-fuzz and runs each for a
# bounded time over its committed corpus (fuzz/corpus/<target>/, replayed first: regression
# inputs fail at once) plus the inputs earlier runs kept (build-fuzz/corpus/<target>/). Prints a
# line per target (runs, seconds, corpus size) and exits non-zero when any target found a
# failure; the failing input is then in build-fuzz/artifacts/ (add it to fuzz/corpus/<target>/
# once fixed). Used by scripts/test.sh.
#
# Usage: scripts/fuzz.sh [TARGET...]     (default: every target)
#   FERRY_FUZZ_SECONDS   seconds per target (default 60)
#   FERRY_FUZZ_BUILD     build directory (default build-fuzz)
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FERRY_FUZZ_SECONDS:-60}
build=${FERRY_FUZZ_BUILD:-build-fuzz}
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(frame_decoder_fuzzer wire_format_fuzzer gzip_fuzzer json_fuzzer server_connection_fuzzer)

if ! command -v clang++ >/dev/null 2>&1; then
  echo "fuzz: clang++ not found (apt-get install clang)" >&2
  exit 1
fi

mkdir -p "$build"
CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DFERRY_BUILD_FUZZERS=ON -DFERRY_BUILD_TESTS=OFF -DFERRY_BUILD_BENCHMARKS=OFF \
  -DFERRY_BUILD_EXAMPLES=OFF >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

status=0
for t in "${targets[@]}"; do
  work="$build/corpus/$t"
  log="$build/logs/$t.log"
  mkdir -p "$work" "$build/artifacts" "$build/logs"
  rc=0
  # -max_total_time bounds the run; timeout guards against a hang the fuzzer cannot interrupt.
  timeout -k 10 $((seconds + 120)) "$build/fuzz/$t" -max_total_time="$seconds" \
    -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" "$work" "fuzz/corpus/$t" \
    >"$log" 2>&1 || rc=$?
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
  units=$(find "$work" -type f | wc -l)
  if [ "$rc" -eq 0 ]; then
    echo "fuzz $t: ok, ${runs:-?} runs in ${seconds}s, corpus $units kept + $(ls "fuzz/corpus/$t" | wc -l) committed"
  else
    status=1
    echo "fuzz $t: FAILED (exit $rc) after ${runs:-?} runs; log $log" >&2
    grep -E "FUZZ_CHECK|ERROR:|runtime error|SUMMARY|Test unit written" "$log" | head -n 20 >&2 || true
  fi
done
exit $status
