// Implementation of src/client/client_call.h.
#include "client/client_call.h"

#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "asio/post.hpp"
#include "call/call_storage.h"
#include "call/connect_wire.h"
#include "call/wire_format.h"
#include "client/retry.h"
#include "client/unary_call.h"
#include "common/ref.h"
#include "common/strings.h"
#include "ferry/status_details.h"

namespace ferry::detail {

void* ClientCall::operator new(std::size_t) {
  return RecycledStorage<sizeof(ClientCall)>::allocate();  // final: every request is this size
}

void ClientCall::operator delete(void* p, std::size_t) noexcept {
  RecycledStorage<sizeof(ClientCall)>::release(p);
}

ClientCall::ClientCall(std::shared_ptr<void> keepalive, http2::ClientTransport* connection,
                       DeadlineQueue* deadlines, ClientContext* context, const CallLimits& limits,
                       std::size_t max_header_bytes)
    : CallStream(connection->executor(), connection, limits, deadlines),
      keepalive_(std::move(keepalive)),
      context_(context),
      max_header_bytes_(max_header_bytes),
      done_event_(connection->executor()) {
  done_event_.on_cancel(&CallStream::cancel_operation, this);
}

ClientCall::ClientCall(const asio::any_io_executor& executor, ClientContext* context,
                       absl::Status status)
    : CallStream(executor, nullptr, CallLimits{}, /*deadlines=*/nullptr),
      context_(context),
      done_event_(executor) {
  closed_ = true;
  complete(std::move(status));
  abort(status_);
}

ClientCall::~ClientCall() {
  if (cluster_counts_ != nullptr) {
    endpoint_counts_.reset();  // never ended: no outcome to count
    release_counts();
  }
}

void ClientCall::release_counts() {
  cluster_counts_->in_flight.fetch_sub(1, std::memory_order_relaxed);
  cluster_counts_.reset();
  if (endpoint_counts_ != nullptr) {
    // gRFC A50: a call is a success when its status is OK.
    (status_.ok() ? endpoint_counts_->successes : endpoint_counts_->failures)
        .fetch_add(1, std::memory_order_relaxed);
    endpoint_counts_.reset();
  }
}

void ClientCall::on_deadline() {
  Ref<ClientCall> keep(this);  // what abort_call sets off may drop the other references
  if (!done_) abort_call(absl::DeadlineExceededError("deadline exceeded"));
}

void ClientCall::on_operation_cancelled() {
  abort_call(absl::CancelledError("the operation was cancelled (its cancellation slot)"));
}

void ClientCall::start(std::string_view path, std::string_view authority,
                       std::string_view user_agent, int previous_attempts, CallProtocol protocol) {
  const bool json = protocol.codec == ChannelCodec::kJson;
  sent_type_.codec = json ? MessageCodec::kJson : MessageCodec::kProto;
  bool get = false;
  switch (protocol.protocol) {
    case ChannelProtocol::kGrpc:
      break;
    case ChannelProtocol::kGrpcWeb:
      sent_type_.protocol = WireProtocol::kGrpcWeb;
      accept_end_frames(kGrpcWebTrailersFlag);
      break;
    case ChannelProtocol::kConnect:
      if (protocol.unary) {
        sent_type_.protocol = WireProtocol::kConnectUnary;
        get = context_->http_get();
      } else {
        sent_type_.protocol = WireProtocol::kConnectStreaming;
        accept_end_frames(kConnectEndStreamFlag);
      }
      break;
  }
  if (json || sent_type_.protocol == WireProtocol::kConnectUnary) {
    set_message_format(MessageFormat{
        .json = json, .unframed = sent_type_.protocol == WireProtocol::kConnectUnary});
  }
  deadline_ = context_->deadline();
  if (get) {
    // Submitted with the request message, which goes in the URL (submit_get).
    pending_get_ = std::make_unique<PendingGet>(
        PendingGet{std::string(path), std::string(authority), std::string(user_agent)});
    return;
  }
  submit(path, authority, user_agent, previous_attempts, /*get=*/false);
}

void ClientCall::submit(std::string_view path, std::string_view authority,
                        std::string_view user_agent, int previous_attempts, bool get) {
  const auto deadline = deadline_;
  const auto now = ClientContext::Clock::now();
  if (deadline <= now) {
    closed_ = true;
    connection_ = nullptr;
    complete(absl::DeadlineExceededError("deadline exceeded before the call started"));
    abort(status_);
    return;
  }

  // -bin values in base64, which need storage until submit returns; the other entries are
  // passed as they lie in the context's metadata (the connection copies them during the submit).
  absl::InlinedVector<std::string, 2> encoded;
  std::string timeout;
  std::string attempts;
  const bool connect = sent_type_.protocol == WireProtocol::kConnectUnary ||
                       sent_type_.protocol == WireProtocol::kConnectStreaming;
  if (previous_attempts > 0 && !connect) attempts = std::to_string(previous_attempts);
  if (deadline != ClientContext::Clock::time_point::max()) {
    timeout =
        connect ? format_connect_timeout(deadline - now) : format_grpc_timeout(deadline - now);
  }
  for (const auto& [key, value] : context_->metadata()) {
    if (absl::Status s = validate_metadata(key, value); !s.ok()) {
      closed_ = true;
      connection_ = nullptr;
      complete(s);
      abort(status_);
      return;
    }
    if (is_binary_metadata_key(key)) encoded.push_back(encode_binary_header(value));
  }

  using http2::HeaderField;
  absl::InlinedVector<HeaderField, 16> fields;
  sent_get_ = get;
  fields.push_back(get ? HeaderField::literal(":method", "GET")
                       : HeaderField::literal(":method", "POST"));
  fields.push_back(HeaderField::literal(":scheme", "http"));
  fields.push_back({":path", path});
  fields.push_back({":authority", authority});
  if (!get) fields.push_back({"content-type", content_type_name(sent_type_)});
  set_send_compression(context_->compression());
  const bool compressed = send_compression() != Compression::kIdentity;
  switch (sent_type_.protocol) {
    case WireProtocol::kGrpc:
      fields.push_back(HeaderField::literal("te", "trailers"));
      break;
    case WireProtocol::kGrpcWeb:
      fields.push_back(HeaderField::literal("x-grpc-web", "1"));
      break;
    case WireProtocol::kConnectUnary:
      // A GET names its compression in the query (connect_get_query).
      if (!get) fields.push_back(HeaderField::literal("connect-protocol-version", "1"));
      if (compressed && !get) {
        fields.push_back(
            HeaderField::literal("content-encoding", compression_name(send_compression())));
      }
      fields.push_back(HeaderField::literal("accept-encoding", kAcceptEncoding));
      break;
    case WireProtocol::kConnectStreaming:
      fields.push_back(HeaderField::literal("connect-protocol-version", "1"));
      if (compressed) {
        fields.push_back(
            HeaderField::literal("connect-content-encoding", compression_name(send_compression())));
      }
      fields.push_back(HeaderField::literal("connect-accept-encoding", kAcceptEncoding));
      break;
  }
  fields.push_back({"user-agent", user_agent});
  if (!timeout.empty())
    fields.push_back({connect ? "connect-timeout-ms" : "grpc-timeout", timeout});
  if (!attempts.empty()) fields.push_back({"grpc-previous-rpc-attempts", attempts});
  if (!connect) {
    if (compressed) {
      fields.push_back(HeaderField::literal("grpc-encoding", compression_name(send_compression())));
    }
    fields.push_back(HeaderField::literal("grpc-accept-encoding", kAcceptEncoding));
  }
  std::size_t next_encoded = 0;
  for (const auto& [key, value] : context_->metadata()) {
    fields.push_back(
        {key, is_binary_metadata_key(key) ? std::string_view(encoded[next_encoded++]) : value});
  }
  // The attempt's trace context (gRFC A72), as the channel's tracing interceptor writes it;
  // in place until the submit below, and only built for a call with a tracer.
  std::optional<TraceHeaders> trace_headers;
  if (CallTracer* tracer = context_->call_tracer_.get(); tracer != nullptr) {
    tracer->add_attempt_headers(context_->trace_context_, trace_headers.emplace());
    for (std::size_t i = 0; i < trace_headers->size; ++i) {
      fields.push_back({trace_headers->keys[i], trace_headers->values[i], /*static_storage=*/false,
                        /*no_index=*/true});
    }
    if (tracer->records_messages()) {
      tracer_owner_ = context_->call_tracer_;  // kept while the attempt's messages may come
      set_message_tracer(tracer);
    }
  }

  auto* transport = static_cast<http2::ClientTransport*>(connection_);
  if (transport->is_http1() && sent_type_.protocol == WireProtocol::kGrpc) {
    closed_ = true;
    connection_ = nullptr;
    complete(absl::UnimplementedError(
        "gRPC needs HTTP/2: over HTTP/1.1 a channel speaks gRPC-Web or Connect "
        "(ChannelOptions::protocol)"));
    abort(status_);
    return;
  }
  idempotent_request = context_->idempotent();
  Ref<ClientCall> for_connection(this);  // released in on_closed once the connection has it
  if (transport->submit_request(this, fields) < 0) {
    closed_ = true;
    connection_ = nullptr;
    for_connection.reset();
    never_processed_ = true;
    complete(absl::UnavailableError("the connection cannot take a new stream"));
    abort(status_);
    return;
  }
  static_cast<void>(for_connection.release());  // the connection counts it now
  if (context_->parent_ != nullptr) link_to_parent();
  if (deadline != ClientContext::Clock::time_point::max()) arm_deadline(deadline);
}

void ClientCall::submit_get() {
  std::unique_ptr<PendingGet> get = std::move(pending_get_);
  const std::string message = outbound.to_string();
  outbound.clear();
  outbound_end = true;
  const std::string path =
      get->path + connect_get_query(message,
                                    sent_type_.codec == MessageCodec::kJson ? "json" : "proto",
                                    send_compression() == Compression::kIdentity
                                        ? std::string_view()
                                        : compression_name(send_compression()));
  submit(path, get->authority, get->user_agent, 0, /*get=*/true);
}

template <class Message>
absl::Status ClientCall::send_get(const Message& msg, WriteOptions options) {
  if (done_) return status_.ok() ? absl::FailedPreconditionError("the call has ended") : status_;
  set_send_compression(context_->compression());
  if (absl::Status s = enqueue_message(msg, options); !s.ok()) {
    pending_get_.reset();
    closed_ = true;
    connection_ = nullptr;
    complete(s);
    abort(status_);
    return s;
  }
  submit_get();
  return done_ ? status_ : absl::OkStatus();
}

void ClientCall::link_to_parent() {
  parent_ = context_->parent_;
  // Runs on the parent's thread, under its link's lock: it only hands the cancel to this call's
  // thread. complete() unregisters before the call can go, so `this` is alive here.
  parent_registration_ = parent_->add([this](const absl::Status& why) {
    asio::post(executor(), [self = Ref<ClientCall>(this), why] {
      // The parent's deadline is this call's too: past it, the call failed by its deadline,
      // whichever side noticed first (as on_stream_closed reads a CANCEL).
      if (self->deadline_ <= ClientContext::Clock::now()) {
        self->cancel(absl::DeadlineExceededError("deadline exceeded"));
      } else {
        self->cancel(why);
      }
    });
  });
}

void ClientCall::begin_trailers() {
  // Outside Trailers-Only, the call's status is the trailers' alone (a grpc-status in the
  // response headers does not count, as in grpc-go).
  in_trailers_ = true;
  has_grpc_status_ = false;
  grpc_message_.clear();
  status_details_.clear();
}

bool ClientCall::on_header(std::string_view name, std::string_view value) {
  // RFC 9113 §6.5.2: the header list limit bounds each block (headers, trailers, a 1xx), not
  // their sum; on_headers_done starts the count again.
  header_bytes_ += name.size() + value.size() + 32;
  if (header_bytes_ > max_header_bytes_) {
    rejected_ = absl::ResourceExhaustedError(
        absl::StrCat("a header block of the response is over the ", max_header_bytes_,
                     "-byte limit (ChannelOptions::max_header_list_size)"));
    return false;
  }
  if (header_is(name, ":status")) {
    int code = 0;
    for (char c : value) code = code * 10 + (c - '0');
    // RFC 9110 §15.2: an informational (1xx) response comes before the final one, whose
    // headers follow in a block of their own; its fields are neither headers nor trailers.
    if (code >= 100 && code < 200 && !initial_done_) {
      informational_ = true;
      return true;
    }
    http_status_ = code;
    return true;
  }
  if (informational_) return true;
  if (is_connect()) [[unlikely]]
    return on_connect_header(name, value);
  if (initial_done_ && !in_trailers_) begin_trailers();
  if (header_is(name, "grpc-status")) {
    has_grpc_status_ = true;
    grpc_status_ = parse_grpc_status(value);
    return true;
  }
  if (header_is(name, "grpc-message")) {
    grpc_message_ = percent_decode(value);
    return true;
  }
  if (header_is(name, "grpc-encoding")) {
    // In the response headers it names what compressed responses are in; it must come before
    // any DATA, and trailers cannot change it.
    if (!initial_done_) set_inbound_encoding(value);
    return true;
  }
  if (header_is(name, "grpc-retry-pushback-ms")) {
    retry_pushback_ms_ = parse_retry_pushback(value);
    return true;
  }
  if (header_is(name, "content-type")) {
    if (!initial_done_) response_type_ = classify_response_type(value);
    return true;
  }
  if (name[0] == ':' || header_starts_with(name, "grpc-")) {
    if (header_is(name, "grpc-status-details-bin")) {
      if (std::optional<std::string> raw = decode_binary_header(value)) status_details_ = *raw;
    }
    return true;
  }
  Metadata& md = initial_done_ ? trailing_metadata_ : initial_metadata_;
  if (is_binary_metadata_key(name)) {
    std::optional<std::string> raw = decode_binary_header(value);
    if (!raw) {
      rejected_ = malformed_binary_header(name);
      return false;
    }
    md.add(name, *raw);
  } else {
    md.add(name, value);
  }
  return true;
}

ClientCall::ResponseType ClientCall::classify_response_type(std::string_view content_type) const {
  // What the request sent comes back in the usual case.
  if (content_type == content_type_name(sent_type_)) return ResponseType::kMatch;
  std::optional<ContentType> type = parse_content_type(content_type);
  if (!type) {
    // "application/xml" answering a Connect unary call names a codec, just not this one.
    const bool application = absl::StartsWithIgnoreCase(to_absl(content_type), "application/");
    return sent_type_.protocol == WireProtocol::kConnectUnary && application
               ? ResponseType::kOtherCodec
               : ResponseType::kForeign;
  }
  if (type->protocol != sent_type_.protocol) return ResponseType::kForeign;
  return type->codec == sent_type_.codec && !type->text ? ResponseType::kMatch
                                                        : ResponseType::kOtherCodec;
}

absl::Status ClientCall::response_type_status() const {
  switch (response_type_) {
    case ResponseType::kMatch:
      return absl::OkStatus();
    case ResponseType::kOtherCodec:
      // The protocol, in another codec: the messages cannot be read.
      return absl::InternalError(absl::StrCat("the response's content-type is not ",
                                              to_absl(content_type_name(sent_type_)),
                                              ", as requested"));
    case ResponseType::kMissing:
    case ResponseType::kForeign:
      break;
  }
  // Not a response of the protocol (say, a proxy's page): UNKNOWN, as gRPC's spec, grpc-go
  // and connect-go have it, rather than its body being read as messages.
  return absl::UnknownError(
      absl::StrCat("the response is not ", to_absl(protocol_name(sent_type_.protocol)),
                   ": its content-type is not ", to_absl(content_type_name(sent_type_))));
}

void ClientCall::on_headers_done() {
  header_bytes_ = 0;
  if (informational_) {
    informational_ = false;  // the final response is still to come
    return;
  }
  initial_done_ = true;
  ++header_blocks_;
  if (is_connect()) [[unlikely]] {
    on_connect_headers_done();
    return;
  }
  if (header_blocks_ != 1) return;
  if (http_status_ != 200) {
    // gRPC's HTTP-to-status table (doc/http-grpc-status-mapping.md), before any of the body is
    // read: whatever answered (a proxy's 502 page, say) is not a gRPC response, and its body is
    // not gRPC messages. A grpc-status it may carry does not count (as in grpc-go).
    reject_response(http_status_error());
  } else if (response_type_ != ResponseType::kMatch) {
    reject_response(response_type_status());
  }
}

absl::Status ClientCall::http_status_error() const {
  return absl::Status(status_code_from_http(http_status_),
                      absl::StrCat("unexpected HTTP status ", http_status_,
                                   grpc_message_.empty() ? "" : ": ", grpc_message_));
}

void ClientCall::reject_response(absl::Status status) {
  response_rejected_ = true;
  abort_call(std::move(status));
}

void ClientCall::on_end_frame(DecodedMessage&& frame) {
  if (done_) return;
  if (is_connect()) {
    on_connect_end_stream(std::move(frame));
    return;
  }
  if (header_blocks_ != 1) {
    abort_call(absl::InternalError("gRPC-Web trailers frame out of place"));
    return;
  }
  // HTTP/1 header syntax, one "name: value" per CRLF-ended line; names are lower case by the
  // spec, but a peer's capitals are taken as HTTP takes them.
  begin_trailers();
  const std::string block = frame.payload.to_string();
  for (absl::string_view line : absl::StrSplit(block, "\r\n", absl::SkipEmpty())) {
    const std::size_t colon = line.find(':');
    if (colon == absl::string_view::npos || colon == 0) {
      abort_call(absl::InternalError("malformed gRPC-Web trailers frame"));
      return;
    }
    const std::string name = absl::AsciiStrToLower(line.substr(0, colon));
    const absl::string_view value = absl::StripAsciiWhitespace(line.substr(colon + 1));
    if (!on_header(name, to_std(value))) {
      abort_call(absl::InternalError("gRPC-Web trailers rejected (too large or malformed)"));
      return;
    }
  }
  on_headers_done();
}

void ClientCall::on_remote_end() {
  if (is_connect()) [[unlikely]] {
    on_connect_remote_end();
    return;
  }
  CallStream::on_remote_end();
  // INTERNAL when the stream ended inside a message.
  absl::Status truncated = check_inbound_complete();
  // Trailers-Only: one HEADERS block, and it ended the stream (nothing of a message came).
  const bool body_came = messages_received() > 0 || !truncated.ok();
  if (header_blocks_ == 1 && body_came) {
    // The stream ended after the headers and a body, without trailers: a status the headers
    // carried does not count.
    has_grpc_status_ = false;
  } else if (header_blocks_ == 1) {
    trailers_only_ = true;
    // Trailers-Only: the one HEADERS block was the trailers, so its metadata is trailing
    // metadata (as grpc++ and grpc-go file it).
    for (const auto& [key, value] : initial_metadata_) trailing_metadata_.add(key, value);
    // gRPC-Web's Trailers-Only block is the response's headers too (a browser client reads
    // both from it, as connect-go's gRPC-Web client does): kept as initial metadata as well.
    if (sent_type_.protocol != WireProtocol::kGrpcWeb) initial_metadata_.clear();
  }
  if (http_status_ != 200) {
    complete(http_status_error());  // no headers came (on_headers_done maps the others)
  } else if (!has_grpc_status_) {
    complete(absl::InternalError("the server ended the stream without a grpc-status"));
  } else {
    absl::Status status(grpc_status_, grpc_message_);
    if (!status_details_.empty()) set_status_details(status, status_details_);
    if (status.ok() && !truncated.ok()) {
      // The stream ended inside a message: whatever the server says, the call did not deliver.
      status = std::move(truncated);
    } else if (status.ok() && expects_single_message() && messages_received() == 0) {
      // A unary or client-streaming call answered OK with no response: a response
      // cardinality violation, decided here so that observers see it too.
      status = single_response_status(std::move(status), false);
    }
    complete(std::move(status));
  }
  // The server has ended the call while our side is still open (it answered before we
  // half-closed): nothing we send matters any more. Close the stream as gRPC clients do
  // (RST_STREAM NO_ERROR) rather than leave it, and a writer waiting for window, hanging.
  if (connection_ != nullptr && !(outbound_end && outbound.empty())) {
    connection_->reset(this, http2::ErrorCode::kNoError);
  }
}

void ClientCall::on_stream_closed(http2::ErrorCode h2_error) {
  if (!done_) {
    never_processed_ = h2_error == http2::ErrorCode::kRefusedStream && header_blocks_ == 0;
    if (h2_error == http2::ErrorCode::kCancel && deadline_ <= ClientContext::Clock::now()) {
      // A server enforcing the same deadline resets the stream when it passes; that reset may
      // be read before our own deadline timer runs. The call failed by its deadline either way
      // (grpc-go's client does the same).
      complete(absl::DeadlineExceededError("deadline exceeded"));
    } else if (!rejected_.ok()) {
      complete(rejected_);  // on_header refused the response; this side reset the stream
    } else if (h2_error == http2::ErrorCode::kInternalError && reset_sent() &&
               !local_close_reason().empty()) {
      // This side would not send the request as it is (its header list is over the server's
      // SETTINGS_MAX_HEADER_LIST_SIZE): the reason names the limit.
      complete(absl::InternalError(to_absl(local_close_reason())));
    } else if (h2_error == http2::ErrorCode::kConnectionLost) {
      complete(
          local_close_reason().empty()
              ? absl::UnavailableError("the connection to the server was lost")
              : absl::UnavailableError(absl::StrCat("ferry closed the connection to the server: ",
                                                    to_absl(local_close_reason()))));
    } else {
      complete(status_from_rst_stream(h2_error, "the server", reset_sent()));
    }
  }
}

void ClientCall::on_receive_error(absl::Status status) {
  if (done_ && status_.ok()) {
    // The server's OK came in before the application read this message, which then failed to
    // inflate or parse: the call did not deliver, so it fails with that error (as grpc++ and
    // grpc-go report it), not with "no response message".
    status_ = status;
    abort(std::move(status));
    tell_observer();  // held back until now: this is the status the application sees
    return;
  }
  abort_call(std::move(status));
}

void ClientCall::on_message_taken(bool compressed) {
  // A read the application awaits took it: its context is alive. The trailers wait for
  // finish(), which takes the status they come with.
  context_->response_compressed_ = compressed;
  publish_initial_to(*context_);
  if (status_final()) tell_observer();
}

void ClientCall::publish_initial_to(ClientContext& context) {
  if (!initial_published_ && (initial_done_ || done_)) {
    // Assigned even when empty: a retry's attempt replaces what an earlier one left.
    context.initial_metadata_ = std::move(initial_metadata_);
    initial_published_ = true;
  }
}

void ClientCall::publish_to(ClientContext& context) {
  context.response_compressed_ = last_message_compressed();
  publish_initial_to(context);
  if (done_ && !trailing_published_) {
    context.trailing_metadata_ = std::move(trailing_metadata_);
    trailing_published_ = true;
  }
}

void ClientCall::tell_observer() {
  if (observer_ == nullptr || observer_told_) return;
  observer_told_ = true;
  observer_->on_call_done(*this);
}

void ClientCall::complete(absl::Status status) {
  if (done_) return;
  done_ = true;
  status_ = std::move(status);
  if (cluster_counts_ != nullptr) [[unlikely]]
    release_counts();
  disarm_deadline();
  if (parent_ != nullptr) parent_->remove(std::exchange(parent_registration_, 0));
  if (status_final()) tell_observer();
  done_event_.notify();
  wake_all();
}

void ClientCall::abort_call(absl::Status status) {
  if (done_) return;
  complete(status);
  abort(std::move(status));
  if (connection_ != nullptr) connection_->reset(this, http2::ErrorCode::kCancel);
}

void ClientCall::cancel(absl::Status why) {
  // The server's whole answer may be here already, unread, when the application cancels: the
  // cancel still wins until the application has read all of it (the messages left are dropped
  // and finish() says why), as grpc-go's and connect-go's clients have it. Once the status is
  // final (every message read, or a failure), the call has ended and a cancel changes nothing.
  if (done_ && !status_final()) {
    status_ = why;
    abort(std::move(why));
    tell_observer();
    return;
  }
  abort_call(std::move(why));
}

void ClientCall::detach_context() {
  if (first_observer_ != nullptr) first_observer_->detach_context();
}

void ClientCall::drop() {
  if (!done_) cancel(absl::CancelledError("the client dropped the call"));
  settle();
}

void ClientCall::set_observer(std::unique_ptr<ClientCallObserver> observer) {
  observer_ = std::move(observer);
  if (first_observer_ == nullptr) first_observer_ = observer_.get();
  if (status_final()) tell_observer();
}

asio::awaitable<absl::Status> ClientCall::write(const google::protobuf::MessageLite& msg, bool last,
                                                WriteOptions options) {
  if (pending_get_ != nullptr) co_return send_get(msg, options);
  if (done_) co_return status_.ok() ? absl::FailedPreconditionError("the call has ended") : status_;
  absl::Status written = co_await write_message(msg, last, options);
  // The call ended while the write waited for window: the message may never have left.
  if (written.ok() && done_ && !status_.ok()) written = status_;
  co_return written;
}

asio::awaitable<absl::Status> ClientCall::write_raw(const SliceChain& message) {
  if (pending_get_ != nullptr) co_return send_get(message, WriteOptions{});
  if (done_) co_return status_.ok() ? absl::FailedPreconditionError("the call has ended") : status_;
  absl::Status written = co_await write_message(message, /*last=*/false);
  if (written.ok() && done_ && !status_.ok()) written = status_;
  co_return written;
}

absl::Status ClientCall::send_request(const google::protobuf::MessageLite& msg) {
  if (pending_get_ != nullptr) [[unlikely]]
    return send_get(msg, WriteOptions{});
  if (done_) return status_.ok() ? absl::FailedPreconditionError("the call has ended") : status_;
  return queue_message(msg, /*last=*/true, WriteOptions{});
}

void ClientCall::writes_done() {
  if (pending_get_ != nullptr) {
    submit_get();  // no message: the query carries an empty one
    return;
  }
  if (outbound_end || closed_ || connection_ == nullptr) return;
  outbound_end = true;
  connection_->resume(this);
}

asio::awaitable<absl::Status> ClientCall::finish() {
  Ref<ClientCall> keep(this);
  while (!done_) co_await done_event_.wait();
  absl::Status status = status_;
  publish_to(*context_);
  settle();  // finish() is the status the application takes, read or not
  co_return status;
}

asio::awaitable<absl::Status> ClientCall::finish_with_response(
    google::protobuf::MessageLite& response) {
  // The steps of writes_done, read and finish, inlined: no nested coroutine is awaited after a
  // wait, since asio throws on that once the awaiting coroutine is cancelled.
  Ref<ClientCall> keep(this);
  writes_done();
  std::optional<bool> got;
  while (!(got = next_message(response))) co_await inbound_progress();
  while (!done_) co_await done_event_.wait();
  absl::Status status = single_response_status(status_, *got);
  publish_to(*context_);
  settle();
  co_return status;
}

}  // namespace ferry::detail
