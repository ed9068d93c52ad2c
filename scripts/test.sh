#!/usr/bin/env bash
# ferry's test suite. Every ctest test has one tier label (test/CMakeLists.txt says which):
#   unit          in one process, one concept
#   integration   ferry's client and server over loopback, the examples, codegen, install
#   interop       a real peer: grpc-go, grpc-java, grpcio, grpcurl, ghz, h2spec, connectrpc's
#                 conformance runner, connect-web in headless Chromium, h2load
#
# scripts/test.sh --quick   the format check (.clang-format; scripts/check_format.sh), then unit
#                           and integration tests in Release, nothing else (no peers, no
#                           sanitizers, no fuzzers): the developer's loop.
# scripts/test.sh           everything (what CI runs): installs missing Debian packages and the
#   peers, checks the formatting, builds in Release and runs every tier; builds again under
#   AddressSanitizer + UndefinedBehaviorSanitizer and runs every tier again but grpc-java's cases
#   and the four feature examples, whose calls the googletest programs make there too (any report
#   aborts its test, so it fails); builds the library and the multi-threaded tests (label
#   threads) under ThreadSanitizer and runs them; then runs each libFuzzer target for a bounded time
#   (scripts/fuzz.sh; FERRY_FUZZ_SECONDS per target, default 5 here). The builds that the next
#   phase needs run at the lowest priority beside the current one. Prints each phase's time.
# Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."

quick=0
case "${1:-}" in
  --quick) quick=1 ;;
  "") ;;
  *) echo "usage: scripts/test.sh [--quick]" >&2; exit 2 ;;
esac
jobs=$(nproc)
# Tests run 2 per core: most of them wait on sockets, timers and peers' start-up, so at 1 per
# core the machine is idle about 60% of the time (and the background builds take the rest).
test_jobs=$((2 * jobs))
times=()
start=$SECONDS
# cpu_ticks: the machine's busy and idle clock ticks so far (/proc/stat's first line: idle and
# iowait count as idle), to say how busy each phase kept the cores: the command's time is its CPU
# work over the cores when they are all busy, and the idle share says where waiting costs time.
cpu_ticks() { awk '/^cpu /{print $2+$3+$4+$7+$8+$9, $5+$6; exit}' /proc/stat; }
read -r busy_start idle_start < <(cpu_ticks)
# lap NAME: records how long the phase that just ended took, and the share of the cores it left
# idle, for the summary at the end.
lap() {
  local busy idle idle_pct=0
  read -r busy idle < <(cpu_ticks)
  if [ $((busy - busy_start + idle - idle_start)) -gt 0 ]; then
    idle_pct=$(( 100 * (idle - idle_start) / (busy - busy_start + idle - idle_start) ))
  fi
  times+=("$(printf '%5ds  %3d%% idle  %s' $((SECONDS - start)) "$idle_pct" "$1")")
  start=$SECONDS
  busy_start=$busy
  idle_start=$idle
}
print_times() {
  echo "== Times"
  printf '  %s\n' "${times[@]}"
  printf '%7ds  total\n' "$SECONDS"
}

# The Release tree. No benchmarks: only the head-to-head's servers, which a test runs.
# What only the tests build and run at -O0 (FERRY_TEST_CXX_FLAGS, CMakeLists.txt: the googletest
# programs, the programs and protos they start, the examples): the library under test stays at
# -O3, and the test code compiles in about half the time. Linked by gold (binutils,
# which g++ depends on): a third of the default linker's time per program. The googletest files
# of a tier as one program of unity batches (FERRY_TEST_UNITY, test/CMakeLists.txt): 134 s of a
# core instead of 313 for their objects, measured on this kind of machine, and 2 links, not 64.
# The library's own sources in unity batches too (FERRY_UNITY_LIBRARY): the library with its
# components and their generated code took 349 CPU-s instead of 481 (GCC -O3, one pair of cold
# builds on this kind of machine); scripts/main.sh turns it off again for the benchmarks.
configure_release() {
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_BUILD_BENCHMARKS=OFF \
    -DFERRY_TEST_CXX_FLAGS=-O0 -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=gold -DFERRY_TEST_UNITY=ON \
    -DFERRY_UNITY_LIBRARY=ON "$@"
}

if [ "$quick" -eq 1 ]; then
  bash scripts/install_deps.sh clang-format-14
  bash scripts/check_format.sh
  echo "== Release build"
  configure_release
  cmake --build build -j "$jobs"
  python3 scripts/test_tiers.py build
  lap "Release build"
  echo "== Unit and integration tests (Release)"
  (cd build && ctest -j "$test_jobs" -L '^(unit|integration)$' --output-on-failure)
  lap "unit and integration tests"
  print_times
  exit 0
fi

# The Debian packages the Release build needs (install_deps.sh's own list) come first; the ones
# only later phases need install beside that build (apt's downloads and unpacking are mostly
# waiting), and test.sh waits for them after it:
# for the sanitizer build and scripts/fuzz.sh, clang, and libclang-rt-14-dev, its sanitizer
# headers and runtimes (libFuzzer among them), which clang only recommends (install_deps.sh
# installs no recommends), and lld-14, the sanitizer tree's linker; for the head_to_head_smoke
# test, nghttp2-client (h2load and nghttp; without them the test is skipped); for the format
# check, clang-format-14; for the browser test (test/browser), chromium, which runs headless
# without any of its recommends (its npm packages come with the peers, through the machine's own
# Node.js and npm). The sanitizer build, which starts beside the Release build too, waits for
# them first (their exit status lands in $extras_status).
bash scripts/install_deps.sh
lap "Debian packages for the build"
mkdir -p build
extras_log="$PWD/build/install_extras.log"
extras_status="$PWD/build/install_extras.status"
rm -f "$extras_status"
setsid bash -c 'bash scripts/install_deps.sh "${@:2}"; echo $? >"$1"' - "$extras_status" \
  clang libclang-rt-14-dev lld-14 nghttp2-client clang-format-14 chromium >"$extras_log" 2>&1 &
extras_pid=$!

# Real gRPC peers for the interop tests (grpcio + h2, grpc-go's and grpc-java's interop programs,
# grpcurl, ghz, h2spec, connectconformance, the OpenTelemetry Collector, the browser test's npm
# packages): pinned versions, installed under build/peers from the package registries. Cold, that
# is ~7 min of downloads and Go builds (the Collector's ~2 CPU-min of them) that the Release build
# does not need, so it runs beside it (in a session of its own,
# so that a failing build can stop it). The Go peers compile unoptimized (FERRY_PEERS_GO_OPTIMIZE=0:
# a quarter less CPU; install_peers.sh says why that is safe).
# cmake runs again after it: each interop test is added when its peer is there.
peers="$PWD/build/peers"
peers_log="$PWD/build/install_peers.log"
FERRY_PEERS_GO_OPTIMIZE=0 setsid bash scripts/install_peers.sh "$peers" >"$peers_log" 2>&1 &
peers_pid=$!

# The sanitizer tree builds from the start too, at the lowest CPU priority: it takes
# only what the Release build and the peers leave idle, which is mostly while the Release tests
# run (they wait on sockets and timers about a quarter of the time even at 2 per core). What it
# has not built by then is built at normal priority after them. clang, not GCC: at -O0 under the
# sanitizers it compiles ferry's coroutine-heavy code in about half the time, and a second
# compiler sees what the first lets through. -O0 with line tables only (-g1): the reports' stack
# traces keep their file:line without full debug info. (-O1 would run the tests a little faster,
# but doubles the compile time of the same code.) Linked by lld, which takes about half the
# default linker's CPU time per sanitized program. The library's sources as unity batches
# (FERRY_UNITY_LIBRARY; half the CPU at -O0), in the ThreadSanitizer and fuzz trees too.
configure_sanitize() {
  cmake -S . -B build-sanitize -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DFERRY_SANITIZE=ON -DFERRY_BUILD_BENCHMARKS=OFF \
    -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DFERRY_TEST_UNITY=ON -DFERRY_UNITY_LIBRARY=ON \
    -DFERRY_PEERS_DIR="$peers"
}
# at_lowest_priority COMMAND...: runs COMMAND in a session of its own (so that it can be stopped
# as one: kill -- -PID) at the lowest CPU priority. With the kernel's autogroup scheduling
# (Debian's default) CPU is shared equally between sessions whatever their processes' nice values,
# so the session's autogroup gets the lowest priority too. Run it in the background: it execs.
at_lowest_priority() {
  exec setsid bash -c 'echo 19 >/proc/self/autogroup 2>/dev/null; exec nice -n 19 "$@"' - "$@"
}
# to_normal_priority PID: the job at_lowest_priority started as PID, once the next phase waits
# for it, gets normal priority back: its session's autogroup and every process in it (the
# compilers its ninja starts later inherit ninja's). At the lowest priority it would share the
# cores equally with any other low-priority work on the machine. Lowering a nice value needs
# root (CAP_SYS_NICE); without it the job stays where it was.
to_normal_priority() {
  echo 0 >"/proc/$1/autogroup" 2>/dev/null || true
  local stat fields
  for stat in /proc/[0-9]*/stat; do
    fields=$(cat "$stat" 2>/dev/null) || continue
    read -r -a fields <<<"${fields##*) }"  # after the command's name: state ppid pgrp session
    [ "${fields[3]:-}" = "$1" ] || continue
    stat=${stat#/proc/}
    renice -n 0 -p "${stat%/stat}" >/dev/null 2>&1 || true
  done
}
sanitize_log="$PWD/build/sanitize_build.log"
at_lowest_priority bash -c "$(declare -f configure_sanitize); peers='$peers'
  until [ -s '$extras_status' ]; do sleep 1; done
  [ \"\$(cat '$extras_status')\" = 0 ] || { echo 'the Debian packages failed to install'; exit 1; }
  configure_sanitize && cmake --build build-sanitize -j $jobs" >"$sanitize_log" 2>&1 &
sanitize_pid=$!
# The ThreadSanitizer tree: clang with -fsanitize=thread, the library and only the tests that
# start more than one thread (test/CMakeLists.txt's ferry_thread_tests, labelled `threads`);
# nothing else, since it is a third build of the library; the code generator it runs is the
# Release tree's (FERRY_PROTOC_GEN_FERRY: single-threaded, and not the code this tier tests). It
# builds once the Release tree and then the ASan tree have, at the lowest priority too (the two
# would only share the idle CPU between them).
configure_tsan() {
  cmake -S . -B build-tsan -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_CXX_FLAGS_DEBUG=-g1 -DFERRY_SANITIZE_THREAD=ON -DFERRY_BUILD_BENCHMARKS=OFF \
    -DFERRY_BUILD_EXAMPLES=OFF -DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DFERRY_UNITY_LIBRARY=ON \
    -DFERRY_PROTOC_GEN_FERRY="$PWD/build/protoc-gen-ferry"
}
tsan_log="$PWD/build/tsan_build.log"
trap 'kill -- -$peers_pid -$sanitize_pid 2>/dev/null || true' EXIT

echo "== Release build (the peers install meanwhile: $peers_log)"
configure_release -DFERRY_PEERS_DIR="$peers"
cmake --build build -j "$jobs"
lap "Release build"
at_lowest_priority bash -c "$(declare -f configure_tsan)
  while kill -0 $sanitize_pid 2>/dev/null; do sleep 1; done
  configure_tsan && cmake --build build-tsan -j $jobs --target ferry_thread_tests" \
  >"$tsan_log" 2>&1 &
tsan_pid=$!
trap 'kill -- -$peers_pid -$sanitize_pid -$tsan_pid 2>/dev/null || true' EXIT
wait "$extras_pid"
cat "$extras_log"
[ "$(cat "$extras_status" 2>/dev/null)" = 0 ] || { echo "the Debian packages failed to install" >&2; exit 1; }
command -v clang++ >/dev/null 2>&1 || { echo "clang++ not found" >&2; exit 1; }
lap "Debian packages, once the build was done"
bash scripts/check_format.sh
lap "format check"
echo "== Peers"
peers_status=0
wait "$peers_pid" || peers_status=$?
cat "$peers_log"
[ "$peers_status" -eq 0 ] || exit 1
lap "peers install, once the build was done"
configure_release -DFERRY_PEERS_DIR="$peers" >/dev/null
cmake --build build -j "$jobs"  # what needs the peers' files (the conformance programs)
python3 scripts/test_tiers.py build
lap "Release build after the peers"

echo "== Release tests, every tier"
# One run; the interop summary (a line per interop test, then `interop: N passed, M failed`) is
# read from its JUnit file. Either failing fails the script, after the summary is printed.
junit="$PWD/build/ctest-release.xml"
rm -f "$junit"
status=0
(cd build && ctest -j "$test_jobs" --output-on-failure --output-junit "$junit") || status=1
echo "== Interop summary (Release)"
python3 scripts/interop_summary.py build "$junit" || status=1
[ "$status" -eq 0 ] || exit 1
lap "Release tests"

echo "== AddressSanitizer + UndefinedBehaviorSanitizer build and tests (clang)"
sanitize_status=0
to_normal_priority "$sanitize_pid"
wait "$sanitize_pid" || sanitize_status=$?
trap 'kill -- -$tsan_pid 2>/dev/null || true' EXIT
[ "$sanitize_status" -eq 0 ] || { cat "$sanitize_log"; exit 1; }
# The fuzzers build beside the sanitizer tests, in the same way (lowest priority).
fuzz_build_log="$PWD/build/fuzz_build.log"
at_lowest_priority bash scripts/fuzz.sh --build-only >"$fuzz_build_log" 2>&1 &
fuzz_build_pid=$!
trap 'kill -- -$fuzz_build_pid -$tsan_pid 2>/dev/null || true' EXIT
configure_sanitize >/dev/null  # now with the peers: what needs their files
cmake --build build-sanitize -j "$jobs"
python3 scripts/test_tiers.py build-sanitize
lap "sanitizer build: what was left after the Release tests"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# Every test but grpc-java's interop cases, whose time is the JVM's start-up (a JVM per case):
# ferry's side of them is what the grpc-go cases exercise under the sanitizers too, and they all
# run in Release above. connectrpc's conformance runs there without its JSON-codec cases
# (test/conformance/CMakeLists.txt says why).
(cd build-sanitize && ctest -j "$test_jobs" --output-on-failure -E '^interop_(tls_)?java_')
lap "sanitizer tests"

echo "== ThreadSanitizer build and tests (clang; the tests labelled threads)"
tsan_status=0
to_normal_priority "$tsan_pid"
to_normal_priority "$fuzz_build_pid"
wait "$tsan_pid" || tsan_status=$?
[ "$tsan_status" -eq 0 ] || { cat "$tsan_log"; exit 1; }
lap "ThreadSanitizer build: what was left after the sanitizer tests"
# Any report fails its test at once (exit 66). Suppressions for third-party code only, each with
# its reason (test/tsan_suppressions.txt: one OpenSSL race inside its handshake); none for ferry's.
tsan_suppressions="$PWD/test/tsan_suppressions.txt"
(cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 \
suppressions=$tsan_suppressions" ctest -j "$test_jobs" --output-on-failure -L threads)
lap "ThreadSanitizer tests"

# 5 s of a core per target, after each has replayed its committed corpus (fuzz/corpus: the seeds
# and every input that found a bug): regressions fail at once, and each run explores a little,
# within the command's 20 minutes on 2 cores (2.5 s of wall time per target, two at once; 16
# targets). Deeper runs are scripts/fuzz.sh's own (60 s a target by default, or
# FERRY_FUZZ_SECONDS).
fuzz_seconds=${FERRY_FUZZ_SECONDS:-5}
echo "== Fuzzing (libFuzzer + ASan + UBSan, $fuzz_seconds s of a core per target, all at once)"
fuzz_build_status=0
wait "$fuzz_build_pid" || fuzz_build_status=$?
trap - EXIT
[ "$fuzz_build_status" -eq 0 ] || { cat "$fuzz_build_log"; exit 1; }
FERRY_FUZZ_SECONDS=$fuzz_seconds bash scripts/fuzz.sh
lap "fuzzing"
print_times
