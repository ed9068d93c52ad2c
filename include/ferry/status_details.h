// ferry/status_details.h: rich error details (calls layer, public): the google.rpc.Status that
// gRPC peers exchange in the grpc-status-details-bin trailer, carried on absl::Status as a
// payload. A handler returns a status with details attached and ferry's server sends them; ferry's
// client attaches those it receives to the call's status. This header moves the serialized bytes;
// ferry/rich_status.h (library ferry::rich_status) builds and reads google.rpc.Status itself.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace ferry {

// The payload URL under which an absl::Status carries the serialized google.rpc.Status.
inline constexpr std::string_view kStatusDetailsPayload = "type.googleapis.com/google.rpc.Status";

// Attaches serialized google.rpc.Status bytes to status (replacing any). Ignored on an OK status
// (absl::Status keeps no payload on OK, and gRPC sends no details with OK). The google.rpc.Status
// should carry the same code and message as status: peers read both.
void set_status_details(absl::Status& status, std::string_view serialized);

// The serialized google.rpc.Status that status carries, if any (on the client: what the server
// sent in grpc-status-details-bin).
std::optional<std::string> status_details(const absl::Status& status);

}  // namespace ferry
