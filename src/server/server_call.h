// One call on the server (server layer, private): parses the request headers, owns the call's
// Arena, deadline timer and metadata, and writes the response headers, messages and trailers
// (or a Trailers-Only response) as the handler asks.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "call/call_stream.h"
#include "call/cancellation_link.h"
#include "call/content_type.h"
#include "call/deadline_queue.h"
#include "ferry/metadata.h"
#include "ferry/server_context.h"
#include "ferry/service.h"
#include "ferry/trace_context.h"
#include "google/protobuf/arena.h"
#include "server/call_site.h"
#include "server/handler_runners.h"

namespace ferry::detail {

class ServerCall final : public CallStream {
 public:
  // A call on connection, whose calls share site (which must outlive the call's stream).
  ServerCall(ServerCallSite* site, http2::StreamCarrier* connection);
  ~ServerCall();

  // A call is created and deleted per request, on its connection's thread: its storage (some
  // 3 KiB, past malloc's fast paths) is recycled through a small per-thread free list.
  static void* operator new(std::size_t size);
  static void operator delete(void* p, std::size_t size) noexcept;
  // Gives the calling thread's recycled call storage back to malloc (after a burst).
  static void release_idle_storage() noexcept;

  // --- request, as parsed from the headers --------------------------------------------------
  // :path; for a registered method, the server's copy (no per-call string).
  std::string_view path() const { return method_entry_ != nullptr ? stable_path_ : path_; }
  // The registered method :path names, or null.
  const Method* method_entry() const { return method_entry_; }
  bool is_post() const { return is_post_; }
  // The protocol and codec the content-type names (gRPC, gRPC-Web or Connect), once the headers
  // are in; nullopt when it names none of them.
  const std::optional<ContentType>& content_kind() const { return content_kind_; }
  std::string_view method() const { return method_; }  // only when not POST
  // Only when not gRPC with the proto codec.
  std::string_view content_type() const { return content_type_; }
  std::string_view encoding() const { return encoding_; }
  const Metadata& client_metadata() const { return client_metadata_; }
  std::chrono::steady_clock::time_point deadline() const { return deadline_; }
  std::string_view peer() const { return {peer_, peer_size_}; }
  std::uint64_t connection_id() const { return connection_id_; }
  const PeerIdentity* peer_identity() const { return identity_.get(); }
  const CallAuthorization& authorization() const { return authorization_; }
  void set_authorization(const CallAuthorization& result, std::shared_ptr<const void> owner) {
    authorization_owner_ = std::move(owner);  // first: result may view the previous owner's
    authorization_ = result;
  }

  // The call's trace context and tracer (ServerContext::trace_context, set_call_tracer).
  const TraceContext& trace_context() const {
    if (trace_resolve_ != nullptr) {
      const auto resolve = trace_resolve_;
      trace_resolve_ = nullptr;
      resolve(trace_resolve_state_, client_metadata_, trace_context_);
    }
    return trace_context_;
  }
  void set_trace_context(const TraceContext& context) {
    trace_resolve_ = nullptr;
    trace_context_ = context;
  }
  void defer_trace_context(ServerContext::TraceContextResolver resolve, const void* state) {
    trace_resolve_ = resolve;
    trace_resolve_state_ = state;
  }
  CallTracer* call_tracer() const { return tracer_owner_.get(); }
  void set_call_tracer(std::shared_ptr<CallTracer> tracer) {
    set_message_tracer(tracer != nullptr && tracer->records_messages() ? tracer.get() : nullptr);
    tracer_owner_ = std::move(tracer);
  }

  google::protobuf::Arena* arena() { return &arena_; }
  bool is_cancelled() const { return !abort_.ok(); }
  bool finished() const { return finished_; }
  // The call's status, decided in one place: once the call is finished, the status that went to
  // the client (ServerContext::finish's, a send limit's, the deadline's, a cancellation's), else
  // the status the call was aborted with (the client cancelled, the connection was lost), else
  // returned, what the handler returned, which will be sent. What the interceptors observe.
  const absl::Status& final_status(const absl::Status& returned) const {
    if (finished_) return sent_status_;
    if (!abort_status().ok()) return abort_status();
    return returned;
  }

  Metadata& initial_metadata() { return initial_metadata_; }
  Metadata& trailing_metadata() { return trailing_metadata_; }

  // Applies the request's grpc-encoding; UNIMPLEMENTED (naming what ferry supports) when ferry
  // cannot inflate it, and the call must then be finished with that status.
  absl::Status negotiate_encoding();
  // The handler's wish for the responses (ServerContext::set_compression): honoured when the
  // client's grpc-accept-encoding lists it, ignored once the response has begun.
  void set_compression(Compression compression) {
    if (!send_compression_fixed_) requested_compression_ = compression;
  }

  // INTERNAL when grpc-timeout was malformed, DEADLINE_EXCEEDED when its deadline has passed
  // ("0n"): the call must then be finished with that status and its handler never run.
  absl::Status check_timeout() const;
  ServerContext& context() { return context_; }
  // The handler returned status (or threw): ends the call with it if it has not ended. From the
  // runner, on the call's thread; the runner then drops the handler's reference.
  void handler_done(const absl::Status& status);

  // Handler operations (see ServerContext).
  asio::awaitable<bool> read(google::protobuf::MessageLite& msg) { return read_message(msg); }
  bool take_request(google::protobuf::MessageLite& msg) { return take_message(msg) > 0; }
  asio::awaitable<absl::Status> write(const google::protobuf::MessageLite& msg,
                                      WriteOptions options);
  asio::awaitable<bool> read_raw(SliceChain& message) { return read_message(message); }
  asio::awaitable<absl::Status> write_raw(const SliceChain& message);
  void finish(const absl::Status& status, const google::protobuf::MessageLite* msg);
  // Sends the response headers now, unless they are sent already or the call is over (or it is
  // a Connect unary call, whose headers carry its trailers and so wait for the end).
  void send_initial_metadata() {
    if (!headers_sent_ && can_write() && connection_ != nullptr &&
        !is_protocol(WireProtocol::kConnectUnary)) {
      send_headers();
    }
  }
  absl::Status queue_response(const google::protobuf::MessageLite& msg);

  // Cancels the call from the server side (shutdown past its grace): RST_STREAM(CANCEL).
  void cancel(absl::Status why);

  // The call's cancellation, for the client calls a handler makes on its behalf
  // (ClientContext::from_server_context); made on first use, then cancelled when the call is
  // aborted (at once when it is already).
  const std::shared_ptr<CancellationLink>& cancellation_link();

 private:
  bool on_header(std::string_view name, std::string_view value) override;
  void on_headers_done() override;
  void on_stream_closed(http2::ErrorCode h2_error) override;
  void on_receive_error(absl::Status status) override;
  // A Connect request that does not parse is INVALID_ARGUMENT, as connect-go answers it (gRPC's
  // stays INTERNAL, as grpc-go's).
  void on_parse_error(absl::Status status) override;
  void on_remote_end() override;
  void on_inbound_progress() override;
  void on_deadline() override;  // DEADLINE_EXCEEDED, for handler and client
  // The handler gave up on a read or write (its cancellation slot): cancels the call.
  void on_operation_cancelled() override;
  void on_aborted() override;
  bool can_write() const override { return !finished_ && !closed_; }
  bool inbound_done() const override { return finished_ || CallStream::inbound_done(); }

  // The request headers are in: rejects a request that is not gRPC or names no method this
  // server has, else starts the deadline and runs the handler.
  void route();
  // Runs method's handler now (streaming requests), or once the client's side has ended with
  // its one request message in (unary and server-streaming calls: their handler then takes it
  // without suspending). The handler
  // runs on one of the thread's runners (server/handler_runners.h), which then calls
  // handler_done.
  void run(const Method* method);
  void run_when_ready(const Method* method);
  // Rejections before routing: a bare HTTP status (415, 405, 404), with grpc-status INTERNAL
  // (UNIMPLEMENTED for 404), sent at once. What the Connect protocol's own rejections use.
  void reject_http(int http_status);
  // A request that is not gRPC, gRPC-Web or Connect at all (another method, another
  // content-type): the same answer with a short text/plain body saying why, sent once the
  // client has sent the whole request (END_STREAM), as generic HTTP servers answer (nghttpd,
  // h2o). An answer sent before would race the request's own frames, which the peer then sees
  // judged by a stream this end already closed. While it waits, the request's body is dropped
  // as it arrives and its flow-control window given back (the call is aborted: nothing is
  // buffered); a client that never ends the request holds one of the connection's streams
  // (ConnectionLimits::max_concurrent_streams) and nothing more.
  void reject_when_complete(int http_status);
  // reject_http's and reject_when_complete's words for the status: the message, which goes in
  // grpc-message (and the body), and the status the call ends with.
  std::string rejection_message(int http_status, absl::Status& status) const;
  // Sends a rejection, with_body: the message as a text/plain body (never to HEAD).
  void send_rejection(int http_status, bool with_body);
  // What routes every request its content-type accepts: the deadline, the encoding, the method.
  void route_accepted();
  bool is_protocol(WireProtocol protocol) const {
    return content_kind_ && content_kind_->protocol == protocol;
  }

  // --- the Connect protocol (server_call_connect.cc) ------------------------------------------
  // A header of Connect's own ("connect-*"), kept for routing.
  void on_connect_header(std::string_view name, std::string_view value);
  // route() for a Connect POST, and for a GET (a Connect unary call of a method without side
  // effects, its request in the query).
  void route_connect();
  void route_connect_get();
  // The Connect headers' share of routing: codec, encodings, protocol version, timeout. False
  // when it finished the call.
  bool apply_connect_headers();
  // finish() for Connect: a unary call's one response (the message, or the error as JSON with its
  // HTTP status), or a streaming call's end-of-stream message.
  void finish_connect(const absl::Status& status);

  // Settles what responses are compressed with, once: before the first message or headers.
  void fix_send_compression();
  void send_headers();
  // Ends a gRPC-Web response: the trailers (built in `trailers`) go as the body's last frame,
  // flag 0x80, in HTTP/1 header syntax, since browsers cannot read HTTP trailers.
  void end_with_body_trailers();
  using HeaderFields = absl::InlinedVector<http2::HeaderField, 16>;
  // Sends response headers, with the CORS headers when the request came from an allowed
  // browser origin (ServerOptions::cors_allowed_origins).
  void submit(HeaderFields& fields, bool with_data);
  // A preflight request (OPTIONS): 204 with what the origin may send, or 405.
  void answer_preflight();
  // The content-type of the response: the request's protocol and codec, named in full.
  std::string_view response_content_type() const;
  void append_metadata(const Metadata& md, http2::HeaderList& out);
  // The status's rich details (ferry/status_details.h), as grpc-status-details-bin.
  void append_status_details(const absl::Status& status);

  // The connection's side: it may be gone once on_closed has run, while the handler still runs.
  ServerCallSite* site_;
  ServerContext context_{this};
  const Method* pending_method_ = nullptr;  // run once the request is in
  // The peer's address, copied from the site at construction (no allocation): a handler may
  // ask for it after the connection, and with it the site, is gone.
  char peer_[120];  // "unix:" and a path of up to 107 bytes fit too
  std::size_t peer_size_ = 0;
  // The first -bin key whose value was not base64: the call is answered INTERNAL.
  std::string malformed_binary_key_;
  std::uint64_t connection_id_ = 0;               // the site's: a handler may outlive the stream
  std::shared_ptr<const PeerIdentity> identity_;  // the same for TLS: null in cleartext
  // trace_context_ is worked out by trace_resolve_ when first read, if that is set
  // (ServerContext::defer_trace_context).
  mutable TraceContext trace_context_;
  mutable ServerContext::TraceContextResolver trace_resolve_ = nullptr;
  const void* trace_resolve_state_ = nullptr;
  std::shared_ptr<CallTracer> tracer_owner_;  // set_call_tracer
  CallAuthorization authorization_;           // views what authorization_owner_ holds
  std::shared_ptr<const void> authorization_owner_;
  std::size_t header_bytes_ = 0;
  bool headers_done_ = false;
  bool headers_sent_ = false;
  bool finished_ = false;
  absl::Status sent_status_;  // set with finished_
  // reject_when_complete's HTTP status, until the request's END_STREAM sends it; 0 otherwise.
  int deferred_rejection_ = 0;
  // The request line, kept as flags and a pointer: strings are stored only for error messages.
  bool is_post_ = false;
  std::optional<ContentType> content_kind_;
  bool client_accepts_gzip_ = false;  // grpc-accept-encoding lists gzip
  bool send_compression_fixed_ = false;
  Compression requested_compression_ = Compression::kIdentity;
  const Method* method_entry_ = nullptr;
  std::string_view stable_path_;
  std::string method_;
  std::string path_;
  std::string content_type_;
  std::string encoding_;
  // The Connect protocol's headers, read whatever the content-type, used when it is Connect's.
  std::string content_encoding_;         // content-encoding (unary) or connect-content-encoding
  std::string connect_stream_encoding_;  // connect-content-encoding
  std::string connect_timeout_;          // connect-timeout-ms
  bool http_accepts_gzip_ = false;       // accept-encoding lists gzip
  bool connect_accepts_gzip_ = false;    // connect-accept-encoding lists gzip
  bool connect_version_bad_ = false;     // connect-protocol-version is not 1
  // CORS: the request's origin and what a preflight asks to send; the exposed headers' list.
  std::string origin_;
  std::string cors_request_headers_;
  std::string cors_expose_;
  std::chrono::steady_clock::time_point deadline_ = std::chrono::steady_clock::time_point::max();
  bool timeout_malformed_ = false;
  Metadata client_metadata_;
  Metadata initial_metadata_;
  Metadata trailing_metadata_;
  // The arena's first block lives in the call, so a small call allocates nothing for messages.
  alignas(16) char arena_block_[2048];
  google::protobuf::Arena arena_;
  std::shared_ptr<CancellationLink> cancellation_link_;  // null until a handler asks
};

}  // namespace ferry::detail
