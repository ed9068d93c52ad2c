// load_balancing_client: calls lbdemo.Backend through one channel to several servers with
// round_robin, from --workers coroutines at once, and counts where each call went. Meant to run
// while one server is stopped:
//   1. calls until --calls_before calls were answered, by every one of --servers servers, then
//      prints "stop one server now, then press Enter" (and keeps calling);
//   2. on Enter (a line on stdin), makes --calls_after more calls;
//   3. prints the calls per server before, during and after the stop, and the failures.
// Exits 0 when no call failed, every server got calls before the stop, and exactly one (the
// stopped one) got none after it; 1 otherwise.
//   load_balancing_client --target=ipv4:127.0.0.1:P1,127.0.0.1:P2,127.0.0.1:P3 [--servers=3]
//                         [--workers=8] [--calls_before=150] [--calls_after=300]
// What makes "no call fails" hold is the channel's service config (kServiceConfig below).
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "asio/co_spawn.hpp"
#include "asio/detached.hpp"
#include "backend.ferry.h"
#include "call_tally.h"
#include "ferry/channel.h"
#include "ferry/interceptor.h"
#include "ferry/service_config.h"

ABSL_FLAG(std::string, target, "ipv4:127.0.0.1:50051,127.0.0.1:50052,127.0.0.1:50053",
          "the servers, as one gRPC target with several addresses");
ABSL_FLAG(int, servers, 3, "how many servers to wait for before the stop");
ABSL_FLAG(int, workers, 8, "calls in flight at a time");
ABSL_FLAG(int, calls_before, 150, "calls to make before the stop, at least");
ABSL_FLAG(int, calls_after, 300, "calls to make after the stop");

namespace {

using namespace std::chrono_literals;

// round_robin: one connection per address, calls spread over the READY ones in turn. A server
// that shuts down sends GOAWAY: its connection stops taking calls at once, and a call it refused
// unprocessed is retried transparently on another. For the rest:
//   waitForReady  a call made while no connection is READY waits for one (up to its timeout)
//                 instead of failing UNAVAILABLE at once;
//   retryPolicy   a call that still ends UNAVAILABLE (a connection lost under it) is made again,
//                 up to 5 attempts; Identify is idempotent, so a repeat does no harm.
constexpr char kServiceConfig[] = R"json({
  "loadBalancingConfig": [{"round_robin": {}}],
  "methodConfig": [{
    "name": [{"service": "lbdemo.Backend"}],
    "timeout": "10s",
    "waitForReady": true,
    "retryPolicy": {"maxAttempts": 5, "initialBackoff": "0.01s", "maxBackoff": "0.2s",
                    "backoffMultiplier": 2, "retryableStatusCodes": ["UNAVAILABLE"]}
  }]
})json";

// Records the attempts that failed (gRPC's per-attempt view, ferry/interceptor.h): the channel
// makes such a call again, transparently or by the retry policy, unless that was its last try.
class FailedAttempts final : public ferry::ClientInterceptor {
 public:
  explicit FailedAttempts(CallTally& tally) : tally_(tally) {}
  void on_attempt_end(ferry::ClientContext&, const ferry::CallInfo&,
                      const ferry::CallOutcome& attempt) override {
    if (!attempt.status.ok()) tally_.record_failed_attempt(attempt.status);
  }

 private:
  CallTally& tally_;
};

// Calls Identify until told to stop, recording each outcome under the phase it started in.
asio::awaitable<void> worker(lbdemo::Backend::Stub& stub, CallTally& tally) {
  const lbdemo::IdentifyRequest request;
  while (!tally.stopping()) {
    const Phase phase = tally.phase();
    ferry::ClientContext context;  // timeout and wait_for_ready: from the service config
    lbdemo::IdentifyReply reply;
    absl::Status status = co_await stub.Identify(context, request, reply);
    tally.record(phase, status, reply.server());
  }
  tally.worker_stopped();
}

// The run's three phases (see the top of the file); false, saying why, when one did not finish.
bool drive(CallTally& tally) {
  const int servers = absl::GetFlag(FLAGS_servers);
  const int calls_before = absl::GetFlag(FLAGS_calls_before);
  if (!tally.wait(30s, [&](const CallTally& t) {
        return t.calls(kBefore) >= calls_before &&
               static_cast<int>(t.by_server().size()) >= servers;
      })) {
    std::fprintf(stderr, "load_balancing_client: not %d calls answered by %d servers in 30 s\n",
                 calls_before, servers);
    return false;
  }
  tally.set_phase(kDuring);
  std::printf(
      "load_balancing_client: all %d servers answered; stop one server now, then press "
      "Enter\n",
      servers);
  std::string line;
  std::getline(std::cin, line);
  tally.set_phase(kAfter);
  const int calls_after = absl::GetFlag(FLAGS_calls_after);
  if (!tally.wait(60s, [&](const CallTally& t) { return t.calls(kAfter) >= calls_after; })) {
    std::fprintf(stderr, "load_balancing_client: %d calls after the stop took over 60 s\n",
                 calls_after);
    return false;
  }
  return true;
}

// Prints the counts and checks them; true when they show what the example promises.
bool report(const CallTally& tally) {
  int total = 0;
  for (const auto& [server, calls] : tally.by_server()) {
    std::printf("load_balancing_client: %s: %d before, %d during, %d after the stop\n",
                server.c_str(), calls[kBefore], calls[kDuring], calls[kAfter]);
    total += calls[kBefore] + calls[kDuring] + calls[kAfter];
  }
  std::printf("load_balancing_client: %d calls OK, %zu failed\n", total, tally.failures().size());
  for (const std::string& failure : tally.failures()) {
    std::printf("load_balancing_client: failed: %s\n", failure.c_str());
  }
  std::printf(
      "load_balancing_client: %zu attempts failed (and were retried unless their call "
      "failed)\n",
      tally.failed_attempts().size());
  for (const std::string& attempt : tally.failed_attempts()) {
    std::printf("load_balancing_client: attempt failed: %s\n", attempt.c_str());
  }

  std::string idle_after;  // the servers that got no call after the stop
  int idle = 0;
  for (const auto& [server, calls] : tally.by_server()) {
    if (calls[kAfter] == 0) {
      idle_after += (idle++ ? ", " : "") + server;
    }
  }
  if (!tally.failures().empty()) {
    std::printf("load_balancing_client: FAILED: calls were lost\n");
    return false;
  }
  if (idle != 1) {
    std::printf(
        "load_balancing_client: FAILED: %d servers got no call after the stop (%s); "
        "expected exactly the stopped one\n",
        idle, idle_after.c_str());
    return false;
  }
  std::printf(
      "load_balancing_client: OK: no call failed; every server got calls before the "
      "stop, %s none after it\n",
      idle_after.c_str());
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a watching script sees each line at once

  ferry::ChannelOptions options;
  if (absl::Status s = ferry::apply_service_config(kServiceConfig, options); !s.ok()) {
    std::fprintf(stderr, "load_balancing_client: %s\n", s.ToString().c_str());
    return 1;
  }
  CallTally tally;
  options.interceptors.push_back(std::make_shared<FailedAttempts>(tally));
  ferry::Channel channel(absl::GetFlag(FLAGS_target), options);
  lbdemo::Backend::Stub stub(channel);
  // The workers run on the channel's own thread, so that their calls need no hop.
  for (int i = 0; i < absl::GetFlag(FLAGS_workers); ++i) {
    tally.worker_started();
    asio::co_spawn(channel.executor(), worker(stub, tally), asio::detached);
  }
  const bool driven = drive(tally);
  // Every call has a 10 s timeout (the service config), so the workers stop within it; they use
  // the stub and the tally, which must outlive them.
  tally.stop();
  tally.wait(30s, [](const CallTally& t) { return t.workers() == 0; });
  const bool ok = report(tally);
  return driven && ok ? 0 : 1;
}
