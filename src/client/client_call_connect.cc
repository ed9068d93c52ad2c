// The Connect protocol's share of src/client/client_call.h (connectrpc.com/docs/protocol): its
// response headers (trailers of a unary call as "trailer-" headers), the JSON error body of a
// unary call that failed, and a stream's end-of-stream message, which carries its status and
// trailers. What ends the call follows connect-go's client, which the conformance suite judges
// ferry's by.
#include "absl/strings/str_cat.h"
#include "call/connect_wire.h"
#include "call/wire_format.h"
#include "client/client_call.h"
#include "client/unary_call.h"
#include "common/strings.h"

namespace ferry::detail {

bool ClientCall::on_connect_header(std::string_view name, std::string_view value) {
  const bool unary = sent_type_.protocol == WireProtocol::kConnectUnary;
  if (header_is(name, "content-type")) {
    if (!initial_done_) {
      response_type_ = classify_response_type(value);
      const std::optional<ContentType> type = parse_content_type(value);
      response_json_ = type && type->protocol == WireProtocol::kConnectUnary &&
                       type->codec == MessageCodec::kJson;
    }
    return true;
  }
  // A unary response's body is compressed as a whole (content-encoding); a stream's envelopes
  // each say whether they are, in connect-content-encoding.
  if (unary ? header_is(name, "content-encoding") : header_is(name, "connect-content-encoding")) {
    if (!initial_done_) set_inbound_encoding(value);
    return true;
  }
  // The protocol's own headers are not metadata.
  if (name[0] == ':' || header_is(name, "content-length") || header_is(name, "content-encoding") ||
      header_is(name, "accept-encoding") || header_starts_with(name, "connect-")) {
    return true;
  }
  Metadata* md = initial_done_ ? &trailing_metadata_ : &initial_metadata_;
  if (unary && header_starts_with(name, "trailer-")) {
    name.remove_prefix(8);
    md = &trailing_metadata_;
  }
  if (is_binary_metadata_key(name)) {
    std::optional<std::string> raw = decode_binary_header(value);
    if (!raw) {
      rejected_ = malformed_binary_header(name);
      return false;
    }
    md->add(name, *raw);
  } else {
    md->add(name, value);
  }
  return true;
}

void ClientCall::on_connect_headers_done() {
  if (header_blocks_ != 1) return;  // HTTP trailers: Connect sends none, and they say nothing
  if (sent_type_.protocol == WireProtocol::kConnectStreaming) {
    // A stream's errors come in its end-of-stream message; another HTTP status is the failure
    // of whatever answered instead of a Connect server.
    if (http_status_ != 200) {
      reject_response(http_status_error());
    } else if (response_type_ != ResponseType::kMatch) {
      reject_response(response_type_status());
    }
    return;
  }
  if (http_status_ == 200) {
    if (response_type_ != ResponseType::kMatch) reject_response(response_type_status());
    return;
  }
  if (http_status_ == 304 && sent_get_) {
    reject_response(absl::UnknownError("HTTP status 304 (not modified) for a GET"));
    return;
  }
  // An error: its JSON body says which, read once the body is complete (on_connect_remote_end).
  // It is Connect's Trailers-Only, which commits nothing (the retry design). A body of another
  // type is not Connect's: the HTTP status says what it can.
  if (response_json_) {
    connect_error_body_ = true;
    response_rejected_ = true;
  } else {
    reject_response(http_status_error());
  }
}

void ClientCall::on_connect_remote_end() {
  if (connect_error_body_) {
    // Not the call's message: the error object, within the receive limit as it came.
    absl::StatusOr<std::string> body = take_unframed_body();
    absl::Status status;
    if (!body.ok()) {
      status = body.status();
    } else if (std::optional<ConnectError> error = parse_connect_error_json(*body)) {
      status = error->to_status(status_code_from_http(http_status_));
    } else {
      status = http_status_error();
    }
    complete(status);
    abort(std::move(status));
    CallStream::on_remote_end();
    return;
  }
  CallStream::on_remote_end();  // a unary call's body becomes its one message here
  absl::Status status = check_inbound_complete();
  if (!status.ok()) {
    complete(std::move(status));
  } else if (sent_type_.protocol == WireProtocol::kConnectUnary) {
    complete(absl::OkStatus());  // 200: the body is the response; reading it may still fail
  } else if (!connect_end_) {
    complete(absl::InternalError("the stream ended without Connect's end-of-stream message"));
  } else {
    complete(single_response_status(connect_status_,
                                    !expects_single_message() || messages_received() > 0));
  }
  // As for gRPC: once the server is done, what we might still send matters no more.
  if (connection_ != nullptr && !(outbound_end && outbound.empty())) {
    connection_->reset(this, http2::ErrorCode::kNoError);
  }
}

void ClientCall::on_connect_end_stream(DecodedMessage&& frame) {
  if (connect_end_) {
    abort_call(absl::InternalError("a Connect stream went on after its end-of-stream message"));
    return;
  }
  connect_end_ = true;
  std::optional<ConnectEndStream> end = parse_connect_end_stream_json(frame.payload.to_string());
  if (!end) {
    abort_call(absl::InternalError("malformed Connect end-of-stream message"));
    return;
  }
  for (const auto& [key, value] : end->metadata) trailing_metadata_.add(key, value);
  connect_status_ =
      end->error ? end->error->to_status(absl::StatusCode::kUnknown) : absl::OkStatus();
}

}  // namespace ferry::detail
