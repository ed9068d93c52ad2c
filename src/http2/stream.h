// An HTTP/2 stream as the connection engine sees it (http2 layer, private). The layer above
// (calls) derives from Stream: the connection reports inbound events through the virtual
// functions and drains the outbound queue the call fills. Nothing here knows about gRPC.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nghttp2/nghttp2.h>

#include "absl/container/inlined_vector.h"
#include "ferry/slice_chain.h"

namespace ferry::http2 {

class Connection;

struct Header {
  std::string name;
  std::string value;
};

// A call's few headers or trailers, without a heap allocation when there are at most four.
using HeaderList = absl::InlinedVector<Header, 4>;

class Stream {
 public:
  virtual ~Stream() = default;

  // One header field of a HEADERS block. Return false to reset the stream (bad or too large).
  virtual bool on_header(std::string_view name, std::string_view value) = 0;
  // A HEADERS block (initial or trailing) is complete.
  virtual void on_headers_done() = 0;
  // DATA payload bytes, a view into the read block that the Slice keeps alive. The bytes count
  // against the flow-control window until Connection::consume() is called for them.
  virtual void on_data(Slice chunk) = 0;
  // The peer half-closed its side (END_STREAM).
  virtual void on_remote_end() = 0;
  // The connection took bytes from `outbound`: a writer waiting for room may go on.
  virtual void on_outbound_taken() = 0;
  // The stream is closed (completed, reset by either side, or the connection died); h2_error is
  // the RST_STREAM or GOAWAY code, 0 on a clean close. The connection never touches the stream
  // again after this call.
  virtual void on_closed(std::uint32_t h2_error) = 0;

  std::int32_t stream_id() const { return id_; }

  // --- outbound state, filled by the call and drained by the connection -----------------------
  // DATA payload to send.
  SliceChain outbound;
  // End the stream once `outbound` is drained: with `trailers` as a trailing HEADERS block when
  // there are any (server), else END_STREAM on the last DATA frame (client).
  bool outbound_end = false;
  HeaderList trailers;
  // Trailers whose name and value are of static storage (string literals), sent before
  // `trailers` without being copied: a server's grpc-status.
  absl::InlinedVector<nghttp2_nv, 1> literal_trailers;

 private:
  friend class Connection;
  std::int32_t id_ = 0;
  bool deferred_ = false;       // the data provider returned DEFERRED: resume when there is more
  bool has_provider_ = false;   // a data provider is attached (response or request submitted)
  Stream* prev_ = nullptr;      // the connection's list of open streams
  Stream* next_ = nullptr;
};

}  // namespace ferry::http2
