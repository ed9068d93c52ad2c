// HTTP/2 frames (and header blocks) written by hand, for tests that play a peer byte by byte (test
// support): RFC 9113 §4.1's 9-byte header (length, type, flags, stream id as given), then the
// payload.
#pragma once

#include <cstdint>
#include <optional>
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

// One HPACK field as a literal with incremental indexing and a new name (RFC 7541 §6.2.1): it
// enters the decoder's dynamic table, newest, at index 62. Name and value shorter than 127 bytes,
// without Huffman coding.
inline std::string hpack_literal_indexed(std::string_view name, std::string_view value) {
  std::string field(1, static_cast<char>(0x40));
  field.push_back(static_cast<char>(name.size()));
  field.append(name);
  field.push_back(static_cast<char>(value.size()));
  field.append(value);
  return field;
}

// A frame read off the wire by a test playing a peer.
struct H2Frame {
  std::uint8_t type = 0;
  std::uint8_t flags = 0;
  std::uint32_t stream = 0;  // the reserved bit cleared
  std::string payload;

  // RST_STREAM's error code, or GOAWAY's (0 when the payload is too short for one).
  std::uint32_t code() const {
    const std::size_t at = type == 0x7 ? 4 : 0;
    std::uint32_t c = 0;
    for (std::size_t i = at; i < at + 4 && i < payload.size(); ++i) {
      c = (c << 8) | static_cast<std::uint8_t>(payload[i]);
    }
    return c;
  }
};

// The complete frame at the front of `bytes` (what was read and not yet parsed), taken off it;
// nothing while the frame is not all there.
inline std::optional<H2Frame> take_h2_frame(std::string& bytes) {
  if (bytes.size() < 9) return std::nullopt;
  auto byte = [&](std::size_t i) { return std::uint32_t{static_cast<std::uint8_t>(bytes[i])}; };
  const std::size_t length = (byte(0) << 16) | (byte(1) << 8) | byte(2);
  if (bytes.size() < 9 + length) return std::nullopt;
  H2Frame f;
  f.type = static_cast<std::uint8_t>(bytes[3]);
  f.flags = static_cast<std::uint8_t>(bytes[4]);
  f.stream = ((byte(5) & 0x7f) << 24) | (byte(6) << 16) | (byte(7) << 8) | byte(8);
  f.payload = bytes.substr(9, length);
  bytes.erase(0, 9 + length);
  return f;
}

}  // namespace ferry::testing
