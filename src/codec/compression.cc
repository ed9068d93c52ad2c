// Implementation of ferry/compression.h: encoding names.
#include "ferry/compression.h"

namespace ferry {

std::string_view compression_name(Compression compression) {
  switch (compression) {
    case Compression::kIdentity:
      return "identity";
    case Compression::kGzip:
      return "gzip";
  }
  return "identity";
}

std::optional<Compression> parse_compression(std::string_view name) {
  while (!name.empty() && (name.front() == ' ' || name.front() == '\t')) name.remove_prefix(1);
  while (!name.empty() && (name.back() == ' ' || name.back() == '\t')) name.remove_suffix(1);
  if (name == "identity") return Compression::kIdentity;
  if (name == "gzip") return Compression::kGzip;
  return std::nullopt;
}

}  // namespace ferry
