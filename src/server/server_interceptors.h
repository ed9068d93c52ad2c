// The server's interceptor chain (server layer, private): the on_start hooks before a handler
// and the on_finish hooks after it, run by the handler runners (server/handler_runners.h) in
// their own coroutine, so that a chain whose hooks decide at once (ServerInterceptor::start_now:
// metrics, tracing, authorization) costs a call no coroutine frame of its own. A server without
// interceptors has no chain and runs its handlers as before.
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "ferry/call_info.h"
#include "ferry/server_interceptor.h"

namespace ferry::detail {

class ServerInterceptorChain {
 public:
  explicit ServerInterceptorChain(std::vector<std::shared_ptr<ServerInterceptor>> interceptors)
      : interceptors_(std::move(interceptors)) {
    for (const auto& interceptor : interceptors_) timed_ = timed_ || interceptor->uses_duration();
  }

  // One call's way through the chain, kept in the runner's frame.
  struct Pass {
    std::chrono::steady_clock::time_point started;  // when timed_
    CallInfo info;
    std::size_t entered = 0;  // interceptors whose on_start ran: their on_finish runs
    absl::Status status;      // the on_start hooks' verdict so far: the handler runs when ok
  };

  // The call's pass, its clock started when an interceptor reads durations
  // (ServerInterceptor::uses_duration).
  Pass begin(const ServerContext& ctx, RpcKind kind) const;
  // Runs the on_start hooks from the next one on while they decide at once and accept (an
  // exception is UNKNOWN). Returns the interceptor whose on_start coroutine the caller must
  // await next, its result going to pass.status (an exception: thrown_status("interceptor
  // on_start")), then call again; null once the hooks are done: pass.status ok runs the handler.
  ServerInterceptor* start_next(ServerContext& ctx, Pass& pass) const;
  // The on_finish hooks of the interceptors entered, in reverse order, with the call's outcome
  // (what went or goes to the client, read from the call); returned is the handler's status, or
  // the rejection. Their exceptions are swallowed: too late to change the status.
  void finish(ServerContext& ctx, Pass& pass, const absl::Status& returned) const;

  // The status for the exception being handled, thrown by `where` ("handler threw: ...").
  static absl::Status thrown_status(const char* where);

 private:
  std::vector<std::shared_ptr<ServerInterceptor>> interceptors_;
  bool timed_ = false;  // an interceptor reads CallOutcome::duration: the chain times calls
};

}  // namespace ferry::detail
