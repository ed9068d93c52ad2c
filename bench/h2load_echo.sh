#!/bin/bash
# bench/h2load_echo.sh: drives bench/echo_server with h2load (nghttp2-client) and prints the
# server's cost per call read from /proc/PID/stat around the run: calls/s, CPU µs per call and
# minor page faults per call. The server is pinned to one core (taskset), h2load to the other.
#
#   bench/h2load_echo.sh BUILD_DIR PAYLOAD_BYTES CALLS IN_FLIGHT [METHOD [RESPONSE_COUNT]]
#   METHOD: Echo (unary, echoes the payload; default) or Expand (server streaming:
#   RESPONSE_COUNT responses of PAYLOAD_BYTES each, the request carrying no payload).
set -euo pipefail
build=$1 size=$2 calls=$3 inflight=$4 method=${5:-Echo} count=${6:-1}
dir=$(mktemp -d)
trap 'kill $server 2>/dev/null || true; rm -rf "$dir"' EXIT

# The framed request: 5-byte gRPC prefix + EchoRequest {payload = size bytes} or, for Expand,
# {response_size = size, response_count = count}.
python3 - "$dir/req.bin" "$size" "$method" "$count" <<'PY'
import struct, sys
path, size, method, count = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7f; n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n: return bytes(out)
if method == "Expand":
    msg = b"\x10" + varint(size) + b"\x18" + varint(count)
else:
    msg = b"\x0a" + varint(size) + b"p" * size
open(path, "wb").write(b"\x00" + struct.pack(">I", len(msg)) + msg)
PY

taskset -c 0 "$build/bench/echo_server" 0 1 > "$dir/out" &
server=$!
for _ in $(seq 100); do grep -q listening "$dir/out" 2>/dev/null && break; sleep 0.05; done
port=$(awk '{print $3}' "$dir/out")
url=http://127.0.0.1:$port/ferry.testing.Echo/$method
h2() {
  taskset -c 1 timeout 300 h2load -n "$1" -c 1 -m "$inflight" -t 1 -d "$dir/req.bin" \
    -H 'content-type: application/grpc' -H 'te: trailers' "$url"
}
h2 $((calls / 10 + inflight)) > /dev/null  # warm-up: pools, arenas, heap
stat() { awk '{print $10, $14 + $15}' "/proc/$server/stat"; }  # minflt, utime+stime (ticks)
read -r flt0 cpu0 < <(stat)
out=$(h2 "$calls")
read -r flt1 cpu1 < <(stat)
hz=$(getconf CLK_TCK)
rps=$(echo "$out" | awk '/^finished in/ {gsub(",", ""); print $4}')
ok=$(echo "$out" | awk '/^status codes:/ {gsub(",", ""); print $3}')
awk -v rps="$rps" -v ok="$ok" -v n="$calls" -v c="$((cpu1 - cpu0))" -v f="$((flt1 - flt0))" \
    -v hz="$hz" -v size="$size" -v m="$method" -v k="$count" -v inf="$inflight" 'BEGIN {
  bytes = (m == "Expand" ? size * k : size);
  printf "%s %d B x%d, %d in flight: %.0f calls/s, %.1f MB/s, %.1f us CPU/call, %.2f faults/call (%d ok)\n",
         m, size, k, inf, rps, rps * bytes / 1e6, c / hz * 1e6 / n, f / n, ok
}'
