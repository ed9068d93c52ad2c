// libFuzzer target: the strict JSON reader of service configs (src/client/json.h, client layer)
// fed arbitrary text: it must refuse or accept without crashing, and what it accepts must hold
// the same values when the input is read again with whitespace around it.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "client/json.h"
#include "fuzz_check.h"

namespace {

using ferry::detail::JsonValue;

bool same(const JsonValue& a, const JsonValue& b) {
  if (a.kind != b.kind || a.boolean != b.boolean || a.string != b.string ||
      a.array.size() != b.array.size() || a.object.size() != b.object.size()) {
    return false;
  }
  if (a.number != b.number && !(a.number != a.number && b.number != b.number)) return false;
  for (std::size_t i = 0; i < a.array.size(); ++i) {
    if (!same(a.array[i], b.array[i])) return false;
  }
  for (std::size_t i = 0; i < a.object.size(); ++i) {
    if (a.object[i].first != b.object[i].first || !same(a.object[i].second, b.object[i].second)) {
      return false;
    }
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto first = ferry::detail::parse_json(text);
  auto padded = ferry::detail::parse_json(" \n" + std::string(text) + "\t\r");
  FUZZ_CHECK(first.ok() == padded.ok());
  if (first.ok()) FUZZ_CHECK(same(*first, *padded));
  return 0;
}
