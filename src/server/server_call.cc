// Implementation of src/server/server_call.h.
#include "server/server_call.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "call/call_storage.h"
#include "call/wire_format.h"
#include "common/ref.h"
#include "common/strings.h"
#include "ferry/status_details.h"

namespace ferry::detail {
namespace {

constexpr std::string_view kStatusOk = "200";
// grpc-status values, indexed by code: static storage, so the trailer is never copied.
constexpr std::string_view kStatusCodes[] = {"0", "1",  "2",  "3",  "4",  "5",  "6",  "7", "8",
                                             "9", "10", "11", "12", "13", "14", "15", "16"};
constexpr std::string_view kGrpcContentType = "application/grpc";
// grpc-trace-bin's largest kept value: version 0 is 29 bytes; the room beyond is for fields a
// later version appends (parsed as far as known). A longer value is dropped unread.
constexpr std::size_t kMaxTraceBinBytes = 64;

}  // namespace

void* ServerCall::operator new(std::size_t) {
  return RecycledStorage<sizeof(ServerCall)>::allocate();  // final: every request is this size
}

void ServerCall::operator delete(void* p, std::size_t) noexcept {
  RecycledStorage<sizeof(ServerCall)>::release(p);
}

void ServerCall::release_idle_storage() noexcept {
  RecycledStorage<sizeof(ServerCall)>::release_idle();
}

ServerCall::ServerCall(ServerCallSite* site, http2::StreamCarrier* connection)
    : CallStream(connection->executor(), connection, site->limits, site->deadlines),
      site_(site),
      arena_(arena_block_, sizeof(arena_block_)) {
  site->active_calls->fetch_add(1, std::memory_order_relaxed);
  // "ipv6:[<address>%<scope>]:<port>" fits: never truncated in practice.
  const std::string& peer = site->peer;
  peer_size_ = std::min(peer.size(), sizeof(peer_));
  std::memcpy(peer_, peer.data(), peer_size_);
  connection_id_ = site->connection_id;
  if (site->identity != nullptr) identity_ = site->identity;
}

bool ServerCall::on_header(std::string_view name, std::string_view value) {
  header_bytes_ += name.size() + value.size() + 32;  // HPACK's accounting (RFC 7541 4.1)
  if (header_bytes_ > site_->max_header_bytes) return false;
  if (headers_done_) return true;  // trailers from a client carry nothing gRPC uses
  if (name.empty()) return false;
  if (name[0] == ':') {
    if (header_is(name, ":path")) {
      method_entry_ = site_->find_method(value, &stable_path_);
      if (method_entry_ == nullptr) path_ = value;
    } else if (header_is(name, ":method")) {
      is_post_ = header_is(value, "POST");
      if (!is_post_) method_ = value;
    }
    return true;
  }
  // header_is compares the length first and inlines the rest: every request carries several
  // headers, and std::string_view's out-of-line compare for each of these names showed in the
  // profile.
  if (header_is(name, "content-type")) {
    if (is_grpc_content_type(value) && is_grpc_proto_content_type(value)) {
      content_kind_ = ContentType{};  // gRPC with proto: the common case, no string kept
    } else {
      content_type_ = value;
      content_kind_ = parse_content_type(value);
    }
    return true;
  }
  if (header_is(name, "grpc-timeout")) {
    if (auto timeout = parse_grpc_timeout(value)) {
      const auto now = std::chrono::steady_clock::now();
      const auto max_left = std::chrono::steady_clock::time_point::max() - now;
      deadline_ =
          *timeout >= max_left
              ? std::chrono::steady_clock::time_point::max()
              : now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(*timeout);
    } else {
      timeout_malformed_ = true;
    }
    return true;
  }
  if (header_is(name, "grpc-encoding")) {
    encoding_ = value;
    return true;
  }
  if (header_is(name, "grpc-accept-encoding")) {
    client_accepts_gzip_ = client_accepts_gzip_ || site_->accepts_gzip(value);
    return true;
  }
  if (header_is(name, "te") || header_is(name, "content-length")) return true;  // transport-level
  if (header_starts_with(name, "access-control-request-")) {  // a CORS preflight's
    if (header_is(name, "access-control-request-headers")) cors_request_headers_ = value;
    return true;
  }
  if (header_is(name, "origin")) origin_ = value;  // and metadata, as any header
  if (header_starts_with(name, "connect-")) {      // the Connect protocol's own: not metadata
    on_connect_header(name, value);
    return true;
  }
  if (header_is(name, "content-encoding")) {  // Connect unary's compression
    content_encoding_ = value;
    return true;
  }
  if (header_is(name, "accept-encoding")) {
    http_accepts_gzip_ = http_accepts_gzip_ || site_->accepts_gzip(value);
    return true;
  }
  // A retried call's attempt count: shown to the handler, as grpc++ does (the retry design).
  if (header_is(name, "grpc-previous-rpc-attempts")) {
    client_metadata_.add(name, value);
    return true;
  }
  // gRFC A72's grpc-trace-bin (OpenCensus' binary span context): reserved, yet kept in the
  // metadata for a tracing interceptor (ferry/tracing.h), decoded in place. A value that is not
  // base64, or longer than the format, is dropped: a malformed trace context is ignored (the
  // call starts a new trace), never an error to the call.
  if (header_is(name, "grpc-trace-bin")) {
    char raw[kMaxTraceBinBytes];
    if (auto size = decode_binary_header_into(value, raw, sizeof raw)) {
      client_metadata_.add(name, std::string_view(raw, *size));
    }
    return true;
  }
  if (header_starts_with(name, "grpc-")) return true;  // reserved: not metadata
  if (is_binary_metadata_key(name)) {
    std::optional<std::string> raw = decode_binary_header(value);
    if (!raw) {
      // Answered with INTERNAL once routed (route_accepted), as grpc-go answers it, rather than
      // a reset that tells the client nothing. The first such key is named.
      if (malformed_binary_key_.empty()) malformed_binary_key_ = name;
      return true;
    }
    client_metadata_.add(name, *raw);
  } else {
    client_metadata_.add(name, value);
  }
  return true;
}

void ServerCall::on_headers_done() {
  if (headers_done_) return;
  headers_done_ = true;
  route();
}

void ServerCall::route() {
  if (!is_post_) {
    if (method_ == "OPTIONS") {
      answer_preflight();
    } else if (method_ == "GET") {
      route_connect_get();
    } else {
      reject_when_complete(405);
    }
    return;
  }
  if (!content_kind_) {
    reject_when_complete(415);
    return;
  }
  if (is_protocol(WireProtocol::kConnectUnary) || is_protocol(WireProtocol::kConnectStreaming)) {
    route_connect();
    return;
  }
  if (is_protocol(WireProtocol::kGrpc) && connection_->is_http1()) {
    reject_http(505);  // gRPC needs HTTP/2's trailers; gRPC-Web and Connect do not
    return;
  }
  if (content_kind_->codec == MessageCodec::kOther) {
    // gRPC with a codec ferry does not speak ("+foo"): the responses say so in gRPC's terms.
    content_kind_->codec = MessageCodec::kProto;
    finish(absl::UnimplementedError(absl::StrCat("content-type '", to_absl(content_type_),
                                                 "' names a codec this server does not "
                                                 "support (it supports proto and json)")),
           nullptr);
    return;
  }
  if (content_kind_->codec == MessageCodec::kJson || content_kind_->text) {
    set_message_format(MessageFormat{.json = content_kind_->codec == MessageCodec::kJson,
                                     .base64 = content_kind_->text});
  }
  route_accepted();
}

void ServerCall::route_accepted() {
  if (!malformed_binary_key_.empty()) {
    finish(malformed_binary_header(malformed_binary_key_), nullptr);
    return;
  }
  if (absl::Status s = check_timeout(); !s.ok()) {
    finish(s, nullptr);
    return;
  }
  if (absl::Status s = negotiate_encoding(); !s.ok()) {
    finish(s, nullptr);
    return;
  }
  if (method_entry_ == nullptr) {
    finish(absl::UnimplementedError(site_->methods->unknown_method_message(path_)), nullptr);
    return;
  }
  if (deadline_ != std::chrono::steady_clock::time_point::max()) {
    arm_deadline(deadline_);
  }
  if (method_entry_->kind == RpcKind::kUnary || method_entry_->kind == RpcKind::kServerStreaming) {
    run_when_ready(method_entry_);
  } else {
    run(method_entry_);
  }
}

absl::Status ServerCall::negotiate_encoding() {
  if (!encoding_.empty() && !parse_compression(encoding_)) {
    // The spec's answer to an encoding the server cannot inflate; every response carries
    // grpc-accept-encoding, which tells the client what to use instead.
    return absl::UnimplementedError(
        absl::StrCat("grpc-encoding '", encoding_,
                     "' is not supported (supported: ", to_absl(kAcceptEncoding), ")"));
  }
  set_inbound_encoding(encoding_);
  return absl::OkStatus();
}

absl::Status ServerCall::check_timeout() const {
  if (timeout_malformed_) return absl::InternalError("malformed grpc-timeout");
  if (deadline_ != std::chrono::steady_clock::time_point::max() &&
      deadline_ <= std::chrono::steady_clock::now()) {
    return absl::DeadlineExceededError("deadline exceeded before the call started");
  }
  return absl::OkStatus();
}

void ServerCall::fix_send_compression() {
  if (send_compression_fixed_) return;
  send_compression_fixed_ = true;
  // A client that did not list the encoding gets identity (the compression spec's rule).
  const bool accepted = requested_compression_ == Compression::kGzip && client_accepts_gzip_;
  set_send_compression(accepted ? requested_compression_ : Compression::kIdentity);
}

ServerCall::~ServerCall() = default;

void ServerCall::on_deadline() {
  if (finished_ || closed_) return;
  const absl::Status expired = absl::DeadlineExceededError("deadline exceeded");
  Ref<ServerCall> keep(this);  // finish() may drop what else keeps the call
  finish(expired, nullptr);
  abort(expired);
}

void ServerCall::run(const Method* method) {
  site_->runners->submit(Ref<ServerCall>(this), method);  // the handler's reference
}

void ServerCall::handler_done(const absl::Status& status) { finish(status, nullptr); }

void ServerCall::run_when_ready(const Method* method) {
  pending_method_ = method;
  expect_single_message();
  on_inbound_progress();
}

void ServerCall::on_inbound_progress() {
  // The handler runs once the client's side has ended, not at the first message: a second
  // request message is a cardinality violation (UNIMPLEMENTED), which must be known before the
  // handler answers, as grpc-go's server checks. A client sends its one request with END_STREAM,
  // so this is the same read either way.
  if (pending_method_ != nullptr && inbound_done()) {
    run(std::exchange(pending_method_, nullptr));
  }
}

void ServerCall::append_metadata(const Metadata& md, http2::HeaderList& out) {
  for (const auto& [key, value] : md) {
    // documented: invalid entries are dropped, but for the one reserved key a handler may send
    // (the retry design's pushback; the client checks its value).
    const bool pushback =
        key == "grpc-retry-pushback-ms" && validate_metadata("retry-pushback-ms", value).ok();
    if (!pushback && !validate_metadata(key, value).ok()) continue;
    if (is_binary_metadata_key(key)) {
      out.push_back({std::string(key), encode_binary_header(value)});
    } else {
      out.push_back({std::string(key), std::string(value)});
    }
  }
}

void ServerCall::append_status_details(const absl::Status& status) {
  if (std::optional<std::string> details = status_details(status)) {
    trailers.owned.push_back({"grpc-status-details-bin", encode_binary_header(*details)});
  }
}

void ServerCall::send_headers() {
  headers_sent_ = true;
  fix_send_compression();
  http2::HeaderList custom;
  append_metadata(initial_metadata_, custom);
  HeaderFields fields;
  fields.push_back(http2::HeaderField::literal(":status", kStatusOk));
  fields.push_back(http2::HeaderField::literal("content-type", response_content_type()));
  // A Connect stream names its compression in headers of its own.
  const bool connect = is_protocol(WireProtocol::kConnectStreaming);
  if (send_compression() != Compression::kIdentity) {
    fields.push_back(
        http2::HeaderField::literal(connect ? "connect-content-encoding" : "grpc-encoding",
                                    compression_name(send_compression())));
  }
  fields.push_back(connect ? http2::HeaderField::literal("connect-accept-encoding", "gzip")
                           : http2::HeaderField::literal("grpc-accept-encoding", kAcceptEncoding));
  for (const http2::Header& h : custom) fields.push_back({h.name, h.value});
  submit(fields, /*with_data=*/true);
}

asio::awaitable<absl::Status> ServerCall::write(const google::protobuf::MessageLite& msg,
                                                WriteOptions options) {
  send_initial_metadata();
  co_return co_await write_message(msg, /*last=*/false, options);
}

asio::awaitable<absl::Status> ServerCall::write_raw(const SliceChain& message) {
  send_initial_metadata();
  co_return co_await write_message(message, /*last=*/false);
}

void ServerCall::finish(const absl::Status& status_in, const google::protobuf::MessageLite* msg) {
  if (finished_ || closed_ || connection_ == nullptr) return;
  absl::Status status = status_in;
  if (msg != nullptr) {
    fix_send_compression();  // the headers below must say what this message is encoded with
    if (absl::Status s = enqueue_message(*msg, WriteOptions{}); !s.ok()) status = s;
  }
  finished_ = true;
  sent_status_ = status;
  disarm_deadline();
  if (is_protocol(WireProtocol::kConnectUnary) || is_protocol(WireProtocol::kConnectStreaming)) {
    finish_connect(status);
    wake_all();
    return;
  }

  // Built in place in the stream's trailers, which the connection sends after the last DATA.
  trailers.clear();
  const auto code = static_cast<std::size_t>(status.code());
  if (code < std::size(kStatusCodes)) {
    trailers.literal.push_back(http2::HeaderField::literal("grpc-status", kStatusCodes[code]));
  } else {
    trailers.owned.push_back({"grpc-status", std::to_string(code)});
  }
  if (!status.message().empty()) {
    trailers.owned.push_back({"grpc-message", percent_encode(to_std(status.message()))});
  }
  append_metadata(trailing_metadata_, trailers.owned);
  if (!status.ok()) append_status_details(status);

  if (!headers_sent_ && outbound.empty() && initial_metadata_.empty()) {
    // Trailers-Only: one HEADERS frame with END_STREAM carries everything. Not when the
    // handler added initial metadata: a client files a Trailers-Only block as trailers, so that
    // metadata goes in headers of its own first, as grpc-go's server sends it.
    headers_sent_ = true;
    HeaderFields fields;
    fields.push_back(http2::HeaderField::literal(":status", kStatusOk));
    fields.push_back(http2::HeaderField::literal("content-type", response_content_type()));
    fields.push_back(http2::HeaderField::literal("grpc-accept-encoding", kAcceptEncoding));
    fields.insert(fields.end(), trailers.literal.begin(), trailers.literal.end());
    for (const http2::Header& h : trailers.owned) fields.push_back({h.name, h.value});
    submit(fields, /*with_data=*/false);
    // Sent: nothing may follow the END_STREAM of a Trailers-Only response.
    trailers.clear();
  } else if (content_kind_ && content_kind_->protocol == WireProtocol::kGrpcWeb) {
    end_with_body_trailers();
  } else {
    if (!headers_sent_) send_headers();
    outbound_end = true;
    connection_->resume(this);
  }
  wake_all();  // a handler's pending read returns false: the call is over
}

void ServerCall::end_with_body_trailers() {
  if (!headers_sent_) send_headers();
  std::string block;
  auto add = [&block](std::string_view name, std::string_view value) {
    absl::StrAppend(&block, to_absl(name), ": ", to_absl(value), "\r\n");
  };
  for (const http2::HeaderField& h : trailers.literal) add(h.name, h.value);
  for (const http2::Header& h : trailers.owned) add(h.name, h.value);
  trailers.clear();
  constexpr std::uint8_t kTrailerFrame = 0x80;
  enqueue_frame(kTrailerFrame, block);
  outbound_end = true;
  connection_->resume(this);
}

std::string_view ServerCall::response_content_type() const {
  return content_kind_ ? content_type_name(*content_kind_) : kGrpcContentType;
}

absl::Status ServerCall::queue_response(const google::protobuf::MessageLite& msg) {
  if (finished_ || closed_ || connection_ == nullptr) return absl::OkStatus();  // over already
  fix_send_compression();  // the response headers must say what this message is encoded with
  return enqueue_message(msg, WriteOptions{});
}

std::string ServerCall::rejection_message(int http_status, absl::Status& status) const {
  std::string message;
  if (http_status == 404) {
    // An unknown method of a Connect call, which its clients read as unimplemented (gRPC's
    // mapping of 404 too).
    message = site_->methods->unknown_method_message(path_);
    status = absl::UnimplementedError(message);
    return message;
  }
  if (http_status == 505) {
    message = "gRPC needs HTTP/2 (over HTTP/1.1, call with gRPC-Web or the Connect protocol)";
  } else if (http_status == 415) {
    message = absl::StrCat("invalid gRPC request content-type '", to_absl(content_type_), "'");
  } else {
    message = absl::StrCat("invalid gRPC request method '", method_, "'");
  }
  status = absl::InternalError("not a gRPC request");
  return message;
}

void ServerCall::reject_http(int http_status) {
  if (finished_ || connection_ == nullptr) return;
  finished_ = true;
  send_rejection(http_status, /*with_body=*/false);
}

void ServerCall::reject_when_complete(int http_status) {
  if (finished_ || connection_ == nullptr) return;
  finished_ = true;  // no handler runs, and no other answer goes
  if (remote_ended_) {
    send_rejection(http_status, /*with_body=*/true);
    return;
  }
  deferred_rejection_ = http_status;
  sent_status_ = absl::InternalError("not a gRPC request");
  // Aborted, the call drops the body as it comes and gives its window back (CallStream::on_data).
  abort(sent_status_);
}

void ServerCall::send_rejection(int http_status, bool with_body) {
  headers_sent_ = true;
  const std::string code = std::to_string(http_status);
  const std::string message = rejection_message(http_status, sent_status_);
  const std::string encoded = percent_encode(message);
  const std::string_view grpc_status = http_status == 404 ? "12" : "13";
  // A response to HEAD has no body (RFC 9110 §9.3.2): over HTTP/1.1 one would be read as the
  // next response.
  with_body = with_body && method_ != "HEAD";
  HeaderFields fields = {
      {":status", code},
      http2::HeaderField::literal("content-type",
                                  with_body ? "text/plain; charset=utf-8" : kGrpcContentType),
      {"grpc-status", grpc_status},
      {"grpc-message", encoded},
  };
  if (with_body) {
    // The message and a newline, for whoever reads it in a terminal.
    outbound.append_copy(message.data(), message.size());
    outbound.append_copy("\n", 1);
    outbound_end = true;
  }
  submit(fields, with_body);
}

void ServerCall::submit(HeaderFields& fields, bool with_data) {
  if (!origin_.empty() && site_->allows_origin(origin_)) {
    // Every header of this response is for the browser's client to read: expose them all.
    cors_expose_.clear();
    for (const http2::HeaderField& h : fields) {
      if (h.name.empty() || h.name[0] == ':' || h.name == "content-type") continue;
      if (!cors_expose_.empty()) cors_expose_ += ", ";
      cors_expose_.append(h.name);
    }
    fields.push_back({"access-control-allow-origin", origin_});
    fields.push_back(http2::HeaderField::literal("vary", "origin"));
    if (!cors_expose_.empty()) fields.push_back({"access-control-expose-headers", cors_expose_});
  }
  connection_->submit_response(this, fields, with_data);
}

void ServerCall::answer_preflight() {
  if (finished_ || connection_ == nullptr) return;
  if (!site_->allows_origin(origin_)) {
    reject_when_complete(405);
    return;
  }
  finished_ = true;
  headers_sent_ = true;
  sent_status_ = absl::OkStatus();
  HeaderFields fields = {
      http2::HeaderField::literal(":status", "204"),
      {"access-control-allow-origin", origin_},
      http2::HeaderField::literal("access-control-allow-methods", "POST, GET, OPTIONS"),
      // A day, as Chromium caps it at two hours anyway.
      http2::HeaderField::literal("access-control-max-age", "86400"),
      http2::HeaderField::literal("vary", "origin"),
  };
  // Whatever headers the client's protocol and metadata need: the ones it asked for.
  if (!cors_request_headers_.empty()) {
    fields.push_back({"access-control-allow-headers", cors_request_headers_});
  }
  connection_->submit_response(this, fields, /*with_data=*/false);
}

void ServerCall::cancel(absl::Status why) {
  if (closed_) return;
  if (!finished_) sent_status_ = why;  // what the client learns from the RST_STREAM
  finished_ = true;
  if (connection_ != nullptr) connection_->reset(this, http2::ErrorCode::kCancel);
  abort(std::move(why));
}

const std::shared_ptr<CancellationLink>& ServerCall::cancellation_link() {
  if (cancellation_link_ == nullptr) {
    cancellation_link_ = std::make_shared<CancellationLink>();
    if (!abort_.ok()) cancellation_link_->cancel(abort_);
  }
  return cancellation_link_;
}

void ServerCall::on_aborted() {
  if (cancellation_link_ != nullptr) cancellation_link_->cancel(abort_);
}

void ServerCall::on_operation_cancelled() {
  // gRPC's reading of a handler that stops waiting: it abandons the call, and the client learns
  // of it as a cancellation (RST_STREAM(CANCEL)), not as a status the handler never chose.
  cancel(absl::CancelledError("the handler cancelled a read or write (its cancellation slot)"));
}

void ServerCall::on_receive_error(absl::Status status) {
  finish(status, nullptr);
  abort(std::move(status));
}

void ServerCall::on_parse_error(absl::Status status) {
  if (is_protocol(WireProtocol::kConnectUnary) || is_protocol(WireProtocol::kConnectStreaming)) {
    status = absl::InvalidArgumentError(status.message());
  }
  on_receive_error(std::move(status));
}

void ServerCall::on_remote_end() {
  // A request cut off by the end of the stream is an error, not the end of the requests.
  if (absl::Status s = check_inbound_complete(); !s.ok() && !finished_) {
    on_receive_error(std::move(s));
  }
  CallStream::on_remote_end();
  if (deferred_rejection_ != 0 && connection_ != nullptr) [[unlikely]] {
    send_rejection(std::exchange(deferred_rejection_, 0), /*with_body=*/true);
  }
}

void ServerCall::on_stream_closed(http2::ErrorCode h2_error) {
  if (!finished_) {
    abort(h2_error == http2::ErrorCode::kConnectionLost
              ? absl::CancelledError("the connection to the client was lost")
              : status_from_rst_stream(h2_error, "the client", reset_sent()));
  }
  site_->active_calls->fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace ferry::detail
