// Implementation of src/call/content_type.h.
#include "call/content_type.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "common/strings.h"

namespace ferry::detail {
namespace {

MessageCodec codec_named(std::string_view name) {
  if (absl::EqualsIgnoreCase(to_absl(name), "proto")) return MessageCodec::kProto;
  if (absl::EqualsIgnoreCase(to_absl(name), "json")) return MessageCodec::kJson;
  return MessageCodec::kOther;
}

// If type is prefix alone or prefix "+codec", the codec (proto when none is named).
std::optional<MessageCodec> codec_after(std::string_view type, std::string_view prefix) {
  if (!absl::StartsWithIgnoreCase(to_absl(type), to_absl(prefix))) return std::nullopt;
  const std::string_view rest = type.substr(prefix.size());
  if (rest.empty()) return MessageCodec::kProto;
  if (rest[0] != '+') return std::nullopt;
  return codec_named(rest.substr(1));
}

}  // namespace

std::optional<ContentType> parse_content_type(std::string_view value) {
  std::string_view type = value.substr(0, value.find(';'));
  type = to_std(absl::StripAsciiWhitespace(to_absl(type)));
  // Longest prefixes first: "application/grpc" is a prefix of the gRPC-Web types.
  if (auto codec = codec_after(type, "application/grpc-web-text")) {
    return ContentType{WireProtocol::kGrpcWeb, *codec, /*text=*/true};
  }
  if (auto codec = codec_after(type, "application/grpc-web")) {
    return ContentType{WireProtocol::kGrpcWeb, *codec, false};
  }
  if (auto codec = codec_after(type, "application/grpc")) {
    return ContentType{WireProtocol::kGrpc, *codec, false};
  }
  constexpr std::string_view kConnectStreaming = "application/connect+";
  if (absl::StartsWithIgnoreCase(to_absl(type), to_absl(kConnectStreaming))) {
    return ContentType{WireProtocol::kConnectStreaming,
                       codec_named(type.substr(kConnectStreaming.size())), false};
  }
  // Connect's unary calls name the codec as the media subtype; any other is not Connect.
  constexpr std::string_view kApplication = "application/";
  if (absl::StartsWithIgnoreCase(to_absl(type), to_absl(kApplication))) {
    const MessageCodec codec = codec_named(type.substr(kApplication.size()));
    if (codec != MessageCodec::kOther)
      return ContentType{WireProtocol::kConnectUnary, codec, false};
  }
  return std::nullopt;
}

std::string_view protocol_name(WireProtocol protocol) {
  switch (protocol) {
    case WireProtocol::kGrpc:
      return "gRPC";
    case WireProtocol::kGrpcWeb:
      return "gRPC-Web";
    case WireProtocol::kConnectUnary:
    case WireProtocol::kConnectStreaming:
      return "Connect";
  }
  return "gRPC";
}

std::string_view content_type_name(const ContentType& type) {
  const bool json = type.codec == MessageCodec::kJson;
  switch (type.protocol) {
    case WireProtocol::kGrpc:
      return json ? "application/grpc+json" : "application/grpc";
    case WireProtocol::kGrpcWeb:
      if (type.text)
        return json ? "application/grpc-web-text+json" : "application/grpc-web-text+proto";
      return json ? "application/grpc-web+json" : "application/grpc-web+proto";
    case WireProtocol::kConnectUnary:
      return json ? "application/json" : "application/proto";
    case WireProtocol::kConnectStreaming:
      return json ? "application/connect+json" : "application/connect+proto";
  }
  return "application/grpc";
}

}  // namespace ferry::detail
