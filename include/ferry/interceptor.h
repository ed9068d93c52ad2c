// ferry/interceptor.h: interceptors around server handlers and client calls (server and client
// layers, public): authentication, logging and metrics in one place rather than in every
// handler. An interceptor is a pair of hooks: a coroutine before the call (it sees the method,
// metadata, deadline and peer, may add metadata, and may reject the call with a status) and a
// function once the call is over (final status, duration, message counts).
//
// Registered in ServerOptions::interceptors / ChannelOptions::interceptors, they form a chain:
// the on_start hooks run in registration order, and once the call is over the on_finish hooks
// of every interceptor whose on_start ran (whatever it returned) run in reverse order. A server
// or channel with none pays nothing for the feature.
#pragma once

#include <chrono>
#include <cstddef>
#include <string_view>

#include "absl/status/status.h"
#include "asio/awaitable.hpp"
#include "ferry/client_context.h"
#include "ferry/rpc_kind.h"
#include "ferry/server_context.h"
#include "ferry/service.h"

namespace ferry {

// What an on_start hook that decides without waiting can return instead of being a coroutine
// itself: `counter.Increment(); return ferry::ready_status();`. Its coroutine frame comes from a
// per-thread pool, so such a hook costs no allocation once warm, where a coroutine hook of its
// own takes one of asio's two recycled frames per thread (the call's own frames want them) and
// may allocate per call when many calls are in flight. Any thread.
asio::awaitable<absl::Status> ready_status(absl::Status status = absl::OkStatus());

// What a call is, as the interceptors see it. Valid during the hook it is passed to.
struct CallInfo {
  std::string_view method;  // "/package.Service/Method"
  // On the client, the kind the call was opened as: generated stubs pass their method's; a call
  // opened with Channel::open(method, ctx), without a kind or a request, is kBidiStreaming.
  RpcKind kind = RpcKind::kUnary;
};

// How a call ended.
struct CallOutcome {
  // The call's final status: the handler's (or the rejecting interceptor's), or, when ferry
  // ended the call itself (deadline, cancellation, lost connection, bad message), that one.
  absl::Status status;
  // From the first on_start hook to the end of the call (on_attempt_end: from the attempt's
  // start to its end).
  std::chrono::steady_clock::duration duration{};
  // Messages sent and received on the call (received: arrived complete, read or not). For a
  // client unary call: 1 sent once it started, 1 received when it succeeded.
  std::size_t messages_sent = 0;
  std::size_t messages_received = 0;
  // Those messages' bytes as they crossed the wire: payloads after compression, without the
  // 5-byte gRPC message prefix or any HTTP/2 framing (gRPC's "compressed message size"). In
  // on_finish, a client call that was retried reports its last attempt (on_attempt_end reports
  // each).
  std::size_t bytes_sent = 0;
  std::size_t bytes_received = 0;
};

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

  // Once the handler returned (or the call was rejected): before ferry sends the status, so it
  // may still add trailing metadata. Must not block. Default: nothing.
  virtual void on_finish(ServerContext& ctx, const CallInfo& call, const CallOutcome& outcome) {
    (void)ctx;
    (void)call;
    (void)outcome;
  }
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
};

}  // namespace ferry
