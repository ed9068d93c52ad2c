// bench/echo_client: ferry's own channel as a load generator against a server in another
// process (bench/echo_server, or any ferry.testing.Echo server), so that client and server can
// be pinned to different cores. Makes CALLS unary echoes of PAYLOAD bytes over one connection,
// IN_FLIGHT at a time, after a warm-up, and prints one line: calls/s, the client's CPU µs per
// call (its one thread) and p50 latency. bench/pipeline_ab.py reads it.
//
//   echo_client HOST:PORT CALLS IN_FLIGHT [PAYLOAD_BYTES=16]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <string>
#include <vector>

#include "asio/co_spawn.hpp"
#include "asio/detached.hpp"
#include "asio/io_context.hpp"
#include "ferry/channel.h"
#include "ferry/testing/echo.ferry.h"

namespace {

using Clock = std::chrono::steady_clock;

double cpu_seconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

struct Load {
  ferry::testing::Echo::Stub* stub;
  std::string payload;
  int remaining = 0;  // calls not yet started
  int running = 0;    // coroutines still going
  bool failed = false;
  std::vector<double>* latencies = nullptr;
};

asio::awaitable<void> worker(Load& load) {
  ferry::testing::EchoRequest request;
  request.set_payload(load.payload);
  ferry::testing::EchoResponse response;
  while (load.remaining > 0 && !load.failed) {
    --load.remaining;
    ferry::ClientContext ctx;
    const auto start = Clock::now();
    const absl::Status s = co_await load.stub->Echo(ctx, request, response);
    if (!s.ok() || response.payload().size() != load.payload.size()) {
      std::fprintf(stderr, "echo_client: call failed: %s\n", s.ToString().c_str());
      load.failed = true;
    }
    if (load.latencies != nullptr) {
      load.latencies->push_back(
          std::chrono::duration<double, std::micro>(Clock::now() - start).count());
    }
  }
  --load.running;
}

// Runs `calls` calls, in_flight at a time, on io until all are done.
bool run(asio::io_context& io, Load& load, int calls, int in_flight) {
  load.remaining = calls;
  load.running = in_flight;
  for (int i = 0; i < in_flight; ++i) asio::co_spawn(io, worker(load), asio::detached);
  while (load.running > 0) io.run_one();
  return !load.failed;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s HOST:PORT CALLS IN_FLIGHT [PAYLOAD_BYTES]\n", argv[0]);
    return 2;
  }
  const int calls = std::atoi(argv[2]);
  const int in_flight = std::max(1, std::atoi(argv[3]));
  const std::size_t payload = argc > 4 ? std::strtoul(argv[4], nullptr, 10) : 16;

  asio::io_context io(1);
  ferry::Channel channel(io, argv[1]);
  ferry::testing::Echo::Stub stub(channel);
  Load load{&stub, std::string(payload, 'p')};
  if (!run(io, load, std::max(in_flight * 4, calls / 10), in_flight)) return 1;  // warm-up

  std::vector<double> latencies;
  latencies.reserve(static_cast<std::size_t>(calls) + static_cast<std::size_t>(in_flight));
  load.latencies = &latencies;
  const double cpu0 = cpu_seconds();
  const auto start = Clock::now();
  if (!run(io, load, calls, in_flight)) return 1;
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const double cpu = cpu_seconds() - cpu0;
  std::sort(latencies.begin(), latencies.end());
  const double p50 = latencies.empty() ? 0 : latencies[latencies.size() / 2];
  std::printf("calls %d seconds %.6f calls_per_s %.0f client_cpu_us_per_call %.3f p50_us %.1f\n",
              calls, seconds, calls / seconds, cpu * 1e6 / calls, p50);
  return 0;
}
