#!/usr/bin/env bash
# Installs the Debian packages ferry builds with, when any is missing. Idempotent and quiet when
# everything is already there. Used by scripts/main.sh and scripts/test.sh; packages named as
# arguments are installed too (scripts/test.sh adds clang and libclang-rt-14-dev for the fuzzers,
# and nghttp2-client for the head-to-head benchmark's smoke test).
# With --bench it installs instead what only the benchmarks need (h2load, for bench/head_to_head,
# and openssl, whose `openssl speed` is the ceiling of its TLS table).
# Recommends are never installed, so every package the scripts rely on is named here or by the
# caller, unless a new machine already has it (scripts/fresh_check.sh checks that).
set -euo pipefail

packages=(
  g++ cmake ninja-build pkg-config python3
  libprotobuf-dev protobuf-compiler libprotoc-dev
  libabsl-dev libasio-dev zlib1g-dev libssl-dev
  libnghttp2-dev  # not the library's: the tests' and benchmarks' HPACK oracle (hpack_test etc.)
  node-llhttp  # llhttp's C sources and header: cmake/FindLlhttp.cmake builds them (src/http1)
  libbenchmark-dev libgtest-dev libgmock-dev
  libgrpc++-dev protobuf-compiler-grpc grpc-proto
  prometheus-cpp-dev
  nghttp2-proxy  # nghttpx: the proxy tests (test/proxy_test.cc, test/interop/multi_server.py)
  curl  # the README's curl call to the greeter (test/examples/greeter_curl_test.py)
  openssl  # the openssl command: tls_test's s_client scans and CRLs (openssl ca -gencrl)
  locales  # localedef and de_DE: service_config_test reads numbers under a comma-decimal locale
  "$@"
)
if [ "${1:-}" = "--bench" ]; then
  packages=(nghttp2-client openssl)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "installing: ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
