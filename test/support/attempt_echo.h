// An Echo service that sees a call's attempts (test support): for tests of how a channel retries
// and times out calls (xDS routes, gRFC A31 and A44), whichever client makes them. Each attempt
// of Echo is recorded with its call's x-call-id metadata, its grpc-previous-rpc-attempts, and
// fails with UNAVAILABLE while that is under fail_attempts (with a grpc-retry-pushback-ms trailer
// when pushback_ms is set); every attempt first waits delay_ms (ending early when the call is
// cancelled). Collect, Expand and Chat are not served.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "asio/steady_timer.hpp"
#include "asio/this_coro.hpp"
#include "asio/use_awaitable.hpp"
#include "ferry/server.h"
#include "ferry/server_context.h"
#include "ferry/testing/echo.ferry.h"

namespace ferry::testing {

class AttemptEcho final : public Echo::Service {
 public:
  // Attempts numbered below this (0 for the first) fail with UNAVAILABLE.
  std::atomic<int> fail_attempts{0};
  // Each attempt's wait before it answers.
  std::atomic<int> delay_ms{0};
  // Over 0: a failed attempt asks for this wait before the next (grpc-retry-pushback-ms).
  std::atomic<int> pushback_ms{0};

  int attempts() const {
    std::lock_guard lock(mutex_);
    return static_cast<int>(seen_.size());
  }
  // The attempts of each x-call-id (calls without one under "").
  std::map<std::string, int> attempts_by_call() const {
    std::lock_guard lock(mutex_);
    std::map<std::string, int> out;
    for (const auto& [id, attempt] : seen_) ++out[id];
    return out;
  }

  asio::awaitable<absl::Status> Echo(ServerContext& ctx, const EchoRequest& request,
                                     EchoResponse& response) override {
    std::string id;
    int previous = 0;
    for (const Metadata::Entry entry : ctx.client_metadata()) {
      if (entry.first == "x-call-id") id = std::string(entry.second);
      if (entry.first == "grpc-previous-rpc-attempts") {
        (void)absl::SimpleAtoi(std::string(entry.second), &previous);
      }
    }
    {
      std::lock_guard lock(mutex_);
      seen_.emplace_back(id, previous);
    }
    const auto until =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(delay_ms.load());
    asio::steady_timer timer(co_await asio::this_coro::executor);
    while (std::chrono::steady_clock::now() < until && !ctx.is_cancelled()) {
      timer.expires_after(std::min<std::chrono::steady_clock::duration>(
          std::chrono::milliseconds(10), until - std::chrono::steady_clock::now()));
      co_await timer.async_wait(asio::use_awaitable);
    }
    if (previous < fail_attempts.load()) {
      if (pushback_ms.load() > 0) {
        ctx.add_trailing_metadata("grpc-retry-pushback-ms", std::to_string(pushback_ms.load()));
      }
      co_return absl::UnavailableError("AttemptEcho: this attempt fails");
    }
    response.set_payload(request.payload());
    co_return absl::OkStatus();
  }

 private:
  mutable std::mutex mutex_;
  std::vector<std::pair<std::string, int>> seen_;  // (x-call-id, previous attempts) per attempt
};

// An AttemptEcho server on a loopback port of its own, shut down with this object.
class AttemptBackend {
 public:
  AttemptBackend() {
    server_.add_service(service_);
    absl::StatusOr<int> port = server_.start("127.0.0.1", 0);
    port_ = port.ok() ? *port : 0;
  }
  ~AttemptBackend() { server_.shutdown(std::chrono::milliseconds(100)); }
  int port() const { return port_; }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }
  AttemptEcho& service() { return service_; }

 private:
  AttemptEcho service_;
  Server server_;
  int port_ = 0;
};

}  // namespace ferry::testing
