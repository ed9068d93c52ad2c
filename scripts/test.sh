#!/usr/bin/env bash
# ferry's whole test suite: installs missing Debian packages, builds and runs every test with
# ctest, then builds and runs them again under AddressSanitizer + UndefinedBehaviorSanitizer (any
# report aborts the test, so it fails), then runs each libFuzzer target for a bounded time
# (scripts/fuzz.sh; FERRY_FUZZ_SECONDS per target, default 60). Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

# For scripts/fuzz.sh: clang, and libclang-rt-14-dev, its sanitizer headers and runtimes (libFuzzer
# among them), which clang only recommends (install_deps.sh installs no recommends). For the
# head_to_head_smoke test: nghttp2-client (h2load and nghttp; without them the test is skipped).
bash scripts/install_deps.sh clang libclang-rt-14-dev nghttp2-client
jobs=$(nproc)

# Real gRPC peers for the interop tests (grpcio + h2, grpc-go's and grpc-java's interop programs,
# grpcurl, ghz): pinned versions, installed under build/peers from the package registries
# (~4 min cold).
peers="$PWD/build/peers"
bash scripts/install_peers.sh "$peers"

echo "== Release build and tests"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_PEERS_DIR="$peers"
cmake --build build -j "$jobs"
# One run; the interop summary (a line per interop test, then `interop: N passed, M failed`) is
# read from its JUnit file. Either failing fails the script, after the summary is printed.
junit="$PWD/build/ctest-release.xml"
rm -f "$junit"
status=0
(cd build && ctest -j "$jobs" --output-on-failure --output-junit "$junit") || status=1
echo "== Interop summary (Release)"
python3 scripts/interop_summary.py build "$junit" || status=1
[ "$status" -eq 0 ] || exit 1

echo "== AddressSanitizer + UndefinedBehaviorSanitizer build and tests"
cmake -S . -B build-sanitize -G Ninja -DCMAKE_BUILD_TYPE=Debug -DFERRY_SANITIZE=ON \
  -DFERRY_BUILD_BENCHMARKS=OFF -DFERRY_PEERS_DIR="$peers"
cmake --build build-sanitize -j "$jobs"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
(cd build-sanitize && ctest -j "$jobs" --output-on-failure)

echo "== Fuzzing (libFuzzer + ASan + UBSan, ${FERRY_FUZZ_SECONDS:-60} s per target)"
if command -v clang++ >/dev/null 2>&1; then
  bash scripts/fuzz.sh
else
  echo "clang++ not found: fuzzers not run"
  exit 1
fi
