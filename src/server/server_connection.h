// One accepted connection of the server (server layer, private): the HTTP/2 connection and the
// call site its calls share. It opens a ServerCall per stream, which routes and runs itself;
// the connection only counts itself out when it closes. Lives on its I/O thread. Over TLS the
// HTTP/2 connection starts once the handshake (src/tls/handshake.h) has succeeded.
#pragma once

#include <atomic>
#include <list>
#include <memory>

#include "ferry/server.h"
#include "http1/connection.h"
#include "http2/connection.h"
#include "server/call_site.h"
#include "server/io_thread.h"
#include "server/protocol_sniffer.h"
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

  // GOAWAY: calls in flight go on, new streams are refused; closes once they are done. Over
  // HTTP/1.1: closes after the exchange in progress. (A connection still in its TLS handshake,
  // or not yet told apart, is closed.)
  void shutdown();
  // Closes now: running calls are cancelled.
  void close();

  ServerConnection(IoThread& thread, std::atomic<std::size_t>& live_connections)
      : thread_(thread), live_connections_(live_connections) {}

 private:
  // http2::ConnectionObserver
  http2::Stream* on_stream_open(std::int32_t id) override;
  void on_goaway(std::int32_t, http2::ErrorCode) override {}
  void on_connection_closed() override;
  // A cleartext connection: which HTTP it speaks is read from its first bytes.
  void sniff(std::unique_ptr<http2::ByteStream> stream, const ConnectionLimits& limits,
             const http2::LifecyclePolicy& lifecycle);
  void serve(std::unique_ptr<http2::ByteStream> stream, const ConnectionLimits& limits,
             const http2::LifecyclePolicy& lifecycle);
  void serve_http1(std::unique_ptr<http2::ByteStream> stream, const ConnectionLimits& limits,
                   const http2::LifecyclePolicy& lifecycle, bool tls);

  IoThread& thread_;
  std::atomic<std::size_t>& live_connections_;
  std::list<std::unique_ptr<ServerConnection>>::iterator self_;  // in thread_.connections
  std::shared_ptr<http2::Connection> connection_;
  std::shared_ptr<http1::Connection> http1_;         // instead, for a client speaking HTTP/1.1
  std::unique_ptr<tls::ServerHandshake> handshake_;  // TLS: until the connection starts
  std::shared_ptr<ProtocolSniffer> sniffer_;         // cleartext: until it is told apart
  ServerCallSite site_;
};

}  // namespace ferry::detail
