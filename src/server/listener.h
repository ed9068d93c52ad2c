// The server's listening socket (server layer, private): TCP on host:port, or a Unix domain
// socket ("unix:/path", "unix-abstract:name"). It accepts onto the I/O threads in turn and hands
// each connection over as a byte stream (transport/socket_stream.h), so that everything after the
// accept is one code path for every transport. When accept fails for lack of descriptors or
// memory it pauses before trying again (logging once) instead of spinning on a listening socket
// that stays readable.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/io_thread.h"
#include "transport/byte_stream.h"

namespace ferry::detail {

class Listener {
 public:
  // Called on the listener's thread for each accepted connection, whose stream belongs to
  // thread's io_context; returns false to stop accepting (the server is shutting down; the
  // stream is then dropped, which closes it).
  using OnAccept = std::function<bool(IoThread& thread, std::unique_ptr<http2::ByteStream>)>;

  // Binds and listens, on io (the first I/O thread's): host "unix:path" or "unix-abstract:name"
  // (port ignored; a stale socket file at path is replaced), else an IP address and port (0
  // picks one). UNAVAILABLE when binding fails, INVALID_ARGUMENT for a bad address.
  static absl::StatusOr<std::unique_ptr<Listener>> open(asio::io_context& io,
                                                        const std::string& host, int port);
  virtual ~Listener() = default;

  // The bound TCP port; 0 for a Unix socket.
  virtual int port() const = 0;
  // Starts accepting, round-robin onto threads (which outlive the listener).
  virtual void start(const std::vector<std::unique_ptr<IoThread>>& threads, OnAccept on_accept) = 0;
  // Stops accepting; on the listener's thread. A Unix socket's file is removed.
  virtual void close() = 0;

  // How long accept pauses after running out of descriptors (or memory).
  static constexpr std::chrono::milliseconds kRetryAfter{100};
};

}  // namespace ferry::detail
