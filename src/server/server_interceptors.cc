// Implementation of src/server/server_interceptors.h.
#include "server/server_interceptors.h"

#include <chrono>
#include <exception>
#include <optional>

#include "absl/strings/str_cat.h"
#include "server/server_call.h"

namespace ferry::detail {
namespace {

absl::Status thrown(const char* where) {
  try {
    throw;
  } catch (const std::exception& e) {
    return absl::UnknownError(absl::StrCat(where, " threw: ", e.what()));
  } catch (...) {
    return absl::UnknownError(absl::StrCat(where, " threw an exception"));
  }
}

}  // namespace

MethodHandler ServerInterceptorChain::wrap(MethodHandler handler, RpcKind kind) const {
  return [this, kind, h = std::move(handler)](ServerContext& ctx) {
    return run(RecycledFrame{}, *this, ctx, kind, h);
  };
}

asio::awaitable<absl::Status> ServerInterceptorChain::run(RecycledFrame,
                                                          const ServerInterceptorChain& chain,
                                                          ServerContext& ctx, RpcKind kind,
                                                          const MethodHandler& handler) {
  const auto& interceptors = chain.interceptors_;
  using Clock = std::chrono::steady_clock;
  // No clock for a chain that reads no duration (ServerInterceptor::uses_duration).
  const Clock::time_point started = chain.timed_ ? Clock::now() : Clock::time_point();
  const CallInfo info{ctx.method(), kind};
  absl::Status status;
  std::size_t entered = 0;  // interceptors whose on_start ran: their on_finish runs
  while (entered < interceptors.size() && status.ok()) {
    ServerInterceptor& interceptor = *interceptors[entered++];
    try {
      // A decision made at once (start_now) costs no coroutine; else on_start's.
      std::optional<absl::Status> now = interceptor.start_now(ctx, info);
      if (now.has_value()) {
        status = *std::move(now);
      } else {
        status = co_await interceptor.on_start(ctx, info);
      }
    } catch (...) {
      status = thrown("interceptor on_start");
    }
  }
  if (status.ok()) {
    try {
      status = co_await handler(ctx);
    } catch (...) {
      status = thrown("handler");
    }
  }
  const ServerCall& call = *ctx.call_;
  CallOutcome outcome;
  // What goes (or went) to the client: when the handler or ferry ended the call already
  // (ServerContext::finish, deadline, cancellation, bad message), that status, whatever the
  // handler returned afterwards.
  outcome.status = call.final_status(status);
  if (chain.timed_) outcome.duration = Clock::now() - started;
  outcome.messages_sent = call.messages_sent();
  outcome.messages_received = call.messages_received();
  outcome.bytes_sent = call.message_bytes_sent();
  outcome.bytes_received = call.message_bytes_received();
  while (entered > 0) {
    try {
      interceptors[--entered]->on_finish(ctx, info, outcome);
    } catch (...) {
      // Too late to change the status; an observer's failure must not take the call down.
    }
  }
  co_return status;
}

}  // namespace ferry::detail
