// Implementation of ferry/status_details.h.
#include "ferry/status_details.h"

#include "absl/strings/cord.h"
#include "common/strings.h"

namespace ferry {

using detail::to_absl;

void set_status_details(absl::Status& status, std::string_view serialized) {
  status.SetPayload(to_absl(kStatusDetailsPayload), absl::Cord(to_absl(serialized)));
}

std::optional<std::string> status_details(const absl::Status& status) {
  auto payload = status.GetPayload(to_absl(kStatusDetailsPayload));
  if (!payload) return std::nullopt;
  return std::string(*payload);
}

}  // namespace ferry
