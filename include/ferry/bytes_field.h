// ferry/bytes_field.h: a message's large `bytes` field carried by reference (codec layer). A
// protobuf message is the encodings of its fields in any order, so a message with a large body
// is its small rest, serialized as usual, followed by the body's field: a tag, a length and the
// body's slices, shared rather than copied. On receipt, the body's field is cut out of the
// message as slices of the blocks it arrived in, and the rest is parsed as usual. With
// ServerContext::write_raw / read_raw (and ClientStream's) this sends and receives a file chunk
// or a buffer from another connection without copying it into or out of a message.
#pragma once

#include <cstdint>

#include "absl/status/status.h"
#include "ferry/slice_chain.h"

namespace google::protobuf {
class MessageLite;
}

namespace ferry {

// Appends to out the encoding of a message holding rest's fields plus the length-delimited
// (bytes or string) field field_number set to body, which is shared, not copied: the cost is
// rest's serialization plus one reference per slice of body. rest should leave that field
// unset (if set, the body, which comes later, is what a parser keeps). The result is a whole
// message, not framed: send it with write_raw. Errors: INVALID_ARGUMENT for a field number
// outside 1..2^29-1; RESOURCE_EXHAUSTED when the message would pass 4 GiB.
[[nodiscard]] absl::Status append_with_bytes_field(const google::protobuf::MessageLite& rest,
                                                   std::uint32_t field_number,
                                                   const SliceChain& body, SliceChain& out);

// Cuts every occurrence of the length-delimited field field_number out of message, leaving the
// other fields (parse them with parse_message), and moves the last occurrence's bytes into body
// by reference (protobuf keeps the last value of a singular field). No occurrence leaves body
// empty. Cost: a walk over the message's top-level field headers, skipping each field's bytes
// without reading them; the body is never touched. Errors (message and body unchanged):
// INTERNAL for a malformed encoding, a group, or field_number with another wire type.
[[nodiscard]] absl::Status take_bytes_field(SliceChain& message, std::uint32_t field_number,
                                            SliceChain& body);

}  // namespace ferry
