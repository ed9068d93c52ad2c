#!/usr/bin/env bash
# ferry's main job: installs missing Debian packages, builds everything in Release, runs the
# codec benchmarks (medians of repetitions) and prints their table with ratios to the baselines.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install_deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build

mkdir -p build/results
./build/bench/codec_bench \
  --benchmark_repetitions="${FERRY_BENCH_REPETITIONS:-5}" \
  --benchmark_report_aggregates_only=true \
  --benchmark_min_time="${FERRY_BENCH_MIN_TIME:-0.2}" \
  --benchmark_out=build/results/codec.json --benchmark_out_format=json
echo
python3 scripts/bench_table.py build/results/codec.json
