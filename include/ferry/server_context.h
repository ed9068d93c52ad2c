// ferry/server_context.h: what a server handler knows of and can do to its call (server layer,
// public): the client's metadata, the deadline, cancellation, metadata to send back, the call's
// protobuf Arena, and the type-erased message operations the typed readers and writers
// (server_stream.h) forward to.
//
// Threading: a call belongs to its connection's thread; use its ServerContext only from the
// handler coroutine, which ferry runs on that thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "absl/status/status.h"
#include "asio/awaitable.hpp"
#include "asio/use_awaitable.hpp"
#include "ferry/completion.h"
#include "ferry/compression.h"
#include "ferry/metadata.h"
#include "ferry/tls.h"
#include "ferry/trace_context.h"

namespace google::protobuf {
class Arena;
class MessageLite;
}  // namespace google::protobuf

namespace ferry {

class ClientContext;
class SliceChain;

namespace detail {
class CancellationLink;
class ServerCall;
class ServerInterceptorChain;
}  // namespace detail

// A callback registered with ServerContext::on_cancel; destroying (or reset()ting) it
// unregisters the callback, which then neither runs nor is running. Move-only; any thread.
class CancellationRegistration {
 public:
  CancellationRegistration() = default;
  CancellationRegistration(CancellationRegistration&& other) noexcept
      : link_(std::move(other.link_)), id_(std::exchange(other.id_, 0)) {}
  CancellationRegistration& operator=(CancellationRegistration&& other) noexcept {
    if (this != &other) {
      reset();
      link_ = std::move(other.link_);
      id_ = std::exchange(other.id_, 0);
    }
    return *this;
  }
  ~CancellationRegistration() { reset(); }
  void reset();

 private:
  friend class ServerContext;
  CancellationRegistration(std::shared_ptr<detail::CancellationLink> link, std::uint64_t id)
      : link_(std::move(link)), id_(id) {}

  std::shared_ptr<detail::CancellationLink> link_;
  std::uint64_t id_ = 0;  // 0: nothing registered (or it ran already)
};

// What an authorization interceptor (ferry/authz.h) decided for a call, for the interceptors
// after it, the handler and the on_finish hooks (metrics, logs).
struct CallAuthorization {
  enum class Decision : std::uint8_t { kNotEvaluated, kAllowed, kDenied };
  Decision decision = Decision::kNotEvaluated;
  std::string_view policy;  // the policy's name
  std::string_view rule;    // the rule that decided; "" when denied for want of an allow rule
};

class ServerContext {
 public:
  // "/package.Service/Method".
  std::string_view method() const;
  // The client's custom metadata (-bin values decoded to raw bytes), and on a retried call
  // grpc-previous-rpc-attempts (the attempts made before this one).
  const Metadata& client_metadata() const;
  // The client's deadline (from grpc-timeout); time_point::max() when it set none. When it
  // passes, ferry ends the call with DEADLINE_EXCEEDED and pending reads and writes fail.
  std::chrono::steady_clock::time_point deadline() const;
  // True once the call can no longer complete normally: the client cancelled (RST_STREAM), the
  // deadline passed, the connection was lost, or the server is shutting down past its deadline.
  bool is_cancelled() const;
  // Runs fn once when the call is cancelled (as is_cancelled() turns true), on the thread that
  // cancels it (the call's I/O thread), or at once, here, when it is already. For a handler
  // that waits on something other than the call (a watch, a long poll) and must stop waiting
  // then: fn should be quick, since the call's thread runs it (hand the work on, e.g.
  // asio::post to the handler's executor); it runs outside ferry's locks, so it may reset its
  // own or another registration. Active as long as the returned registration lives (resetting
  // it from another thread waits for a run under way); keep it within the handler. Takes a
  // lock and allocates.
  [[nodiscard]] CancellationRegistration on_cancel(std::function<void(const absl::Status&)> fn);
  // "ipv4:127.0.0.1:54321", "ipv6:[::1]:54321", "unix:/path" or "unix-abstract:name".
  std::string peer() const;
  // The connection the call arrived on: a number unique among the process's server connections
  // (never reused), so that a service can hold per-connection state or limits (HealthService
  // caps its Watch streams per connection by it).
  std::uint64_t connection_id() const;
  // The client's verified certificate identity (mutual TLS, ferry/tls.h); null over cleartext
  // or when the client presented no certificate. Valid while the call runs.
  const PeerIdentity* peer_identity() const;
  // The authorization decision for this call (Decision::kNotEvaluated when no authorization
  // interceptor ran before the reader). set_authorization is the interceptor's: the views in
  // result must stay valid while owner lives, which the call holds until it ends. No allocation.
  const CallAuthorization& authorization() const;
  void set_authorization(const CallAuthorization& result, std::shared_ptr<const void> owner);

  // The call's trace context (ferry/trace_context.h): with a tracing interceptor
  // (ferry/tracing.h), the context of the server span ferry opened for the call, a child of the
  // client's (traceparent or grpc-trace-bin), or a new root when the client sent none or a
  // malformed one; an application's own tracer makes its spans children of it. Invalid
  // (TraceContext::valid() false) without a tracing interceptor. A client call made with
  // ClientContext::from_server_context(*this) takes it as its parent. set_trace_context is the
  // interceptor's. No allocation (but for a tracestate over 15 bytes).
  const TraceContext& trace_context() const;
  void set_trace_context(const TraceContext& context);
  // The interceptor's alternative to set_trace_context for a call it will not record: the
  // context is worked out only if someone reads it (trace_context(), from_server_context), by
  // resolve(state, client_metadata(), out) on the reader's thread, once. A call whose handler
  // never asks then costs no header parse and no new span id. state (the interceptor) must
  // outlive the call; a later set_trace_context replaces the pending resolve.
  using TraceContextResolver = void (*)(const void* state, const Metadata& client_metadata,
                                        TraceContext& out);
  void defer_trace_context(TraceContextResolver resolve, const void* state);
  // The tracer told of the call's messages (CallTracer::records_messages) and kept until the
  // call is over; the tracing interceptor's, read back by it. Null when none was set.
  void set_call_tracer(std::shared_ptr<CallTracer> tracer);
  CallTracer* call_tracer() const;
  // Metadata for the response headers; only before the first message is written.
  void add_initial_metadata(std::string_view key, std::string_view value);
  // Sends the response headers (with the metadata added so far) now rather than with the first
  // message, so that the client sees them before a handler that waits sends anything (grpc++'s
  // SendInitialMetadata, grpc-go's SendHeader). Settles the response compression, as a first
  // write does. Ignored once they are sent or the call is over; then a later status goes in
  // trailers, never Trailers-Only.
  void send_initial_metadata();
  // Metadata for the trailers, sent with the status. Reserved grpc- keys are dropped, but for
  // grpc-retry-pushback-ms (gRPC's retry design: a client with a retry policy waits that many
  // milliseconds before its next attempt, or does not retry when the value is negative).
  void add_trailing_metadata(std::string_view key, std::string_view value);

  // The call's arena, for messages the handler creates: they die with the call. (The typed
  // handlers' request and response are not on it: they come from a per-thread cache and keep
  // their capacity across calls, see ferry/detail/recycled_message.h.)
  google::protobuf::Arena* arena() const;

  // Compresses this call's responses with `compression` (grpc-encoding in the response headers),
  // provided the client listed it in grpc-accept-encoding; otherwise they go out uncompressed, as
  // the spec requires. Call it before the first response message (for a unary handler, before
  // returning) or metadata is sent; later calls are ignored. A write may still opt a message
  // out (WriteOptions::no_compression). Default: kIdentity.
  void set_compression(Compression compression);
  // Whether the request message most recently read (or taken by take_request) arrived
  // compressed (compressed flag 1): lets a service insist on compressed input.
  bool last_message_compressed() const;

  // --- type-erased message operations (the typed readers and writers call these) ------------
  //
  // read and write are asio initiating functions (ferry/completion.h): the last argument is a
  // completion token, asio::use_awaitable by default; the message must outlive the operation.
  // Per-Operation Cancellation: terminal and partial cancellation through the completion
  // handler's cancellation slot (`co_await (reader.read(msg) || timer.async_wait(...))`)
  // abandon the CALL, as a handler that gives up does in gRPC: RST_STREAM(CANCEL) goes to the
  // client, the read completes with false and a write with CANCELLED, is_cancelled() turns
  // true, and whatever status the handler returns is not sent.

  // Waits for the next request message. False at the end of the client's stream, or when the
  // call is over (cancelled, deadline, bad message: ferry has then sent the status itself).
  // Completion signature: void(bool).
  template <class Token = const asio::use_awaitable_t<>&>
  auto read(google::protobuf::MessageLite& msg, Token&& token = asio::use_awaitable) {
    return detail::async_operation<bool>(
        std::forward<Token>(token), [this] { return executor(); },
        [this, &msg] { return read_awaitable(msg); });
  }
  // The request of a unary or server-streaming call, which ferry has received in full before
  // running the handler: parsed without suspending. False when the client sent none or it does
  // not parse (ferry has then ended the call: INTERNAL, or invalid_argument under Connect, as
  // connect-go answers it).
  bool take_request(google::protobuf::MessageLite& msg);
  // Sends a response message (and the response headers first, if not sent yet), compressed as
  // set_compression settled unless options.no_compression. Suspends while the client's
  // flow-control window is exhausted. Errors: the call is over (its status), or the message is
  // over the send limit (RESOURCE_EXHAUSTED; the limit applies to the uncompressed size).
  // Completion signature: void(absl::Status).
  template <class Token = const asio::use_awaitable_t<>&>
  auto write(const google::protobuf::MessageLite& msg, WriteOptions options = {},
             Token&& token = asio::use_awaitable) {
    return detail::async_operation<absl::Status>(
        std::forward<Token>(token), [this] { return executor(); },
        [this, &msg, options] { return write_awaitable(msg, options); });
  }
  template <class Token>
    requires(!std::is_convertible_v<Token, WriteOptions>)
  auto write(const google::protobuf::MessageLite& msg, Token&& token) {
    return write(msg, WriteOptions{}, std::forward<Token>(token));
  }
  // Raw messages, by reference: for large bodies that should not be copied into or out of a
  // protobuf message (ferry/bytes_field.h builds and takes apart a message whose big `bytes`
  // field travels this way). read_raw replaces message's bytes with the next request's
  // serialized bytes, as slices of the blocks they arrived in (inflated into new blocks if
  // compressed); holding them keeps those blocks. Completion signature: void(bool), as read.
  template <class Token = const asio::use_awaitable_t<>&>
  auto read_raw(SliceChain& message, Token&& token = asio::use_awaitable) {
    return detail::async_operation<bool>(
        std::forward<Token>(token), [this] { return executor(); },
        [this, &message] { return read_raw_awaitable(message); });
  }
  // Sends message (a whole serialized response message) by reference: its slices are shared
  // with the connection until written, never copied, and never compressed. Otherwise as write:
  // headers first, backpressure, the send limit. Completion signature: void(absl::Status).
  template <class Token = const asio::use_awaitable_t<>&>
  auto write_raw(const SliceChain& message, Token&& token = asio::use_awaitable) {
    return detail::async_operation<absl::Status>(
        std::forward<Token>(token), [this] { return executor(); },
        [this, &message] { return write_raw_awaitable(message); });
  }
  // The single response of a unary or client-streaming call, encoded now (compressed as
  // set_compression settled) and sent with the status the handler returns, in one write (the
  // typed adapters call it when the handler returned OK). Errors: over the send limit
  // (RESOURCE_EXHAUSTED), which the handler should then return.
  absl::Status queue_response(const google::protobuf::MessageLite& msg);
  // Ends the call with status now, sending msg first when it is non-null (a unary response:
  // headers, message and trailers then leave in one write; compressed as set_compression says).
  // Later calls are ignored.
  void finish(const absl::Status& status, const google::protobuf::MessageLite* msg = nullptr);

 private:
  friend class detail::ServerCall;              // each call holds its context
  friend class detail::ServerInterceptorChain;  // reads the call's outcome
  friend class ClientContext;  // from_server_context links to the call's cancellation
  explicit ServerContext(detail::ServerCall* call) : call_(call) {}

  // The operations themselves, on the call's thread.
  asio::awaitable<bool> read_awaitable(google::protobuf::MessageLite& msg);
  asio::awaitable<absl::Status> write_awaitable(const google::protobuf::MessageLite& msg,
                                                WriteOptions options);
  asio::awaitable<bool> read_raw_awaitable(SliceChain& message);
  asio::awaitable<absl::Status> write_raw_awaitable(const SliceChain& message);
  // The call's executor (its connection's).
  const asio::any_io_executor& executor() const;
  // The call's cancellation, shared with the client calls made on its behalf.
  std::shared_ptr<detail::CancellationLink> cancellation_link();

  detail::ServerCall* call_;
};

}  // namespace ferry
