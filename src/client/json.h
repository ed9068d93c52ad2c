// A small strict JSON reader (client layer, private), for gRPC service configs: RFC 8259 text
// into a tree of values, nothing more (no comments, no trailing commas, no duplicate keys,
// nesting at most 32 deep). Service configs come from users or resolvers, so bad input is an
// INVALID_ARGUMENT saying where, never a crash.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ferry::detail {

struct JsonMember;

struct JsonValue {
  enum class Kind { kNull, kBool, kNumber, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  bool boolean = false;
  double number = 0;
  std::string string;
  std::vector<JsonValue> array;
  std::vector<JsonMember> object;  // in document order

  // The member named key of an object, or null.
  const JsonValue* find(std::string_view key) const;
};

struct JsonMember {
  std::string first;  // the name
  JsonValue second;
};

absl::StatusOr<JsonValue> parse_json(std::string_view text);

// "null", "a boolean", "a number", "a string", "an array", "an object": for errors that say what
// a field must be and what it was.
const char* json_kind_name(JsonValue::Kind kind);

}  // namespace ferry::detail
