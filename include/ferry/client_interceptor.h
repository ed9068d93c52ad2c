// ferry/client_interceptor.h: the interface of a client interceptor (client layer, public), a
// pair of hooks around every call, and a pair around each attempt. Users include
// ferry/interceptor.h, which says how the chain runs; this part of it is what the client layer
// may see.
#pragma once

#include <optional>

#include "absl/status/status.h"
#include "asio/awaitable.hpp"
#include "ferry/call_info.h"
#include "ferry/client_context.h"

namespace ferry {

// What happened to one of a channel's connections (gRFC A94's subchannel metrics).
enum class ConnectionEvent {
  kAttemptSucceeded,  // a connection attempt ended READY (the server's SETTINGS came): it is open
  kAttemptFailed,     // a connection attempt failed (not one the channel's shutdown cut short)
  kDisconnected,      // the subchannel stopped using its open connection (disconnect_error: why)
  kClosed,            // a connection kAttemptSucceeded opened has closed (its calls are over)
};

struct ConnectionInfo {
  std::string_view target;  // the channel's, as CallInfo::target
  // kDisconnected: gRFC A94's grpc.disconnect_error, "GOAWAY <code>" ("GOAWAY NO_ERROR", ...; a
  // code RFC 9113 does not define is "unknown"), "subchannel shutdown", or "unknown" (the
  // connection closed: ferry does not tell a reset from other socket errors). Else empty.
  std::string_view disconnect_error;
};

// Client interceptors run on the channel's executor. Must outlive the channel (ChannelOptions
// holds them by shared_ptr).
class ClientInterceptor {
 public:
  virtual ~ClientInterceptor() = default;

  // Before the call is sent: may add metadata (ctx.add_metadata) or change the deadline. A
  // non-OK status rejects the call: nothing is sent and the call fails with that status (a
  // unary call returns it, a stream's reads fail and finish() returns it). Default: OK.
  virtual asio::awaitable<absl::Status> on_start(ClientContext& ctx, const CallInfo& call) {
    (void)ctx;
    (void)call;
    return ready_status();
  }

  // Optional, for an interceptor whose on_start never waits (one that records or reads the
  // call, as ferry::metrics and ferry::tracing do): on_start's decision, made here without a
  // coroutine. The chain calls it first and runs on_start only when it returns std::nullopt
  // (the default), so an interceptor that overrides it must return on_start's status for every
  // call it answers. Saves the coroutine and its await on every call.
  virtual std::optional<absl::Status> start_now(ClientContext& ctx, const CallInfo& call) {
    (void)ctx;
    (void)call;
    return std::nullopt;
  }

  // Whether on_attempt_end and on_finish read CallOutcome's duration and retry_delay. When no
  // interceptor of the channel does, its calls read no clock for them (both are 0). Asked once,
  // as the channel is made. Default: true.
  virtual bool uses_duration() const { return true; }

  // Once the call's status is final, which is the status the application gets: for a stream,
  // when the server's status arrives or the call is cancelled, whether or not the application
  // called finish(); when responses are still unread then (one may yet fail to parse), once the
  // last is read, finish() returns or the stream is dropped. The server's metadata is in ctx by
  // then. Must not block. Default: nothing.
  virtual void on_finish(ClientContext& ctx, const CallInfo& call, const CallOutcome& outcome) {
    (void)ctx;
    (void)call;
    (void)outcome;
  }

  // Per attempt (gRPC's grpc.client.attempt.* metrics): a call makes one attempt, or more when
  // its method's retry policy retries it or a transparent retry resends what the server never
  // saw. on_attempt_start runs as each attempt starts; on_attempt_end once its status is known,
  // with its own duration, messages and bytes; the last attempt's end comes just before
  // on_finish. Both run between the call's on_start and on_finish, and not for a call an
  // interceptor rejected. Must not block. Default: nothing.
  virtual void on_attempt_start(ClientContext& ctx, const CallInfo& call) {
    (void)ctx;
    (void)call;
  }
  virtual void on_attempt_end(ClientContext& ctx, const CallInfo& call,
                              const CallOutcome& attempt) {
    (void)ctx;
    (void)call;
    (void)attempt;
  }

  // A connection event of the channel, on its executor, not per call: a few per connection.
  // Must not block. Default: nothing.
  virtual void on_connection_event(ConnectionEvent event, const ConnectionInfo& info) {
    (void)event;
    (void)info;
  }
};

}  // namespace ferry
