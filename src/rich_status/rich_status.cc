// Implementation of ferry/rich_status.h over the core's payload (ferry/status_details.h).
#include "ferry/rich_status.h"

#include <optional>
#include <string>

#include "ferry/status_details.h"
#include "google/rpc/status.pb.h"

namespace ferry {

absl::Status to_status(const google::rpc::Status& details) {
  absl::Status status(static_cast<absl::StatusCode>(details.code()), details.message());
  if (!status.ok()) set_status_details(status, details.SerializeAsString());
  return status;
}

bool rich_status(const absl::Status& status, google::rpc::Status* out) {
  std::optional<std::string> bytes = status_details(status);
  return bytes.has_value() && out->ParseFromString(*bytes);
}

}  // namespace ferry
