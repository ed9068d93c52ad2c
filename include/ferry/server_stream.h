// ferry/server_stream.h: typed views of a server call's message streams (server layer, public).
// Thin: each forwards to ServerContext's type-erased operations, so they add no code per type.
#pragma once

#include "ferry/server_context.h"

namespace ferry {

// The requests of a client-streaming or bidi call.
template <class Request>
class ServerReader {
 public:
  explicit ServerReader(ServerContext& context) : context_(context) {}
  // Waits for the next request; false at the end of the client's stream or if the call is over.
  asio::awaitable<bool> read(Request& msg) { return context_.read(msg); }

 private:
  ServerContext& context_;
};

// The responses of a server-streaming or bidi call.
template <class Response>
class ServerWriter {
 public:
  explicit ServerWriter(ServerContext& context) : context_(context) {}
  // Sends a response; suspends while the client's window is full (backpressure).
  asio::awaitable<absl::Status> write(const Response& msg, WriteOptions options = {}) {
    return context_.write(msg, options);
  }

 private:
  ServerContext& context_;
};

template <class Request, class Response>
class ServerReaderWriter {
 public:
  explicit ServerReaderWriter(ServerContext& context) : context_(context) {}
  asio::awaitable<bool> read(Request& msg) { return context_.read(msg); }
  asio::awaitable<absl::Status> write(const Response& msg, WriteOptions options = {}) {
    return context_.write(msg, options);
  }

 private:
  ServerContext& context_;
};

}  // namespace ferry
