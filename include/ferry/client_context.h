// ferry/client_context.h: per-call settings and results on the client (client layer, public): the
// deadline and metadata to send, and the server's metadata once the application took it. One
// context per call; it must outlive the unary call, or the stream and its last operation.
#pragma once

#include <chrono>
#include <memory>
#include <string_view>

#include "ferry/compression.h"
#include "ferry/metadata.h"
#include "ferry/trace_context.h"

namespace ferry {

class ServerContext;

namespace detail {
class CancellationLink;
class ClientCall;
}  // namespace detail

class ClientContext {
 public:
  using Clock = std::chrono::steady_clock;

  // A context for a call that a server handler makes on behalf of its own call (deadline
  // propagation): it carries that call's deadline, and its calls are cancelled when that call
  // is aborted (the client cancels, the deadline passes, the connection is lost, the server
  // cancels it at shutdown). From the handler, on its thread; the context may then be used on
  // any channel. Metadata is not copied. Setting a deadline afterwards replaces the inherited
  // one (shorten it only). The server call's trace context becomes the trace parent
  // (set_trace_parent). Costs one allocation per server call that uses it.
  static ClientContext from_server_context(ServerContext& server);

  // The call fails with DEADLINE_EXCEEDED when it has not completed by then; the server is told
  // the remaining time in grpc-timeout. Default: no deadline.
  void set_deadline(Clock::time_point deadline) { deadline_ = deadline; }
  void set_timeout(Clock::duration timeout) { deadline_ = Clock::now() + timeout; }
  Clock::time_point deadline() const { return deadline_; }

  // wait_for_ready (gRPC's name): while the channel has no READY connection the call waits for
  // one until its deadline, instead of failing at once with UNAVAILABLE when the channel is in
  // TRANSIENT_FAILURE. Set it before the call starts. Default: false (fail fast), or the
  // method's waitForReady from the channel's service config (ferry/method_config.h) when this
  // context never set it.
  void set_wait_for_ready(bool wait) {
    wait_for_ready_ = wait;
    wait_for_ready_set_ = true;
  }
  bool wait_for_ready() const { return wait_for_ready_; }
  // Whether set_wait_for_ready was called (it then wins over the service config).
  bool wait_for_ready_set() const { return wait_for_ready_set_; }

  // Custom metadata to send (see metadata.h for what keys and values may hold).
  void add_metadata(std::string_view key, std::string_view value) { metadata_.add(key, value); }
  const Metadata& metadata() const { return metadata_; }

  // Compresses this call's request messages with `compression` (sent as grpc-encoding); a write
  // may opt a message out (WriteOptions::no_compression). Set it before the call starts. A
  // server without the encoding fails the call with UNIMPLEMENTED. Default: kIdentity. Whatever
  // this says, ferry advertises and accepts gzip responses (grpc-accept-encoding).
  void set_compression(Compression compression) { compression_ = compression; }
  Compression compression() const { return compression_; }

  // The Connect protocol (ChannelOptions::protocol) only: a unary call goes as an HTTP GET, its
  // request message in the URL's query, which caches and proxies may keep. Only for methods
  // whose proto declares `option idempotency_level = NO_SIDE_EFFECTS` (servers answer other
  // methods' GETs with 405). Other protocols, and streams, ignore it. Default: false (POST).
  void set_http_get(bool get) { http_get_ = get; }
  bool http_get() const { return http_get_; }
  // The call may run twice on the server without harm: its method's .proto declares
  // `option idempotency_level = IDEMPOTENT` (or NO_SIDE_EFFECTS), and the generated stubs set it
  // for such methods. Over HTTP/1.1 (Connect, gRPC-Web) a call whose kept connection breaks
  // after some of it was written, before any response, is then sent again transparently, as one
  // never written is; any other call fails UNAVAILABLE there instead, since the server may have
  // run it (at most once; docs/protocols.md). No effect over HTTP/2, where the server says which
  // calls it never processed. Default false.
  void set_idempotent(bool idempotent) { idempotent_ = idempotent; }
  bool idempotent() const { return idempotent_; }

  // Distributed tracing (ferry/trace_context.h, ferry/tracing.h). The trace parent is the span
  // this call's span is a child of: an application's own tracer sets its current span's context
  // here so that ferry's spans (and the headers sent) join its trace; from_server_context sets
  // the server call's (its span: the handler's calls are children of it). Without a tracing
  // interceptor on the channel nothing reads it. Set it before the call starts. Default:
  // invalid (the call starts a new trace, or none when not sampled).
  void set_trace_parent(const TraceContext& parent) { trace_parent_ = parent; }
  const TraceContext& trace_parent() const { return trace_parent_; }
  // The context of the span the tracing interceptor opened for this call (gRFC A72's
  // Sent.<service>.<method>), from its on_start on; invalid without one. set_trace_context and
  // set_call_tracer are the interceptor's: the tracer writes each attempt's propagation headers
  // and, when it records, hears of its messages; the context keeps it (shared with the copies
  // ferry makes of the context while a call runs).
  const TraceContext& trace_context() const { return trace_context_; }
  void set_trace_context(const TraceContext& context) { trace_context_ = context; }
  void set_call_tracer(std::shared_ptr<CallTracer> tracer) { call_tracer_ = std::move(tracer); }
  CallTracer* call_tracer() const { return call_tracer_.get(); }

  // The server's response headers and trailers. The call keeps what arrives and hands it over
  // from the operations the application awaits: the headers' metadata with the first response
  // a read returns (or the end of the call), the trailers' when finish() returns (a unary call:
  // when it returns). Never written after the stream is dropped.
  const Metadata& initial_metadata() const { return initial_metadata_; }
  const Metadata& trailing_metadata() const { return trailing_metadata_; }

  // Whether the response message most recently read arrived compressed (compressed flag 1); for
  // a unary call, the response.
  bool response_compressed() const { return response_compressed_; }

 private:
  friend class detail::ClientCall;
  Clock::time_point deadline_ = Clock::time_point::max();
  Compression compression_ = Compression::kIdentity;
  bool response_compressed_ = false;
  bool wait_for_ready_ = false;
  bool wait_for_ready_set_ = false;
  bool http_get_ = false;
  bool idempotent_ = false;
  Metadata metadata_;
  Metadata initial_metadata_;
  Metadata trailing_metadata_;
  std::shared_ptr<detail::CancellationLink> parent_;  // from_server_context; null otherwise
  TraceContext trace_parent_;
  TraceContext trace_context_;
  std::shared_ptr<CallTracer> call_tracer_;
};

}  // namespace ferry
