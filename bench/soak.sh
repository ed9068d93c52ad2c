#!/usr/bin/env bash
# The soak (issue #26; not in the test command): test/faults' soak_client makes mixed calls
# (unary, client-, server- and bidi-streaming, each with a deadline) for an hour against
# fault_server through toxiproxy, under a random fault schedule, both from the sanitizer build.
# Every 10-40 s one fault at random, removed after a while: latency 200 ms, a bandwidth limit,
# slicer, a black hole (timeout toxic) for a few seconds, reset_peer, limit_data, or the server
# SIGKILLed and restarted on the same port. Prints, every minute, the calls made, failures by
# status, and RSS and descriptors of client and server; at the end the totals and both
# processes' RSS and descriptors at start and end.
#
#   bench/soak.sh [--seconds=3600] [--build=build-sanitize] [--peers=build/peers]
#                 [--in-flight=16] [--report=60] [--out=DIR]
#
# The build: scripts/test.sh's sanitizer configuration (clang, Debug, -g1, FERRY_SANITIZE=ON),
# targets fault_server and soak_client. Exits non-zero on a sanitizer report from either
# process (printed), a call past its deadline (the client's HUNG line), a minute without a
# completed call or a client that stops reporting (its threads' stacks printed, from gdb), or a
# client that dies. Logs stay in DIR (default: a new directory under /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=3600
build=build-sanitize
peers=build/peers
in_flight=16
out=""
report=60
for arg in "$@"; do
  case "$arg" in
    --seconds=*) seconds=${arg#*=} ;;
    --build=*) build=${arg#*=} ;;
    --peers=*) peers=${arg#*=} ;;
    --in-flight=*) in_flight=${arg#*=} ;;
    --out=*) out=${arg#*=} ;;
    --report=*) report=${arg#*=} ;;
    *) sed -n '11,12p' "$0" | sed 's/^# *//' >&2; exit 2 ;;
  esac
done
fault_server="$build/test/faults/fault_server"
soak_client="$build/test/faults/soak_client"
toxiproxy="$peers/bin/toxiproxy-server"
for f in "$fault_server" "$soak_client" "$toxiproxy"; do
  [ -x "$f" ] || { echo "soak: $f not found (build it; scripts/install_peers.sh)" >&2; exit 2; }
done
out=${out:-$(mktemp -d /tmp/ferry-soak.XXXXXX)}
mkdir -p "$out"

# Both ferry processes write any sanitizer report to $out/sanitizer.<pid> and abort.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:strict_string_checks=1:log_path=$out/sanitizer"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$out/sanitizer"

start_time=$SECONDS
elapsed() { echo $((SECONDS - start_time)); }
log() { echo "[$(date -u +%H:%M:%S) t=$(elapsed)s] $*"; }
free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2>/dev/null || echo "-"; }
fds() { (ls "/proc/$1/fd" 2>/dev/null || echo -n) | wc -l; }
sanitizer_reports() { compgen -G "$out/sanitizer.*" >/dev/null; }

pids=()
cleanup() {
  touch "$out/stop"
  for pid in "${pids[@]}" $(cat "$out/server.pid" 2>/dev/null); do kill -9 "$pid" 2>/dev/null || true; done
}
trap cleanup EXIT

# toxiproxy, with its API on a free port.
api_port=$(free_port)
"$toxiproxy" -host 127.0.0.1 -port "$api_port" >"$out/toxiproxy.log" 2>&1 &
pids+=($!)
api="http://127.0.0.1:$api_port"
for _ in $(seq 50); do curl -sf "$api/version" >/dev/null && break; sleep 0.1; done
curl -sf "$api/version" >/dev/null || { echo "soak: toxiproxy did not start" >&2; exit 1; }

# start_server PORT: fault_server on PORT (0: a free one); its pid goes to $out/server.pid and
# the port it bound to $out/server.port. Each start logs to server.<n>.{out,err}. A SIGKILLed
# server's socket may still hold the port for a moment: a failed bind is tried again for 10 s.
start_server() {
  local n pid
  for _ in $(seq 50); do
    n=$(find "$out" -maxdepth 1 -name 'server.*.out' | wc -l)
    "$fault_server" --port="$1" >"$out/server.$n.out" 2>"$out/server.$n.err" &
    pid=$!
    for _ in $(seq 100); do
      grep -qs '^port ' "$out/server.$n.out" && break
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    if grep -qs '^port ' "$out/server.$n.out"; then
      awk '/^port / {print $2}' "$out/server.$n.out" >"$out/server.port"
      echo "$pid" >"$out/server.pid"
      return 0
    fi
    grep -qs 'Address already in use' "$out/server.$n.err" || break
    sleep 0.2
  done
  echo "soak: fault_server did not start" >&2
  cat "$out/server.$n.err" >&2
  return 1
}
start_server 0
server_port=$(cat "$out/server.port")
proxy_port=$(free_port)
curl -sf -X POST "$api/proxies" -d "{\"name\":\"soak\",\"listen\":\"127.0.0.1:$proxy_port\",\"upstream\":\"127.0.0.1:$server_port\",\"enabled\":true}" >/dev/null

# The fault schedule, in the background until $out/stop appears.
toxic() {  # toxic TYPE STREAM ATTRIBUTES_JSON
  curl -sf -X POST "$api/proxies/soak/toxics" \
    -d "{\"name\":\"fault\",\"type\":\"$1\",\"stream\":\"$2\",\"toxicity\":1,\"attributes\":$3}" >/dev/null
}
untoxic() { curl -sf -X DELETE "$api/proxies/soak/toxics/fault" >/dev/null || true; }
pause() {  # pause SECONDS: returns 1 early once told to stop
  for _ in $(seq "$1"); do [ -e "$out/stop" ] && return 1; sleep 1; done
  return 0
}
fault_schedule() {
  local kinds=(latency bandwidth slicer timeout reset_peer limit_data kill)
  while pause $((10 + RANDOM % 31)); do
    local kind=${kinds[RANDOM % ${#kinds[@]}]} stream hold
    stream=$([ $((RANDOM % 2)) -eq 0 ] && echo downstream || echo upstream)
    case "$kind" in
      latency) hold=$((5 + RANDOM % 16)); toxic latency "$stream" '{"latency":200,"jitter":20}' ;;
      bandwidth) hold=$((5 + RANDOM % 16)); toxic bandwidth "$stream" '{"rate":256}' ;;
      slicer) hold=$((5 + RANDOM % 16))
        toxic slicer "$stream" '{"average_size":64,"size_variation":48,"delay":100}' ;;
      timeout) hold=$((2 + RANDOM % 7)); toxic timeout "$stream" '{"timeout":0}' ;;
      reset_peer) hold=$((1 + RANDOM % 4)); toxic reset_peer "$stream" '{"timeout":0}' ;;
      limit_data) hold=$((3 + RANDOM % 8))
        toxic limit_data "$stream" "{\"bytes\":$((100 + RANDOM % 50000))}" ;;
      kill) hold=$((RANDOM % 3)); stream=""
        kill -9 "$(cat "$out/server.pid")" 2>/dev/null || true ;;
    esac
    log "fault: $kind $stream for ${hold}s"
    pause "$hold" || true
    if [ "$kind" = kill ]; then
      start_server "$server_port" || { log "fault_server did not come back"; touch "$out/server-failed"; return; }
      log "fault_server restarted (pid $(cat "$out/server.pid"))"
    else
      untoxic
    fi
  done
  untoxic
}

"$soak_client" --target="127.0.0.1:$proxy_port" --seconds="$seconds" --in-flight="$in_flight" \
  --report="$report" >"$out/client.out" 2>"$out/client.err" &
client_pid=$!
pids+=("$client_pid")
sleep 1
server_pid=$(cat "$out/server.pid")
start_line="client rss_kib=$(rss_kib "$client_pid") fds=$(fds "$client_pid"); server rss_kib=$(rss_kib "$server_pid") fds=$(fds "$server_pid")"
log "soak: $seconds s, $in_flight calls in flight, logs in $out; at start: $start_line"
fault_schedule > >(tee -a "$out/faults.log") &
fault_pid=$!

# dump_stacks PID: every thread's stack, for a hang.
dump_stacks() {
  gdb -p "$1" -batch -ex 'thread apply all bt' 2>/dev/null | grep -E '^(Thread|#)' | head -200 || true
}
status=0
seen=0
last_calls=0
last_report=$SECONDS
# drain: prints the client's new lines, each report with the server's figures beside it; a
# report without a call completed since the one before, or a hung call, fails the run.
drain() {
  local lines line calls
  lines=$(wc -l <"$out/client.out")
  if [ "$lines" -gt "$seen" ]; then
    while IFS= read -r line; do
      case "$line" in
        t=*)
          server_pid=$(cat "$out/server.pid")
          echo "$line server_rss_kib=$(rss_kib "$server_pid") server_fds=$(fds "$server_pid")"
          calls=$(sed -E 's/.* calls=([0-9]+).*/\1/' <<<"$line")
          if [ "$calls" -le "$last_calls" ]; then
            log "FAIL: no call completed in the last minute"; dump_stacks "$client_pid"; status=1
          fi
          last_calls=$calls
          last_report=$SECONDS ;;
        *HUNG*) echo "$line"; dump_stacks "$client_pid"; status=1 ;;
        *) echo "$line" ;;
      esac
    done < <(sed -n "$((seen + 1)),${lines}p" "$out/client.out")
    seen=$lines
  fi
}
while true; do
  sleep 2
  drain
  if sanitizer_reports; then log "FAIL: sanitizer report"; status=1; break; fi
  [ -e "$out/server-failed" ] && { status=1; break; }
  if ! kill -0 "$client_pid" 2>/dev/null; then break; fi
  if [ $((SECONDS - last_report)) -gt $((report + 60)) ]; then
    log "FAIL: the client has not reported for $((SECONDS - last_report)) s"
    dump_stacks "$client_pid"
    status=1
    break
  fi
  [ "$status" -eq 0 ] || break
done
# The end: the last figures, then each process stopped (the client has exited by itself unless
# the run failed), the server gracefully so that LeakSanitizer looks at it.
drain
touch "$out/stop"
wait "$fault_pid" || true
server_pid=$(cat "$out/server.pid")
client_status=0
if kill -0 "$client_pid" 2>/dev/null && [ "$status" -ne 0 ]; then kill -9 "$client_pid"; fi
wait "$client_pid" || client_status=$?
end_line="client $(grep '^total' "$out/client.out" | sed -E 's/.*(rss_kib=[0-9]+ fds=[0-9]+).*/\1/'); server rss_kib=$(rss_kib "$server_pid") fds=$(fds "$server_pid")"
kill -TERM "$server_pid" 2>/dev/null || true
for _ in $(seq 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$server_pid" 2>/dev/null && { log "FAIL: fault_server did not stop on SIGTERM"; status=1; }
[ "$client_status" -eq 0 ] || { log "FAIL: soak_client exited $client_status"; status=1; }
cat "$out/client.err"

echo "== Soak summary ($(elapsed) s, logs in $out)"
grep '^total' "$out/client.out" || echo "no totals (the client did not finish)"
echo "faults: $(grep -c 'fault:' "$out/faults.log" || true) ($(grep -o 'fault: [a-z_]*' "$out/faults.log" | sort | uniq -c | awk '{printf "%s %s, ", $3, $1}' | sed 's/, $//'))"
echo "start: $start_line"
echo "end:   $end_line"
echo "(the server's figures are its latest instance's: it was restarted $(grep -c 'restarted' "$out/faults.log" || true) times)"
sleep 1  # LeakSanitizer's report of the stopped server, if any
if sanitizer_reports; then
  echo "== Sanitizer reports"
  cat "$out"/sanitizer.*
  status=1
fi
echo "soak: $([ "$status" -eq 0 ] && echo passed || echo FAILED)"
exit "$status"
