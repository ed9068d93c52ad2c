// ferry/server_stream.h: typed views of a server call's message streams (server layer, public).
// Thin: each forwards to ServerContext's type-erased operations, so they add no code per type.
#pragma once

#include <utility>

#include "ferry/server_context.h"

namespace ferry {

// The requests of a client-streaming or bidi call.
template <class Request>
class ServerReader {
 public:
  explicit ServerReader(ServerContext& context) : context_(context) {}
  // Waits for the next request; false at the end of the client's stream or if the call is over.
  // Completion token and cancellation: as ServerContext::read.
  template <class Token = const asio::use_awaitable_t<>&>
  auto read(Request& msg, Token&& token = asio::use_awaitable) {
    return context_.read(msg, std::forward<Token>(token));
  }
  // The next request's serialized bytes, by reference (ServerContext::read_raw).
  template <class Token = const asio::use_awaitable_t<>&>
  auto read_raw(SliceChain& message, Token&& token = asio::use_awaitable) {
    return context_.read_raw(message, std::forward<Token>(token));
  }

 private:
  ServerContext& context_;
};

// The responses of a server-streaming or bidi call.
template <class Response>
class ServerWriter {
 public:
  explicit ServerWriter(ServerContext& context) : context_(context) {}
  // Sends a response; suspends while the client's window is full (backpressure).
  // Completion token and cancellation: as ServerContext::write.
  template <class Token = const asio::use_awaitable_t<>&>
  auto write(const Response& msg, WriteOptions options = {}, Token&& token = asio::use_awaitable) {
    return context_.write(msg, options, std::forward<Token>(token));
  }
  // Sends a serialized response by reference (ServerContext::write_raw).
  template <class Token = const asio::use_awaitable_t<>&>
  auto write_raw(const SliceChain& message, Token&& token = asio::use_awaitable) {
    return context_.write_raw(message, std::forward<Token>(token));
  }

 private:
  ServerContext& context_;
};

template <class Request, class Response>
class ServerReaderWriter {
 public:
  explicit ServerReaderWriter(ServerContext& context) : context_(context) {}
  template <class Token = const asio::use_awaitable_t<>&>
  auto read(Request& msg, Token&& token = asio::use_awaitable) {
    return context_.read(msg, std::forward<Token>(token));
  }
  // The next request's serialized bytes, by reference (ServerContext::read_raw).
  template <class Token = const asio::use_awaitable_t<>&>
  auto read_raw(SliceChain& message, Token&& token = asio::use_awaitable) {
    return context_.read_raw(message, std::forward<Token>(token));
  }
  template <class Token = const asio::use_awaitable_t<>&>
  auto write(const Response& msg, WriteOptions options = {}, Token&& token = asio::use_awaitable) {
    return context_.write(msg, options, std::forward<Token>(token));
  }
  // Sends a serialized response by reference (ServerContext::write_raw).
  template <class Token = const asio::use_awaitable_t<>&>
  auto write_raw(const SliceChain& message, Token&& token = asio::use_awaitable) {
    return context_.write_raw(message, std::forward<Token>(token));
  }

 private:
  ServerContext& context_;
};

}  // namespace ferry
