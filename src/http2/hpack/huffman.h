// HPACK's Huffman code (RFC 7541 §5.2, Appendix B), both directions (http2 layer, private):
// encoding from the code table, decoding by a state machine over 4-bit steps whose table is
// built from the same code table at compile time (huffman.cc). No allocation: callers give the
// output room.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace ferry::http2::hpack {

// The length in bytes of `text` Huffman-encoded (the last byte padded with ones).
std::size_t huffman_encoded_size(std::string_view text);

// Writes `text` Huffman-encoded to `out`, which has room for huffman_encoded_size(text) bytes;
// returns the end of what it wrote.
std::uint8_t* huffman_encode(std::string_view text, std::uint8_t* out);

// The outcome of a decode.
enum class HuffmanResult {
  kOk,
  // RFC 7541 §5.2: the EOS symbol inside the string, padding longer than 7 bits or padding that
  // is not the most significant bits of EOS (all ones). A COMPRESSION_ERROR.
  kInvalid,
  // The decoded string is longer than the room given (the input may be valid).
  kTooLong,
};

struct HuffmanDecoded {
  HuffmanResult result;
  std::size_t size;  // bytes written when kOk
};

// Decodes `encoded` into `out`, at most `room` bytes. Reads each input byte once, two table
// lookups per byte. With room for more than size * 8 / 5 bytes (more than any string of that
// size decodes to) it runs without a check or a branch per symbol, and may write one byte past
// the output it returns (within the room); with less it stops when the room runs out.
HuffmanDecoded huffman_decode(const std::uint8_t* encoded, std::size_t size, char* out,
                              std::size_t room);

// Checks `encoded` as huffman_decode does and counts the decoded bytes, writing nothing (for a
// string the decoder must validate but not keep).
HuffmanDecoded huffman_validate(const std::uint8_t* encoded, std::size_t size);

}  // namespace ferry::http2::hpack
