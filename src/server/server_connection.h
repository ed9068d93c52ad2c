// One accepted connection of the server (server layer, private): the HTTP/2 connection and the
// call site its calls share. It opens a ServerCall per stream, which routes and runs itself;
// the connection only counts itself out when it closes. Lives on its I/O thread. Over TLS the
// HTTP/2 connection starts once the handshake (src/tls/handshake.h) has succeeded.
#pragma once

#include <atomic>
#include <list>
#include <memory>

#include "ferry/server.h"
#include "http2/connection.h"
#include "server/call_site.h"
#include "server/io_thread.h"
#include "tls/handshake.h"

namespace ferry::detail {

class ServerConnection final : public http2::ConnectionObserver {
 public:
  // Adopts stream (an accepted socket) onto thread (on that thread), serving the methods of
  // table, after a TLS handshake when options has credentials; live_connections is decremented
  // when the connection has closed and is deleted.
  static void adopt(IoThread& thread, std::unique_ptr<http2::ByteStream> stream,
                    const ServerOptions& options, const MethodTable& table,
                    std::atomic<std::size_t>& active_calls,
                    std::atomic<std::size_t>& live_connections);

  // GOAWAY: calls in flight go on, new streams are refused; closes once they are done.
  // (A connection still in its TLS handshake is closed.)
  void shutdown() { connection_ != nullptr ? connection_->shutdown() : close(); }
  // Closes now: running calls are cancelled.
  void close() { connection_ != nullptr ? connection_->close() : handshake_->close(); }

  ServerConnection(IoThread& thread, std::atomic<std::size_t>& live_connections)
      : thread_(thread), live_connections_(live_connections) {}

 private:
  // http2::ConnectionObserver
  http2::Stream* on_stream_open(std::int32_t id) override;
  void on_goaway(std::int32_t, http2::ErrorCode) override {}
  void on_connection_closed() override;
  void serve(std::unique_ptr<http2::ByteStream> stream, const ConnectionLimits& limits,
             const http2::LifecyclePolicy& lifecycle);

  IoThread& thread_;
  std::atomic<std::size_t>& live_connections_;
  std::list<std::unique_ptr<ServerConnection>>::iterator self_;  // in thread_.connections
  std::shared_ptr<http2::Connection> connection_;
  std::unique_ptr<tls::ServerHandshake> handshake_;  // TLS: until the connection starts
  ServerCallSite site_;
};

}  // namespace ferry::detail
