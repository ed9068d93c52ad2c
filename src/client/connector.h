// Establishing a channel's transport (client layer, private): resolves and connects the target
// (TCP, or a Unix domain socket), then, when the channel has TLS credentials, runs the TLS
// handshake over it (src/tls/handshake.h), all within the connect timeout. The result is the
// byte stream the HTTP/2 connection runs over, whatever the transport.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "asio/awaitable.hpp"
#include "asio/io_context.hpp"
#include "client/target.h"
#include "ferry/channel.h"
#include "http2/byte_stream.h"

namespace ferry::detail {

// UNAVAILABLE saying why (target_string names the target in the message).
asio::awaitable<absl::StatusOr<std::unique_ptr<http2::ByteStream>>> connect_stream(
    asio::io_context::executor_type executor, const Target& target,
    const std::string& target_string, const ChannelOptions& options);

}  // namespace ferry::detail
