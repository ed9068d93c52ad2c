// How a call's messages cross the wire besides gRPC's default, binary protobuf in
// Length-Prefixed-Messages (calls layer, private): the JSON codec, gRPC-Web's base64 text
// bodies, and the Connect protocol's unary bodies, each one bare message.
#pragma once

#include <string>

#include "call/base64_body.h"
#include "ferry/slice_chain.h"

namespace ferry::detail {

struct MessageFormat {
  bool json = false;      // protobuf's JSON mapping (call/json_message.h)
  bool base64 = false;    // the body is base64 text (gRPC-Web's "-text" content types)
  bool unframed = false;  // the body is one message, without a prefix (Connect unary)

  bool plain() const { return !json && plain_body(); }
  // Whether the body is gRPC's Length-Prefixed-Messages as they are (JSON or not).
  bool plain_body() const { return !base64 && !unframed; }
};

// What a call with such a format keeps between reads and writes.
struct MessageFormatState {
  Base64BodyDecoder base64;
  SliceChain body;       // an unframed body as it arrives
  LooseTail body_loose;  // body's bytes by reference since it last copied
  std::string json;      // an outbound message's JSON, reused
};

}  // namespace ferry::detail
