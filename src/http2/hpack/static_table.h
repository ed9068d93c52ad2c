// HPACK's static table (RFC 7541 Appendix A) and the encoder's lookup in it (http2 layer,
// private). Indexes are RFC 7541's: 1 to 61.
#pragma once

#include <cstdint>
#include <string_view>

namespace ferry::http2::hpack {

struct StaticEntry {
  std::string_view name;
  std::string_view value;
};

inline constexpr std::uint32_t kStaticTableSize = 61;

// The entry at `index`, 1 <= index <= kStaticTableSize.
const StaticEntry& static_entry(std::uint32_t index);

// Where the encoder finds a field in the static table: `exact` the index of name and value,
// `name` the index of the first entry of that name; 0 when there is none.
struct StaticMatch {
  std::uint32_t exact = 0;
  std::uint32_t name = 0;
};
StaticMatch find_static(std::string_view name, std::string_view value);

}  // namespace ferry::http2::hpack
