// ferry/server_interceptor.h: the interface of a server interceptor (server layer, public), a
// pair of hooks around every handler. Users include ferry/interceptor.h, which says how the
// chain runs; this part of it is what the server layer may see.
#pragma once

#include <optional>

#include "absl/status/status.h"
#include "asio/awaitable.hpp"
#include "ferry/call_info.h"
#include "ferry/server_context.h"

namespace ferry {

// Server interceptors run on the call's I/O thread, in the handler's coroutine; they are shared
// by every call of every thread, so what they keep must be thread-safe. Must outlive the server
// (ServerOptions holds them by shared_ptr).
class ServerInterceptor {
 public:
  virtual ~ServerInterceptor() = default;

  // Before the handler. ctx gives the method, client metadata, deadline and peer, and takes
  // metadata for the response (add_initial_metadata, add_trailing_metadata). A non-OK status
  // rejects the call: the later interceptors' on_start and the handler do not run, and the call
  // ends with that status. Default: OK. The request of a unary or server-streaming call has
  // arrived by then; a streaming call's messages are still the handler's to read.
  virtual asio::awaitable<absl::Status> on_start(ServerContext& ctx, const CallInfo& call) {
    (void)ctx;
    (void)call;
    return ready_status();
  }

  // Optional, for an interceptor whose on_start never waits (one that records or reads the
  // call, as ferry::metrics and ferry::tracing do): on_start's decision, made here without a
  // coroutine. The chain calls it first and runs on_start only when it returns std::nullopt
  // (the default), so an interceptor that overrides it must return on_start's status for every
  // call it answers. Saves the coroutine and its await on every call.
  virtual std::optional<absl::Status> start_now(ServerContext& ctx, const CallInfo& call) {
    (void)ctx;
    (void)call;
    return std::nullopt;
  }

  // Whether on_finish reads CallOutcome::duration. When no interceptor of the server's chain
  // does, the chain reads no clock for a call and duration is 0. Asked once, as the server
  // starts. Default: true.
  virtual bool uses_duration() const { return true; }

  // Once the handler returned (or the call was rejected): before ferry sends the status, so it
  // may still add trailing metadata. Must not block. Default: nothing.
  virtual void on_finish(ServerContext& ctx, const CallInfo& call, const CallOutcome& outcome) {
    (void)ctx;
    (void)call;
    (void)outcome;
  }
};

}  // namespace ferry
