// Establishing a subchannel's transport (client layer, private): connects one resolved address
// (TCP, or a Unix domain socket), then, when the channel has TLS credentials, runs the TLS
// handshake over it (src/tls/handshake.h), all before a deadline. The result is the byte stream
// the HTTP/2 connection runs over, whatever the transport.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "asio/awaitable.hpp"
#include "asio/io_context.hpp"
#include "ferry/channel.h"
#include "ferry/resolver.h"
#include "transport/byte_stream.h"

namespace ferry::detail {

// The longest Unix socket path asio takes (sizeof(sun_path) - 1), an abstract name's leading NUL
// included.
inline constexpr std::size_t kMaxUnixPathBytes = 107;

// Never throws: any failure, an exception inside included, is UNAVAILABLE saying why. tls_host: the
// name the server's certificate must carry.
asio::awaitable<absl::StatusOr<std::unique_ptr<http2::ByteStream>>> connect_address(
    asio::io_context::executor_type executor, const Address& address, const std::string& tls_host,
    std::chrono::steady_clock::time_point deadline, const ChannelOptions& options);

}  // namespace ferry::detail
