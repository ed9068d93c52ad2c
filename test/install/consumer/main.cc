// Consumer of an installed ferry: frames a payload and decodes it back. Exits 0 on success.
#include <cstdio>
#include <string>

#include "ferry/frame_decoder.h"
#include "ferry/frame_encoder.h"

int main() {
  const std::string payload = "hello from a downstream project";
  ferry::SliceChain wire;
  if (!ferry::encode_bytes(payload, /*compressed=*/false, wire).ok()) return 1;

  ferry::FrameDecoder decoder;
  for (const ferry::Slice& s : wire) decoder.push(s);
  ferry::DecodedMessage message;
  absl::StatusOr<bool> got = decoder.next(message);
  if (!got.ok() || !*got || message.payload.to_string() != payload) {
    std::fprintf(stderr, "round trip failed\n");
    return 1;
  }
  std::printf("ferry round trip ok: %zu bytes on the wire\n", wire.size());
  return 0;
}
