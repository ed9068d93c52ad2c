// Messages in protobuf's JSON mapping (calls layer, private): the "json" codec of gRPC, gRPC-Web
// and the Connect protocol. protobuf's own util/json_util does the work, through the message's
// descriptor, so only generated messages with descriptors (not LITE_RUNTIME ones) speak JSON.
#pragma once

#include <string>

#include "absl/status/status.h"
#include "ferry/slice_chain.h"

namespace google::protobuf {
class MessageLite;
}

namespace ferry::detail {

// Parses JSON text into msg. INVALID_ARGUMENT-like failures come back as INTERNAL, gRPC's status
// for a message that does not parse; a message without a descriptor gets INTERNAL too.
absl::Status parse_json_message(const SliceChain& json, google::protobuf::MessageLite& msg);

// Writes msg as JSON text into out (replacing it).
absl::Status print_json_message(const google::protobuf::MessageLite& msg, std::string& out);

}  // namespace ferry::detail
