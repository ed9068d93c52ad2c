// One call on the client (client layer, private): sends the request headers (with grpc-timeout
// and metadata), parses the response headers and trailers into the ClientContext, and turns
// every way a call can end (trailers, reset, deadline, cancel, lost connection) into one status.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "call/call_stream.h"
#include "call/cancellation_link.h"
#include "call/content_type.h"
#include "call/deadline_queue.h"
#include "client/outlier_detection.h"
#include "client/stream_call.h"
#include "ferry/channel.h"
#include "ferry/client_context.h"

namespace ferry::detail {

class ClientCall;

// How a call speaks to the server: the channel's protocol and codec (ChannelOptions), and
// whether the call is unary (the Connect protocol sends a unary call's messages bare).
struct CallProtocol {
  ChannelProtocol protocol = ChannelProtocol::kGrpc;
  ChannelCodec codec = ChannelCodec::kProto;
  bool unary = false;
};

// Told once a call's status is known (the client interceptors' on_finish hooks), and of its
// attempts (their on_attempt_* hooks). On the call's thread.
class ClientCallObserver {
 public:
  virtual ~ClientCallObserver() = default;
  // An attempt of the call has started: the first, or one that follows attempt_ended.
  // transparent: a transparent retry (the attempt before it never reached the server's
  // application), not one the method's retry policy made.
  virtual void attempt_started(bool transparent) { (void)transparent; }
  // An attempt that another one follows is over (a retry): it is done.
  virtual void attempt_ended(ClientCall& attempt) { (void)attempt; }
  // The call's last attempt is over and its status final; before the call's waiters wake.
  virtual void on_call_done(ClientCall& call) = 0;
  // The application has let go of the stream, so its ClientContext may go next: from now on
  // the observer must not touch it. On the application's thread, while the hooks above run on
  // the call's.
  virtual void detach_context() {}
};

class ClientCall final : public CallStream, public StreamCall {
 public:
  // keepalive: whatever must outlive the call along with the connection (its observer and
  // deadlines, the queue that times the call).
  ClientCall(std::shared_ptr<void> keepalive, http2::ClientTransport* connection,
             DeadlineQueue* deadlines, ClientContext* context, const CallLimits& limits,
             std::size_t max_header_bytes);
  ~ClientCall();

  // A call that never reached a connection: it is over from the start, with status.
  ClientCall(const asio::any_io_executor& executor, ClientContext* context, absl::Status status);

  // Storage recycled per thread (call/call_storage.h): a call per request.
  static void* operator new(std::size_t size);
  static void operator delete(void* p, std::size_t size) noexcept;

  // Submits the request headers. On failure the call is over with UNAVAILABLE.
  // previous_attempts: a retry's count of earlier attempts (grpc-previous-rpc-attempts); the
  // context's received metadata is cleared for it.
  // protocol: gRPC, gRPC-Web or Connect, in proto or JSON. A Connect GET (ClientContext::
  // set_http_get) is submitted once its request message is known (the first write).
  void start(std::string_view path, std::string_view authority, std::string_view user_agent,
             int previous_attempts = 0, CallProtocol protocol = {});

  // StreamCall (the reference count is CallStream's).
  void ref() override { CallStream::ref(); }
  void unref() override { CallStream::unref(); }
  void unref_inline() override { CallStream::unref_inline(); }
  const asio::any_io_executor& executor() const override { return CallStream::executor(); }
  asio::awaitable<absl::Status> write(const google::protobuf::MessageLite& msg, bool last,
                                      WriteOptions options) override;
  // A unary or server-streaming call's one request, with the end of the stream: queued without
  // waiting for it to drain, since nothing follows it (and so without a coroutine frame).
  absl::Status send_request(const google::protobuf::MessageLite& msg);
  void writes_done() override;
  asio::awaitable<bool> read(google::protobuf::MessageLite& msg) override {
    return read_message(msg);
  }
  asio::awaitable<bool> read_raw(SliceChain& message) override { return read_message(message); }
  asio::awaitable<absl::Status> write_raw(const SliceChain& message) override;
  // read()'s step and its wait, for a caller that loops itself (see CallStream::next_message).
  using CallStream::inbound_progress;
  using CallStream::next_message;
  // A unary or client-streaming call's response.
  void expect_single_message() override { CallStream::expect_single_message(); }
  bool last_message_compressed() const override { return CallStream::last_message_compressed(); }
  asio::awaitable<absl::Status> finish() override;
  // Half-closes, reads the one response and waits for the status (UNIMPLEMENTED for an OK
  // without a response).
  asio::awaitable<absl::Status> finish_with_response(
      google::protobuf::MessageLite& response) override;
  // finish()'s wait, for a caller that loops itself (the unary call: a nested coroutine would
  // cost it a frame, and asio throws on awaiting one once the caller's coroutine is cancelled).
  asio::awaitable<void> done_progress() { return done_event_.wait(); }
  // The call's status, once done().
  const absl::Status& status() const { return status_; }
  void cancel(absl::Status why) override;
  void drop() override;
  // A plain stream's call (no retry policy): the observer stops using the application's context.
  void detach_context() override;
  bool done() const { return done_; }
  // Gives context what the server has sent so far, moved out of the call: the response
  // headers' metadata once they are in (or the call is done), the trailers' once it is done, and
  // whether the last response read arrived compressed. Only from the application's operations
  // (and the observer told at their end): a context's owner may destroy it once it lets go of
  // the call, which may still run.
  void publish_to(ClientContext& context);
  // Only the response headers' metadata (a read took a response).
  void publish_initial_to(ClientContext& context);
  // Observer told once the call's status is final (at once if it is); the call owns it. Only
  // calls with interceptors have one. Before the stream is given to the application. A call that
  // ended OK with responses still unread is not final yet: one of them may fail to parse, which
  // fails the call with INTERNAL, so the observer is told when the last is delivered, when finish()
  // returns, or when the application lets go of the call (settle()), whichever comes first: it sees
  // the status the application sees.
  void set_observer(std::unique_ptr<ClientCallObserver> observer);
  // The application has let go of the call: what it left unread no longer matters, so its
  // status is final. Tells the observer if it was not told.
  void settle() { tell_observer(); }
  // The server never saw the call: it could not be sent (the connection took no new stream) or
  // was refused before any response (REFUSED_STREAM, or above a GOAWAY's last stream id). gRPC's
  // retry design lets such a call be retried transparently.
  bool never_processed() const { return never_processed_; }
  // Response headers came (not a Trailers-Only response): the retry design's commit point.
  // A response that is not one of the protocol's (another HTTP status, a foreign content-type)
  // commits nothing: the call may be retried as its policy says.
  bool committed() const { return header_blocks_ > 0 && !trailers_only_ && !response_rejected_; }
  // The server's grpc-retry-pushback-ms (client/retry.h: kNoPushback, kStopRetrying or ms).
  std::int64_t retry_pushback_ms() const { return retry_pushback_ms_; }
  // A routed cluster's call (client/outlier_detection.h), before start(): counted in the
  // cluster's calls in flight until it ends (gRFC A32), its outcome then counted for its
  // endpoint when endpoint is not null (gRFC A50).
  void count_in(std::shared_ptr<ClusterCallCounts> cluster,
                const std::shared_ptr<EndpointCallCounts>& endpoint) {
    cluster->in_flight.fetch_add(1, std::memory_order_relaxed);
    cluster_counts_ = std::move(cluster);
    endpoint_counts_ = endpoint;  // the connection's may be replaced while the call runs
  }

 private:
  // The request headers, submitted: the connection has the stream (or the call is over).
  void submit(std::string_view path, std::string_view authority, std::string_view user_agent,
              int previous_attempts, bool get);
  // A Connect GET's submit, once its request message is in outbound: the message moves into the
  // URL's query.
  void submit_get();
  // What write(), write_raw() and send_request() do first while a GET waits for its message.
  template <class Message>
  absl::Status send_get(const Message& msg, WriteOptions options);

  bool on_header(std::string_view name, std::string_view value) override;
  // The Connect protocol's share of the above (client_call_connect.cc).
  bool on_connect_header(std::string_view name, std::string_view value);
  void on_connect_headers_done();
  void on_connect_remote_end();
  void on_connect_end_stream(DecodedMessage&& frame);
  bool is_connect() const {
    return sent_type_.protocol == WireProtocol::kConnectUnary ||
           sent_type_.protocol == WireProtocol::kConnectStreaming;
  }
  // Whether the response's content-type names the protocol and codec the request used.
  enum class ResponseType : std::uint8_t { kMissing, kMatch, kOtherCodec, kForeign };
  ResponseType classify_response_type(std::string_view content_type) const;
  // The status a response whose content-type is not kMatch fails with; OK for kMatch.
  absl::Status response_type_status() const;
  void on_headers_done() override;
  void on_remote_end() override;
  void on_stream_closed(http2::ErrorCode h2_error) override;
  void on_receive_error(absl::Status status) override;
  // gRPC-Web's trailers frame: its "name: value" lines are the trailers block.
  void on_end_frame(DecodedMessage&& frame) override;
  // The trailers block begins: what the headers said of the status no longer counts.
  void begin_trailers();
  void on_message_taken(bool compressed) override;
  bool can_write() const override { return !done_ && !closed_ && !outbound_end; }
  bool inbound_done() const override { return done_ || CallStream::inbound_done(); }
  void on_deadline() override;  // DEADLINE_EXCEEDED, and RST_STREAM(CANCEL) to the server
  // CANCELLED, and RST_STREAM(CANCEL) to the server.
  void on_operation_cancelled() override;

  // Records the call's status (the first one wins) and wakes everyone waiting.
  void complete(absl::Status status);
  // Whether status_ can no longer change: the call is done, and either failed or has no
  // response left that could fail to parse.
  bool status_final() const { return done_ && (!status_.ok() || !has_message()); }
  // Tells the observer, once.
  void tell_observer();
  // Ends the call from this side: status, RST_STREAM(CANCEL).
  void abort_call(absl::Status status);
  // abort_call for a response that is not the protocol's, read from its first header block.
  void reject_response(absl::Status status);
  // The status gRPC's HTTP-to-status table gives http_status_ (connect-go's client uses the same).
  absl::Status http_status_error() const;
  // Registers with the parent server call's cancellation (from_server_context).
  void link_to_parent();

  std::shared_ptr<void> keepalive_;
  // The application's context: read by start(), written by publish_to() from the operations
  // the application awaits (which keep it alive), and touched nowhere else.
  ClientContext* context_;
  ClientContext::Clock::time_point deadline_ = ClientContext::Clock::time_point::max();
  // What the server sent, until publish_to() hands it over.
  Metadata initial_metadata_;
  Metadata trailing_metadata_;
  bool initial_published_ = false;
  bool trailing_published_ = false;
  std::size_t max_header_bytes_ = 0;
  std::size_t header_bytes_ = 0;  // of the header block being read
  bool informational_ = false;    // that block is a 1xx response's
  bool initial_done_ = false;
  bool response_rejected_ = false;  // see committed()
  // Why on_header refused a field (the stream is then reset by this side): the call's status.
  absl::Status rejected_;
  int header_blocks_ = 0;
  bool done_ = false;
  bool never_processed_ = false;
  bool trailers_only_ = false;
  int http_status_ = 0;
  std::int64_t retry_pushback_ms_ = -1;  // kNoPushback
  bool has_grpc_status_ = false;
  // What the request's content-type said (protocol and codec), and how the response's compares.
  ContentType sent_type_;
  ResponseType response_type_ = ResponseType::kMissing;
  // The Connect protocol: a unary call's non-200 response carries a JSON error object as its
  // body; a stream's end-of-stream message came (with connect_status_, what it said).
  bool connect_error_body_ = false;
  bool response_json_ = false;  // a unary response's content-type is application/json
  bool sent_get_ = false;       // the request went as a GET
  bool connect_end_ = false;
  absl::Status connect_status_;
  // A Connect GET waiting for its request message: where it goes.
  struct PendingGet {
    std::string path;
    std::string authority;
    std::string user_agent;
  };
  std::unique_ptr<PendingGet> pending_get_;
  // A field of the trailers (the second header block) came: a status the response headers
  // carried no longer counts.
  bool in_trailers_ = false;
  absl::StatusCode grpc_status_ = absl::StatusCode::kUnknown;
  std::string grpc_message_;
  std::string status_details_;  // grpc-status-details-bin, decoded
  absl::Status status_;
  Event done_event_;
  std::shared_ptr<CallTracer> tracer_owner_;  // the context's, while it records the messages
  std::unique_ptr<ClientCallObserver> observer_;
  // observer_ as set_observer() gave it (a retry moves no observer into a plain stream's call),
  // for detach_context() on the application's thread.
  ClientCallObserver* first_observer_ = nullptr;
  bool observer_told_ = false;
  // The server call this one was made on behalf of (ClientContext::from_server_context), and
  // this call's registration with it; null and 0 otherwise.
  std::shared_ptr<CancellationLink> parent_;
  std::uint64_t parent_registration_ = 0;
  // count_in's: released when the call ends (or is destroyed first).
  void release_counts();
  std::shared_ptr<ClusterCallCounts> cluster_counts_;
  std::shared_ptr<EndpointCallCounts> endpoint_counts_;
};

}  // namespace ferry::detail
