// HPACK's static table (RFC 7541 Appendix A) and a hash of its names built at compile time
// (http2 layer, private). See static_table.h.
#include "http2/hpack/static_table.h"

#include <array>

namespace ferry::http2::hpack {
namespace {

// RFC 7541 Appendix A; kStaticEntries[0] is index 1.
constexpr std::array<StaticEntry, kStaticTableSize> kStaticEntries = {{
    {":authority", ""},
    {":method", "GET"},
    {":method", "POST"},
    {":path", "/"},
    {":path", "/index.html"},
    {":scheme", "http"},
    {":scheme", "https"},
    {":status", "200"},
    {":status", "204"},
    {":status", "206"},
    {":status", "304"},
    {":status", "400"},
    {":status", "404"},
    {":status", "500"},
    {"accept-charset", ""},
    {"accept-encoding", "gzip, deflate"},
    {"accept-language", ""},
    {"accept-ranges", ""},
    {"accept", ""},
    {"access-control-allow-origin", ""},
    {"age", ""},
    {"allow", ""},
    {"authorization", ""},
    {"cache-control", ""},
    {"content-disposition", ""},
    {"content-encoding", ""},
    {"content-language", ""},
    {"content-length", ""},
    {"content-location", ""},
    {"content-range", ""},
    {"content-type", ""},
    {"cookie", ""},
    {"date", ""},
    {"etag", ""},
    {"expect", ""},
    {"expires", ""},
    {"from", ""},
    {"host", ""},
    {"if-match", ""},
    {"if-modified-since", ""},
    {"if-none-match", ""},
    {"if-range", ""},
    {"if-unmodified-since", ""},
    {"last-modified", ""},
    {"link", ""},
    {"location", ""},
    {"max-forwards", ""},
    {"proxy-authenticate", ""},
    {"proxy-authorization", ""},
    {"range", ""},
    {"referer", ""},
    {"refresh", ""},
    {"retry-after", ""},
    {"server", ""},
    {"set-cookie", ""},
    {"strict-transport-security", ""},
    {"transfer-encoding", ""},
    {"user-agent", ""},
    {"vary", ""},
    {"via", ""},
    {"www-authenticate", ""},
}};

static_assert(kStaticEntries[kStaticTableSize - 1].name == "www-authenticate");

// Open addressing over the 52 distinct names: slot -> index of the name's first entry (0: empty).
constexpr std::size_t kSlots = 128;

// Cheap and good enough for 52 names: the length and the first and last characters.
constexpr std::uint32_t name_hash(std::string_view name) {
  if (name.empty()) return 0;
  return static_cast<std::uint32_t>(name.size()) * 7 + static_cast<std::uint8_t>(name.front()) * 3 +
         static_cast<std::uint8_t>(name.back());
}

constexpr std::array<std::uint8_t, kSlots> build_slots() {
  std::array<std::uint8_t, kSlots> slots{};
  for (std::uint32_t i = 0; i < kStaticTableSize; ++i) {
    if (i > 0 && kStaticEntries[i - 1].name == kStaticEntries[i].name) continue;
    std::size_t slot = name_hash(kStaticEntries[i].name) % kSlots;
    while (slots[slot] != 0) slot = (slot + 1) % kSlots;
    slots[slot] = static_cast<std::uint8_t>(i + 1);
  }
  return slots;
}
constexpr std::array<std::uint8_t, kSlots> kSlotsTable = build_slots();

}  // namespace

const StaticEntry& static_entry(std::uint32_t index) { return kStaticEntries[index - 1]; }

StaticMatch find_static(std::string_view name, std::string_view value) {
  StaticMatch match;
  for (std::size_t slot = name_hash(name) % kSlots;; slot = (slot + 1) % kSlots) {
    const std::uint32_t index = kSlotsTable[slot];
    if (index == 0) return match;
    if (kStaticEntries[index - 1].name != name) continue;
    match.name = index;
    // Entries of one name are consecutive (:method, :path, :scheme, :status).
    for (std::uint32_t i = index; i <= kStaticTableSize && kStaticEntries[i - 1].name == name;
         ++i) {
      if (kStaticEntries[i - 1].value == value) {
        match.exact = i;
        break;
      }
    }
    return match;
  }
}

}  // namespace ferry::http2::hpack
