// ferry/rich_status.h: google.rpc.Status as rich error details on absl::Status (library
// ferry::rich_status, above the core; its generated google/rpc/status.pb.h is installed with
// it). The core moves the serialized bytes (ferry/status_details.h); these helpers build and
// read the message itself.
//
//   google::rpc::Status details;
//   details.set_code(static_cast<int>(absl::StatusCode::kInvalidArgument));
//   details.set_message("name is empty");
//   details.add_details()->PackFrom(bad_request);           // any message, as google.protobuf.Any
//   co_return ferry::to_status(details);                     // in a handler
//   ...
//   google::rpc::Status got;
//   if (ferry::rich_status(call_status, &got)) { ... got.details(0).UnpackTo(&bad_request) ... }
#pragma once

#include "absl/status/status.h"

namespace google::rpc {
class Status;
}

namespace ferry {

// An absl::Status with details' code and message and details attached (sent by ferry's server as
// grpc-status-details-bin). A details with code 0 (OK) gives OK, which carries no details.
absl::Status to_status(const google::rpc::Status& details);

// Parses the google.rpc.Status that status carries into *out: true when there was one and it
// parsed (on the client: what the server sent), false otherwise.
bool rich_status(const absl::Status& status, google::rpc::Status* out);

}  // namespace ferry
