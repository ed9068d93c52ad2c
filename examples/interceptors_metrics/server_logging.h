// server_logging.h: the interceptors_metrics example's server interceptor: one log line as each
// call starts and one as it ends (status, time, messages), tagged with the client's
// x-request-id, which it also returns in the trailers so that the client can match them up.
#pragma once

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

#include "ferry/interceptor.h"

class ServerLogging final : public ferry::ServerInterceptor {
 public:
  // On the call's I/O thread, before the handler.
  asio::awaitable<absl::Status> on_start(ferry::ServerContext& ctx,
                                         const ferry::CallInfo& call) override {
    const std::string id = request_id(ctx);
    std::printf("[server] %.*s from %s: started (request %s)\n",
                static_cast<int>(call.method.size()), call.method.data(), ctx.peer().c_str(),
                id.c_str());
    ctx.add_trailing_metadata("x-request-id", id);
    // Decides without waiting: ready_status() spares the hook a coroutine frame of its own.
    return ferry::ready_status();
  }

  // Once the handler returned, before the status goes out. Must not block.
  void on_finish(ferry::ServerContext& ctx, const ferry::CallInfo& call,
                 const ferry::CallOutcome& outcome) override {
    const double ms = std::chrono::duration<double, std::milli>(outcome.duration).count();
    std::printf("[server] %.*s: %s in %.3f ms, %zu received, %zu sent (request %s)\n",
                static_cast<int>(call.method.size()), call.method.data(),
                outcome.status.ToString().c_str(), ms, outcome.messages_received,
                outcome.messages_sent, request_id(ctx).c_str());
  }

 private:
  static std::string request_id(const ferry::ServerContext& ctx) {
    std::optional<std::string_view> id = ctx.client_metadata().get("x-request-id");
    return id ? std::string(*id) : std::string("none");
  }
};
