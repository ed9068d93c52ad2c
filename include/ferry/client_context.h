// ferry/client_context.h: per-call settings and results on the client (calls layer, public): the
// deadline and metadata to send, and the server's metadata once received. One context per call;
// it must outlive the call.
#pragma once

#include <chrono>
#include <string_view>

#include "ferry/metadata.h"

namespace ferry {

namespace detail {
class ClientCall;
}

class ClientContext {
 public:
  using Clock = std::chrono::steady_clock;

  // The call fails with DEADLINE_EXCEEDED when it has not completed by then; the server is told
  // the remaining time in grpc-timeout. Default: no deadline.
  void set_deadline(Clock::time_point deadline) { deadline_ = deadline; }
  void set_timeout(Clock::duration timeout) { deadline_ = Clock::now() + timeout; }
  Clock::time_point deadline() const { return deadline_; }

  // Custom metadata to send (see metadata.h for what keys and values may hold).
  void add_metadata(std::string_view key, std::string_view value) { metadata_.add(key, value); }
  const Metadata& metadata() const { return metadata_; }

  // The server's response headers and trailers, filled as they arrive.
  const Metadata& initial_metadata() const { return initial_metadata_; }
  const Metadata& trailing_metadata() const { return trailing_metadata_; }

 private:
  friend class detail::ClientCall;
  Clock::time_point deadline_ = Clock::time_point::max();
  Metadata metadata_;
  Metadata initial_metadata_;
  Metadata trailing_metadata_;
};

}  // namespace ferry
