// The Connect protocol's share of src/server/server_call.h (connectrpc.com/docs/protocol): its
// headers, its routing (POST for every call kind, GET for methods without side effects), and its
// responses (a unary call's one response with its trailers as "trailer-" headers and errors as
// JSON with their HTTP status; a streaming call's end-of-stream message).
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "call/connect_wire.h"
#include "call/wire_format.h"
#include "common/strings.h"
#include "server/server_call.h"

namespace ferry::detail {
namespace {

// Whether the call's protocol version header, when sent, is the one this server speaks.
constexpr std::string_view kConnectVersion = "1";

// A query component, '+' for a space and %XX escapes decoded (application/x-www-form-urlencoded,
// which is how browsers and connect-go write a GET's query).
std::string query_decode(std::string_view component) {
  std::string plus_as_space(component);
  for (char& c : plus_as_space) {
    if (c == '+') c = ' ';
  }
  return percent_decode(plus_as_space);
}

struct GetQuery {
  std::string encoding;  // the codec: "proto" or "json"
  std::string message;   // as sent (base64url when base64 is 1)
  bool base64 = false;
  std::string compression;  // the message's compression, "" for identity
  bool has_message = false;
};

GetQuery parse_get_query(std::string_view query) {
  GetQuery out;
  for (absl::string_view pair : absl::StrSplit(to_absl(query), '&', absl::SkipEmpty())) {
    const std::size_t eq = pair.find('=');
    const std::string key = query_decode(to_std(pair.substr(0, eq)));
    const std::string value =
        eq == absl::string_view::npos ? std::string() : query_decode(to_std(pair.substr(eq + 1)));
    if (key == "encoding") {
      out.encoding = value;
    } else if (key == "message") {
      out.message = value;
      out.has_message = true;
    } else if (key == "base64") {
      out.base64 = value == "1";
    } else if (key == "compression") {
      out.compression = value == "identity" ? "" : value;
    }
  }
  return out;
}

}  // namespace

void ServerCall::on_connect_header(std::string_view name, std::string_view value) {
  if (header_is(name, "connect-timeout-ms")) {
    connect_timeout_ = value;
  } else if (header_is(name, "connect-content-encoding")) {
    connect_stream_encoding_ = value;
  } else if (header_is(name, "connect-accept-encoding")) {
    connect_accepts_gzip_ = connect_accepts_gzip_ || site_->accepts_gzip(value);
  } else if (header_is(name, "connect-protocol-version")) {
    connect_version_bad_ = value != kConnectVersion;
  }
}

bool ServerCall::apply_connect_headers() {
  const bool unary = is_protocol(WireProtocol::kConnectUnary);
  set_message_format(
      MessageFormat{.json = content_kind_->codec == MessageCodec::kJson, .unframed = unary});
  // Each kind names its compression in its own headers: HTTP's for unary (the body is the
  // message), connect-* for streams (each envelope says whether it is compressed).
  encoding_ = unary ? content_encoding_ : connect_stream_encoding_;
  if (encoding_ == "identity") encoding_.clear();
  client_accepts_gzip_ = unary ? http_accepts_gzip_ : connect_accepts_gzip_;
  if (connect_version_bad_) {
    finish(absl::InvalidArgumentError("connect-protocol-version must be 1"), nullptr);
    return false;
  }
  if (!connect_timeout_.empty()) {
    std::optional<std::chrono::milliseconds> timeout = parse_connect_timeout(connect_timeout_);
    if (!timeout) {
      finish(absl::InvalidArgumentError(
                 absl::StrCat("malformed connect-timeout-ms '", connect_timeout_, "'")),
             nullptr);
      return false;
    }
    deadline_ = std::chrono::steady_clock::now() + *timeout;
  } else {
    deadline_ = std::chrono::steady_clock::time_point::max();  // grpc-timeout is not Connect's
  }
  timeout_malformed_ = false;
  return true;
}

void ServerCall::route_connect() {
  const bool unary = is_protocol(WireProtocol::kConnectUnary);
  // A method answers the content types of its kind only (as connect-go's handlers do): a unary
  // body for a streaming method cannot be read, nor an envelope for a unary one.
  if (content_kind_->codec == MessageCodec::kOther ||
      (method_entry_ != nullptr && (method_entry_->kind == RpcKind::kUnary) != unary)) {
    reject_http(415);
    return;
  }
  if (method_entry_ == nullptr) {
    reject_http(404);  // as an HTTP router answers a path it does not know (connect-go's mux)
    return;
  }
  if (!apply_connect_headers()) return;
  route_accepted();
}

void ServerCall::route_connect_get() {
  // The path carries the query, so the method was not found by it: look again without.
  const std::string full = path_;
  const std::size_t question = full.find('?');
  if (question == std::string::npos) {
    reject_when_complete(405);  // no query: not a Connect GET
    return;
  }
  method_entry_ = site_->find_method(std::string_view(full).substr(0, question), &stable_path_);
  if (method_entry_ == nullptr) path_ = full.substr(0, question);
  const GetQuery query = parse_get_query(std::string_view(full).substr(question + 1));
  const MessageCodec codec =
      query.encoding == "proto"
          ? MessageCodec::kProto
          : (query.encoding == "json" ? MessageCodec::kJson : MessageCodec::kOther);
  if (codec == MessageCodec::kOther || !query.has_message) {
    content_kind_ = ContentType{WireProtocol::kConnectUnary, MessageCodec::kJson, false};
    finish(absl::InvalidArgumentError(query.has_message ? "missing or unknown encoding parameter"
                                                        : "missing message parameter"),
           nullptr);
    return;
  }
  content_kind_ = ContentType{WireProtocol::kConnectUnary, codec, false};
  if (method_entry_ == nullptr) {
    reject_http(404);
    return;
  }
  if (method_entry_->kind != RpcKind::kUnary || !method_entry_->no_side_effects) {
    reject_http(405);  // GET only for methods declared without side effects
    return;
  }
  content_encoding_ = query.compression;
  if (!apply_connect_headers()) return;
  std::string message = query.message;
  if (query.base64) {
    std::string decoded;
    // Unpadded base64url, as the protocol writes it; padded is accepted too.
    if (!absl::WebSafeBase64Unescape(to_absl(message), &decoded)) {
      finish(absl::InvalidArgumentError("the message parameter is not base64url"), nullptr);
      return;
    }
    message = std::move(decoded);
  }
  set_unframed_body(message);
  route_accepted();
}

void ServerCall::finish_connect(const absl::Status& status) {
  if (is_protocol(WireProtocol::kConnectStreaming)) {
    if (!headers_sent_) send_headers();
    enqueue_frame(kConnectEndStreamFlag, connect_end_stream_json(status, trailing_metadata_));
    outbound_end = true;
    connection_->resume(this);
    return;
  }
  // Unary: one HEADERS block (the trailers with it, as "trailer-" fields), then the body.
  headers_sent_ = true;
  const std::string http_status =
      std::to_string(status.ok() ? 200 : connect_http_status(status.code()));
  http2::HeaderList custom;
  append_metadata(initial_metadata_, custom);
  const std::size_t initial = custom.size();
  append_metadata(trailing_metadata_, custom);
  for (std::size_t i = initial; i < custom.size(); ++i) custom[i].name.insert(0, "trailer-");
  HeaderFields fields;
  fields.push_back({":status", http_status});
  if (status.ok()) {
    fields.push_back(http2::HeaderField::literal("content-type", response_content_type()));
    if (send_compression() != Compression::kIdentity) {
      fields.push_back(
          http2::HeaderField::literal("content-encoding", compression_name(send_compression())));
    }
  } else {
    // Errors are JSON whatever the codec; a message queued before the error is not sent.
    fields.push_back(http2::HeaderField::literal("content-type", "application/json"));
    outbound.clear();
    const std::string error = connect_error_json(status);
    outbound.append_copy(error.data(), error.size());
  }
  fields.push_back(http2::HeaderField::literal("accept-encoding", "gzip"));
  for (const http2::Header& h : custom) fields.push_back({h.name, h.value});
  outbound_end = true;
  submit(fields, /*with_data=*/true);
}

}  // namespace ferry::detail
