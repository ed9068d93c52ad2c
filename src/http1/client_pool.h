// A channel's HTTP/1.1 to one server (http2 layer, beside the HTTP/2 engine; private): what
// http2::Connection is to HTTP/2, for calls through proxies and servers that speak only
// HTTP/1.1. HTTP/1.1 carries one exchange at a time per connection, so a call takes an idle
// connection (ClientConnection) or, when none is, waits while one more is dialed, up to a
// maximum (ChannelOptions::max_http1_connections); connections are kept alive between calls.
// gRPC-Web and the Connect protocol run over it; gRPC itself needs HTTP/2's trailers.
//
// The pool stays open while its connections come and go (a server closes idle ones); when a
// dial fails with no connection left, it closes, and the channel reconnects with back-off. A
// request that waited for a connection which never came fails as never sent (REFUSED_STREAM:
// transparently retried). Everything on one executor.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "ferry/limits.h"
#include "http1/client_connection.h"
#include "http2/client_transport.h"
#include "http2/connection.h"

namespace ferry::http1 {

class ClientPool final : public std::enable_shared_from_this<ClientPool>,
                         public http2::ClientTransport,
                         private ClientConnection::Owner {
 public:
  using Dialed = absl::StatusOr<std::unique_ptr<http2::ByteStream>>;
  // Dials one more connection to the server; calls done once, on the pool's executor.
  using Dial = std::function<void(std::function<void(Dialed)> done)>;

  // first: the connection the channel made to find the server ready; dial: more like it, up to
  // max_connections at once (further calls wait for one to be free).
  ClientPool(std::unique_ptr<http2::ByteStream> first, Dial dial, const ConnectionLimits& limits,
             http2::ConnectionObserver* observer, std::size_t max_connections = 100);
  ~ClientPool();
  ClientPool(const ClientPool&) = delete;
  ClientPool& operator=(const ClientPool&) = delete;

  // http2::ClientTransport. start() tells the observer the server is there (on_peer_settings:
  // HTTP/1.1 has no handshake beyond the connection's own).
  void start() override;
  std::int32_t submit_request(http2::Stream* stream,
                              std::span<const http2::HeaderField> headers) override;
  bool accepts_new_streams() const override { return !closed_ && !shutting_down_; }
  bool is_open() const override { return !closed_; }
  void shutdown() override;
  void close() override;

  // http2::StreamCarrier. Each call's own queue bounds what it writes (CallStream's high-water
  // mark), so the pool is never "full" as an HTTP/2 connection's shared queue can be.
  bool submit_response(http2::Stream*, std::span<const http2::HeaderField>, bool) override {
    return false;  // a client's
  }
  void resume(http2::Stream* stream) override;
  bool send_queue_full() const override { return false; }
  bool peer_window_closed() const override { return false; }
  void wait_for_send_room() override {}
  void reset(http2::Stream* stream, http2::ErrorCode error) override;
  void consume(http2::Stream* stream, std::size_t n) override;
  void consume_connection(std::size_t) override {}
  const asio::any_io_executor& executor() const override { return executor_; }
  bool is_http1() const override { return true; }

 private:
  struct Waiting {
    http2::Stream* stream;
    std::string head;
    bool idempotent;
  };

  // ClientConnection::Owner
  void on_idle(ClientConnection* connection) override;
  void on_connection_closed(ClientConnection* connection) override;

  void dial_one();
  void on_dialed(Dialed dialed);
  ClientConnection* connection_of(const http2::Stream* stream) const;
  // Closes once shut down and nothing is left.
  void close_if_done();

  asio::any_io_executor executor_;
  Dial dial_;
  ConnectionLimits limits_;
  http2::ConnectionObserver* observer_;
  std::size_t max_connections_;
  std::vector<std::shared_ptr<ClientConnection>> connections_;
  std::deque<Waiting> waiting_;
  std::size_t dialing_ = 0;
  std::int32_t next_id_ = 1;
  bool shutting_down_ = false;
  bool closed_ = false;
};

}  // namespace ferry::http1
