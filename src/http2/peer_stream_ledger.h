// What became of the peer's most recent streams (http2 layer, private), so that a DATA or
// HEADERS frame on a stream the session no longer keeps gets the answer RFC 9113 §5.1 asks
// for. The session keeps no closed streams: keeping them costs an allocation's lifetime and
// list upkeep on every call, while this ledger is three words of bits, shifted once per new
// stream and set on the rare paths (a reset, a frame out of order).
#pragma once

#include <cstdint>

namespace ferry::http2 {

class PeerStreamLedger {
 public:
  // The answer to a DATA or HEADERS frame on a peer stream id at or below the highest seen, for
  // which the session has no stream any more.
  enum class Verdict {
    kIgnore,                   // we reset it (or refused it), or it is too old to judge: §5.1
                               // says frames may still be in flight, ignore them
    kResetStreamClosed,        // the peer reset it itself: stream error STREAM_CLOSED
    kConnectionStreamClosed,   // the peer had ended it (END_STREAM): connection error
    kConnectionProtocolError,  // the peer skipped this id (§5.1.1): connection error
  };

  // A HEADERS frame header arrived on peer stream id (any id; only new highs are recorded).
  void on_headers(std::int32_t id) {
    if (id <= highest_) return;
    const std::int32_t step = (id - highest_) / 2;
    if (highest_ == 0 || step >= kWindow) {
      seen_ = ended_ = reset_ = 0;
    } else {
      seen_ <<= step;
      ended_ <<= step;
      reset_ <<= step;
    }
    highest_ = id;
    seen_ |= 1;
  }
  // The peer ended stream id (END_STREAM on DATA or HEADERS).
  void on_remote_end(std::int32_t id) { mark(ended_, id); }
  // The peer sent RST_STREAM on stream id.
  void on_peer_reset(std::int32_t id) { mark(reset_, id); }

  // Whether id is a stream the peer has already opened or skipped (at or below its highest).
  bool used(std::int32_t id) const { return id <= highest_; }
  Verdict judge(std::int32_t id) const;

 private:
  static constexpr std::int32_t kWindow = 64;  // the most recent 64 peer stream ids

  // Bit k of each word stands for stream id highest_ - 2k, when that is in the window.
  void mark(std::uint64_t& bits, std::int32_t id) {
    const std::int32_t k = (highest_ - id) / 2;
    if (id <= highest_ && k < kWindow) bits |= std::uint64_t{1} << k;
  }

  std::int32_t highest_ = 0;
  std::uint64_t seen_ = 0;   // a HEADERS frame opened it (or tried to: refused ones too)
  std::uint64_t ended_ = 0;  // the peer sent END_STREAM on it
  std::uint64_t reset_ = 0;  // the peer sent RST_STREAM on it
};

}  // namespace ferry::http2
