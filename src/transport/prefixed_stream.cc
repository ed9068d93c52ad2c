// Implementation of src/transport/prefixed_stream.h.
#include "transport/prefixed_stream.h"

#include <algorithm>
#include <cstring>

#include "asio/post.hpp"

namespace ferry::http2 {

std::size_t PrefixedStream::take_prefix(asio::mutable_buffer into) {
  const std::size_t n = std::min(into.size(), prefix_.size());
  std::memcpy(into.data(), prefix_.data(), n);
  prefix_.erase(0, n);
  return n;
}

void PrefixedStream::async_read_some(asio::mutable_buffer into,
                                     std::shared_ptr<ByteStreamClient> client) {
  if (prefix_.empty()) return inner_->async_read_some(into, std::move(client));
  const std::size_t n = take_prefix(into);
  asio::post(executor(), [client = std::move(client), n] { client->on_read({}, n); });
}

std::size_t PrefixedStream::read_some_now(asio::mutable_buffer into, asio::error_code& ec) {
  if (prefix_.empty()) return inner_->read_some_now(into, ec);
  ec = {};
  return take_prefix(into);
}

}  // namespace ferry::http2
