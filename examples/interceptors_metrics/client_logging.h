// client_logging.h: the interceptors_metrics example's client interceptor: gives each call an
// x-request-id (metadata the server sees), and logs the call's end with its status, time,
// messages and the request id the server's trailers returned.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "ferry/interceptor.h"

class ClientLogging final : public ferry::ClientInterceptor {
 public:
  // On the channel's executor, before anything is sent.
  asio::awaitable<absl::Status> on_start(ferry::ClientContext& ctx,
                                         const ferry::CallInfo&) override {
    ctx.add_metadata("x-request-id", "client-" + std::to_string(++calls_));
    return ferry::ready_status();
  }

  // Once the call's status is final (the one the application gets). Must not block.
  void on_finish(ferry::ClientContext& ctx, const ferry::CallInfo& call,
                 const ferry::CallOutcome& outcome) override {
    const double ms = std::chrono::duration<double, std::milli>(outcome.duration).count();
    std::printf(
        "[client] %.*s: %s in %.3f ms, %zu sent, %zu received (request %s, server "
        "echoed %s)\n",
        static_cast<int>(call.method.size()), call.method.data(), outcome.status.ToString().c_str(),
        ms, outcome.messages_sent, outcome.messages_received,
        value(ctx.metadata(), "x-request-id").c_str(),
        value(ctx.trailing_metadata(), "x-request-id").c_str());
  }

 private:
  static std::string value(const ferry::Metadata& metadata, std::string_view key) {
    std::optional<std::string_view> v = metadata.get(key);
    return v ? std::string(*v) : std::string("none");
  }

  std::atomic<int> calls_{0};  // atomic: one instance may serve several channels, on their threads
};
