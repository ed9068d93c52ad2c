// ferry/call_info.h: what the interceptors of both ends are told of a call (calls layer,
// public): what it is (CallInfo), how it ended (CallOutcome), and ready_status, the recycled
// coroutine a hook that decides at once returns. Users include ferry/interceptor.h, which holds
// this and both interceptor interfaces (ferry/server_interceptor.h, ferry/client_interceptor.h).
#pragma once

#include <chrono>
#include <cstddef>
#include <string_view>

#include "absl/status/status.h"
#include "asio/awaitable.hpp"
#include "ferry/rpc_kind.h"

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
  // On the client, the channel's target as gRFC A66 canonicalizes it for its grpc.target label:
  // as written when it has a scheme ("dns:", "unix:", "ipv4:" ...), else "dns:///" + target.
  // Lives as long as the channel. Empty on the server.
  std::string_view target;
  // Client on_attempt_start only (gRFC A72's attempt attributes): the attempts made before this
  // one, transparent retries not counted (what grpc-previous-rpc-attempts tells the server), and
  // whether this attempt is a transparent retry (the one before never reached the server's
  // application).
  int previous_attempts = 0;
  bool transparent_retry = false;
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
  // Client on_finish only (gRFC A96): the attempts after the first that the method's retry
  // policy made, those made as transparent retries (the one before never reached the server's
  // application), and the time the call spent with no attempt open between its first attempt's
  // start and its end (the retries' backoff; 0 without retries).
  int retries = 0;
  int transparent_retries = 0;
  std::chrono::steady_clock::duration retry_delay{};
};

}  // namespace ferry
