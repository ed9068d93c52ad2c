// HTTP/2 frames (and header blocks) written by hand, for tests that play a peer byte by byte (test
// support): RFC 9113 §4.1's 9-byte header (length, type, flags, stream id as given), then the
// payload.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ferry::testing {

inline std::string h2_frame(std::uint8_t type, std::uint8_t flags, std::uint32_t stream,
                            std::string_view payload) {
  const auto n = static_cast<std::uint32_t>(payload.size());
  std::string f;
  f.reserve(9 + payload.size());
  for (int shift : {16, 8, 0}) f.push_back(static_cast<char>(n >> shift));
  f.push_back(static_cast<char>(type));
  f.push_back(static_cast<char>(flags));
  for (int shift : {24, 16, 8, 0}) f.push_back(static_cast<char>(stream >> shift));
  f.append(payload);
  return f;
}

// An HPACK header block of literal fields without indexing and with new names (RFC 7541
// §6.2.2): no dynamic table, so every block decodes alone. Names and values are shorter than
// 127 bytes (their lengths are written in one byte, without Huffman coding).
inline std::string header_block(const std::vector<std::pair<std::string, std::string>>& fields) {
  std::string block;
  for (const auto& [name, value] : fields) {
    block.push_back(0);
    block.push_back(static_cast<char>(name.size()));
    block.append(name);
    block.push_back(static_cast<char>(value.size()));
    block.append(value);
  }
  return block;
}

}  // namespace ferry::testing
