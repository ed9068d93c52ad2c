// Header fields as the call layer hands them to the HTTP/2 layer (http2 layer, private):
// ferry's own types, so that nothing above src/http2 names the engine's. A field either points to
// storage that outlives the stream (string literals: sent without a copy) or is copied by the
// connection while the submit call runs.
#pragma once

#include <string>
#include <string_view>

#include "absl/container/inlined_vector.h"

namespace ferry::http2 {

struct HeaderField {
  std::string_view name;
  std::string_view value;
  // Name and value are of static storage (string literals): the connection keeps the pointers
  // instead of copying them.
  bool static_storage = false;
  // HPACK "never indexed" (RFC 7541 §6.2.3): for a value new in every request (a trace
  // context), which indexing would add to the dynamic table each time, evicting the entries
  // that do repeat (and growing every header block after), as gRPC core's encoder leaves
  // grpc-trace-bin unindexed. Its value goes raw, not Huffman-coded: decoding that would cost the
  // peer more per call than the few bytes it saves.
  bool no_index = false;

  static constexpr HeaderField literal(std::string_view name, std::string_view value) {
    return {name, value, true};
  }
};

// A header field that owns its strings.
struct Header {
  std::string name;
  std::string value;
};

// A call's few headers or trailers, without a heap allocation when there are at most four.
using HeaderList = absl::InlinedVector<Header, 4>;

// The trailers a stream ends with, kept until the connection sends them after the last DATA:
// literal fields first (a server's grpc-status), then the owned ones.
struct TrailerBlock {
  absl::InlinedVector<HeaderField, 1> literal;  // static storage only
  HeaderList owned;

  bool empty() const { return literal.empty() && owned.empty(); }
  std::size_t size() const { return literal.size() + owned.size(); }
  void clear() {
    literal.clear();
    owned.clear();
  }
};

}  // namespace ferry::http2
