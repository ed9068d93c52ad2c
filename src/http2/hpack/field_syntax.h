// RFC 9113 §8.2.1's character rules for a field (http2 layer, private): what the session checks
// in every field it receives, and what the HPACK decoder checks once in a field that enters its
// dynamic table, so that a field the peer then sends by index (most of a gRPC connection's
// fields after its first call) is not checked again.
#pragma once

#include <string_view>

namespace ferry::http2::hpack {

// RFC 9110 §5.6.2 tchar, lower case only (RFC 9113 §8.2.1: upper case in a name is malformed).
constexpr bool is_field_name_char(unsigned char c) {
  if (c >= 'a' && c <= 'z') return true;
  if (c >= '0' && c <= '9') return true;
  switch (c) {
    case '!':
    case '#':
    case '$':
    case '%':
    case '&':
    case '\'':
    case '*':
    case '+':
    case '-':
    case '.':
    case '^':
    case '_':
    case '`':
    case '|':
    case '~':
      return true;
    default:
      return false;
  }
}

struct FieldNameChars {
  bool ok[256] = {};
  constexpr FieldNameChars() {
    for (int c = 0; c < 256; ++c) ok[c] = is_field_name_char(static_cast<unsigned char>(c));
  }
};
inline constexpr FieldNameChars kFieldNameChars;

// A regular field's name: lower-case token characters (an empty name is the caller's to judge).
inline bool valid_field_name(std::string_view name) {
  for (char c : name) {
    if (!kFieldNameChars.ok[static_cast<unsigned char>(c)]) return false;
  }
  return true;
}

// RFC 9113 §8.2.1: a value with NUL, CR or LF is malformed. A value that starts or ends with a
// space or a tab is taken, as grpc-go's and gRPC C++'s HTTP/2 take it (and Envoy's, which turns
// nghttp2's check off): gRPC's ASCII metadata and grpc-message may end in a space, and an
// endpoint that never re-serializes the field gains nothing from refusing it.
inline bool valid_field_value(std::string_view value) {
  for (char c : value) {
    if (c == '\0' || c == '\r' || c == '\n') return false;
  }
  return true;
}

// Both rules for a whole field: a non-empty name of token characters, or ':' and token characters
// (a pseudo-header's, whose name the session still compares with those it knows), and a value
// that passes.
inline bool valid_field_syntax(std::string_view name, std::string_view value) {
  if (name.empty()) return false;
  const std::string_view token = name[0] == ':' ? name.substr(1) : name;
  return !token.empty() && valid_field_name(token) && valid_field_value(value);
}

}  // namespace ferry::http2::hpack
