// Conversions between std::string_view and absl::string_view (private, any layer). Debian's
// abseil is built with its own string_view type rather than an alias of std's, so the two meet
// explicitly where ferry's std-based code calls abseil (StrCat, hash-map lookups, Status).
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace ferry::detail {

inline absl::string_view to_absl(std::string_view s) { return {s.data(), s.size()}; }
inline std::string_view to_std(absl::string_view s) { return {s.data(), s.size()}; }

}  // namespace ferry::detail
