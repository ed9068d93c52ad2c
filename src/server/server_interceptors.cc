// Implementation of src/server/server_interceptors.h.
#include "server/server_interceptors.h"

#include <exception>
#include <optional>

#include "absl/strings/str_cat.h"
#include "server/server_call.h"

namespace ferry::detail {

absl::Status ServerInterceptorChain::thrown_status(const char* where) {
  try {
    throw;
  } catch (const std::exception& e) {
    return absl::UnknownError(absl::StrCat(where, " threw: ", e.what()));
  } catch (...) {
    return absl::UnknownError(absl::StrCat(where, " threw an exception"));
  }
}

ServerInterceptorChain::Pass ServerInterceptorChain::begin(const ServerContext& ctx,
                                                           RpcKind kind) const {
  using Clock = std::chrono::steady_clock;
  Pass pass;
  // No clock for a chain that reads no duration (ServerInterceptor::uses_duration).
  if (timed_) pass.started = Clock::now();
  pass.info.method = ctx.method();
  pass.info.kind = kind;
  return pass;
}

ServerInterceptor* ServerInterceptorChain::start_next(ServerContext& ctx, Pass& pass) const {
  while (pass.entered < interceptors_.size() && pass.status.ok()) {
    ServerInterceptor& interceptor = *interceptors_[pass.entered++];
    try {
      // A decision made at once (start_now) costs no coroutine; else on_start's, awaited by the
      // caller.
      std::optional<absl::Status> now = interceptor.start_now(ctx, pass.info);
      if (!now.has_value()) return &interceptor;
      pass.status = *std::move(now);
    } catch (...) {
      pass.status = thrown_status("interceptor on_start");
    }
  }
  return nullptr;
}

void ServerInterceptorChain::finish(ServerContext& ctx, Pass& pass,
                                    const absl::Status& returned) const {
  const ServerCall& call = *ctx.call_;
  CallOutcome outcome;
  // What goes (or went) to the client: when the handler or ferry ended the call already
  // (ServerContext::finish, deadline, cancellation, bad message), that status, whatever the
  // handler returned afterwards.
  outcome.status = call.final_status(returned);
  if (timed_) outcome.duration = std::chrono::steady_clock::now() - pass.started;
  outcome.messages_sent = call.messages_sent();
  outcome.messages_received = call.messages_received();
  outcome.bytes_sent = call.message_bytes_sent();
  outcome.bytes_received = call.message_bytes_received();
  while (pass.entered > 0) {
    try {
      interceptors_[--pass.entered]->on_finish(ctx, pass.info, outcome);
    } catch (...) {
      // Too late to change the status; an observer's failure must not take the call down.
    }
  }
}

}  // namespace ferry::detail
