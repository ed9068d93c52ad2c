// What the calls of one server connection share (server layer, private): the method table they
// route themselves through, their thread's handler runners and deadline queue, the limits, the
// peer's address, and the two lookups a client repeats on every call, remembered. Owned by the
// connection; a call uses it only until its stream is closed.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "call/call_stream.h"
#include "call/wire_format.h"
#include "ferry/tls.h"
#include "server/method_table.h"

namespace ferry::detail {

class DeadlineQueue;
class HandlerRunners;

struct ServerCallSite {
  std::uint64_t connection_id = 0;  // ServerContext::connection_id: unique in the process
  const MethodTable* methods = nullptr;
  HandlerRunners* runners = nullptr;
  DeadlineQueue* deadlines = nullptr;
  CallLimits limits;
  std::size_t max_header_bytes = 0;
  std::atomic<std::size_t>* active_calls = nullptr;        // the server's count of running calls
  std::string peer;                                        // "ipv4:127.0.0.1:54321"
  std::shared_ptr<const PeerIdentity> identity;            // TLS client certificate; null when none
  const std::vector<std::string>* cors_origins = nullptr;  // ServerOptions::cors_allowed_origins

  // Whether a browser on origin may call (CORS).
  bool allows_origin(std::string_view origin) const {
    if (cors_origins == nullptr || origin.empty()) return false;
    for (const std::string& allowed : *cors_origins) {
      if (allowed == "*" || allowed == origin) return true;
    }
    return false;
  }

  // MethodTable::find, comparing with the last path found first: a connection tends to call one
  // method over and over, and the comparison is cheaper than hashing.
  const Method* find_method(std::string_view path, std::string_view* stable_path) {
    if (path == last_path_ && last_method_ != nullptr) {
      *stable_path = last_path_;
      return last_method_;
    }
    const Method* method = methods->find(path, stable_path);
    if (method != nullptr) {
      last_path_ = *stable_path;
      last_method_ = method;
    }
    return method;
  }

  // Whether a grpc-accept-encoding value lists gzip. Every request of a client carries the same
  // value: each new one is parsed once.
  bool accepts_gzip(std::string_view accept_encoding) {
    if (accept_encoding != last_accept_encoding_) {
      last_accept_encoding_.assign(accept_encoding);
      last_accepts_gzip_ = accepts_encoding(accept_encoding, Compression::kGzip);
    }
    return last_accepts_gzip_;
  }

 private:
  std::string_view last_path_;  // a key of the method table
  const Method* last_method_ = nullptr;
  std::string last_accept_encoding_;
  bool last_accepts_gzip_ = false;
};

}  // namespace ferry::detail
