// Implementation of src/http2/peer_stream_ledger.h.
#include "http2/peer_stream_ledger.h"

namespace ferry::http2 {

PeerStreamLedger::Verdict PeerStreamLedger::judge(std::int32_t id) const {
  if (id > highest_ || highest_ == 0) return Verdict::kIgnore;
  const std::int32_t k = (highest_ - id) / 2;
  if (k >= kWindow) return Verdict::kIgnore;
  const std::uint64_t bit = std::uint64_t{1} << k;
  // After END_STREAM the peer may send nothing but WINDOW_UPDATE, PRIORITY and RST_STREAM on
  // the stream, whoever closed it afterwards: no frame can have been in flight legitimately.
  if ((ended_ & bit) != 0) return Verdict::kConnectionStreamClosed;
  if ((reset_ & bit) != 0) return Verdict::kResetStreamClosed;
  // An id the peer jumped over is closed without ever having been opened (§5.1.1): a HEADERS
  // on it is a stream id lower than one already used.
  if ((seen_ & bit) == 0) return Verdict::kConnectionProtocolError;
  // We reset it (an early status, a refusal) or it was closed by our reset after its answer:
  // the peer may not have seen that yet.
  return Verdict::kIgnore;
}

}  // namespace ferry::http2
