// A byte stream over a connected stream socket (transport layer, private): TCP, or a Unix domain
// socket. Writes go straight to the kernel with one gathered sendmsg (asio's write_some stops at
// 64 buffers); reads are asio's async_read_some.
#pragma once

#include <memory>

#include "asio/ip/tcp.hpp"
#include "asio/local/stream_protocol.hpp"
#include "transport/byte_stream.h"

namespace ferry::http2 {

// Takes a connected TCP socket: sets TCP_NODELAY (no 40 ms delayed-ACK stalls for small
// answers) and non-blocking mode (write_some_now must never block the loop).
std::unique_ptr<ByteStream> make_tcp_stream(asio::ip::tcp::socket socket);
// Takes a connected Unix domain socket; its peer is "unix:path" (the listening path on the
// server side, where the client's end has no name) or "unix-abstract:name".
std::unique_ptr<ByteStream> make_unix_stream(asio::local::stream_protocol::socket socket);

// Writes as much of iov as the socket fd takes now with sendmsg, IOV_MAX slices at a time:
// returns the bytes written; ec is would_block when it took none, or the socket's error.
std::size_t send_gathered(int fd, std::span<const iovec> iov, asio::error_code& ec);

}  // namespace ferry::http2
