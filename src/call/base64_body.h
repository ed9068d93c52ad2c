// gRPC-Web's text bodies (calls layer, private): the binary body in standard base64, which a
// sender may write in pieces that each end with their own padding ("...==" then more). abseil's
// codec does the decoding and encoding; this only cuts a stream into what it accepts.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "ferry/frame_decoder.h"
#include "ferry/slice_chain.h"

namespace ferry::detail {

class Base64BodyDecoder {
 public:
  // Decodes what of text completes 4-character groups and pushes the bytes into out, which packs
  // them into its own blocks after those before (a body sent a few characters per DATA frame
  // takes a few bytes per piece, not a block); the rest waits for the next piece. False on a
  // character or padding base64 does not allow.
  bool decode(std::string_view text, FrameDecoder& out);
  // Whether the body ended on a group boundary (else it was cut inside a group).
  bool complete() const { return pending_.empty(); }

 private:
  bool flush_run(std::string_view run, FrameDecoder& out);

  std::string pending_;  // characters of an incomplete group
  std::string decoded_;  // scratch, reused
};

// Appends bytes, base64 encoded with padding, to out: one piece of a text body.
void append_base64(const SliceChain& bytes, SliceChain& out);

}  // namespace ferry::detail
