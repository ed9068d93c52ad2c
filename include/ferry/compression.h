// ferry/compression.h: gRPC per-message compression (codec layer, public): the encodings ferry
// speaks in grpc-encoding / grpc-accept-encoding, and the per-message write option. A call
// compresses when its context asks (ClientContext::set_compression,
// ServerContext::set_compression); each message then goes out gzip-compressed (compressed flag 1)
// unless its write says WriteOptions{.no_compression = true}. Received messages are decompressed
// whatever either side asked, within the receive-size limit.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace ferry {

// A message encoding (gRPC's Message-Encoding). kIdentity: messages go out as they are.
enum class Compression : std::uint8_t { kIdentity, kGzip };

// The encoding's name on the wire: "identity", "gzip".
std::string_view compression_name(Compression compression);

// The encoding a grpc-encoding value names (exact, lower-case token as gRPC sends it; surrounding
// spaces ignored); nullopt for one ferry does not support (e.g. "snappy", "deflate").
std::optional<Compression> parse_compression(std::string_view name);

// Options of one message write.
struct WriteOptions {
  // Send this message uncompressed (compressed flag 0) even on a call that compresses: for
  // messages that mix secrets with attacker-chosen data (CRIME/BREACH), or that are known not
  // to compress (already-compressed media).
  bool no_compression = false;
};

}  // namespace ferry
