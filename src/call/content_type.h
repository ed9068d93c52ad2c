// Which protocol a request speaks and how its messages are written, from its content-type
// (calls layer, private). One server port answers gRPC, gRPC-Web and the Connect protocol; the
// content-type is what tells them apart, as connect-go and Envoy's gRPC-Web filter read it.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace ferry::detail {

enum class WireProtocol : std::uint8_t {
  kGrpc,              // application/grpc[+codec]
  kGrpcWeb,           // application/grpc-web[-text][+codec]: trailers in the body
  kConnectUnary,      // application/<codec>: one bare message per body, errors as JSON
  kConnectStreaming,  // application/connect+<codec>: enveloped, an end-of-stream message
};

enum class MessageCodec : std::uint8_t {
  kProto,
  kJson,   // protobuf's JSON mapping
  kOther,  // named, but not one ferry speaks
};

struct ContentType {
  WireProtocol protocol = WireProtocol::kGrpc;
  MessageCodec codec = MessageCodec::kProto;
  bool text = false;  // gRPC-Web's "-text": the body is base64

  bool operator==(const ContentType&) const = default;
};

// The media type, without parameters (";charset=utf-8") or case, classified; nullopt when it
// names none of the protocols ferry serves (an HTTP 415 for a server).
std::optional<ContentType> parse_content_type(std::string_view value);

// "gRPC", "gRPC-Web", "Connect": for messages.
std::string_view protocol_name(WireProtocol protocol);

// What a response (or a client's request) of that kind carries as its content-type: always with
// the codec named ("application/grpc" for gRPC with proto, as every gRPC peer sends it).
std::string_view content_type_name(const ContentType& type);

}  // namespace ferry::detail
