// Implementation of src/server/server_connection.h.
#include "server/server_connection.h"

#include "asio/post.hpp"
#include "server/server_call.h"

namespace ferry::detail {

void ServerConnection::adopt(IoThread& thread, std::unique_ptr<http2::ByteStream> stream,
                             const ServerOptions& options, const MethodTable& table,
                             std::atomic<std::size_t>& active_calls,
                             std::atomic<std::size_t>& live_connections) {
  auto owned = std::make_unique<ServerConnection>(thread, live_connections);
  ServerConnection* conn = owned.get();
  thread.connections.push_front(std::move(owned));
  conn->self_ = thread.connections.begin();

  ServerCallSite& site = conn->site_;
  static std::atomic<std::uint64_t> next_connection_id{1};
  site.connection_id = next_connection_id.fetch_add(1, std::memory_order_relaxed);
  site.methods = &table;
  site.runners = &thread.runners;
  site.deadlines = &thread.deadlines;
  site.limits = static_cast<const MessageLimits&>(options);
  site.max_header_bytes = options.max_header_list_size;
  site.active_calls = &active_calls;
  if (!options.cors_allowed_origins.empty()) site.cors_origins = &options.cors_allowed_origins;

  site.peer = stream->peer_address();  // once per connection, not per call
  const http2::LifecyclePolicy lifecycle = http2::LifecyclePolicy::for_server(options);
  if (options.credentials == nullptr) return conn->sniff(std::move(stream), options, lifecycle);
  const ConnectionLimits limits = options;
  conn->handshake_ = std::make_unique<tls::ServerHandshake>(
      std::move(stream), *options.credentials,
      [conn, limits, lifecycle](absl::StatusOr<tls::Accepted> accepted) {
        if (!accepted.ok()) return conn->on_connection_closed();  // no handler ever ran
        conn->site_.identity = std::move(accepted->identity);
        if (accepted->http1) {
          return conn->serve_http1(std::move(accepted->stream), limits, lifecycle, /*tls=*/true);
        }
        conn->serve(std::move(accepted->stream), limits, lifecycle);
      });
}

void ServerConnection::shutdown() {
  if (connection_ != nullptr) return connection_->shutdown();
  if (http1_ != nullptr) return http1_->shutdown();
  close();
}

void ServerConnection::close() {
  if (connection_ != nullptr) return connection_->close();
  if (http1_ != nullptr) return http1_->close();
  if (sniffer_ != nullptr) return sniffer_->close();
  if (handshake_ != nullptr) handshake_->close();
}

void ServerConnection::sniff(std::unique_ptr<http2::ByteStream> stream,
                             const ConnectionLimits& limits,
                             const http2::LifecyclePolicy& lifecycle) {
  sniffer_ = ProtocolSniffer::start(
      std::move(stream), lifecycle.handshake_timeout,
      [this, limits, lifecycle](std::unique_ptr<http2::ByteStream> told, bool http2) {
        // The sniffer is done: let it go from the loop, not from inside its own call.
        asio::post(thread_.io, [sniffer = std::move(sniffer_)] {});
        if (told == nullptr) return on_connection_closed();
        if (http2) return serve(std::move(told), limits, lifecycle);
        serve_http1(std::move(told), limits, lifecycle, /*tls=*/false);
      });
}

void ServerConnection::serve_http1(std::unique_ptr<http2::ByteStream> stream,
                                   const ConnectionLimits& limits,
                                   const http2::LifecyclePolicy& lifecycle, bool tls) {
  http1_ = std::make_shared<http1::Connection>(std::move(stream), limits, lifecycle, tls, this);
  http1_->start();
}

void ServerConnection::serve(std::unique_ptr<http2::ByteStream> stream,
                             const ConnectionLimits& limits,
                             const http2::LifecyclePolicy& lifecycle) {
  connection_ =
      std::make_shared<http2::Connection>(std::move(stream), http2::Role::kServer, limits, this);
  connection_->set_lifecycle(lifecycle);
  connection_->start();
}

http2::Stream* ServerConnection::on_stream_open(std::int32_t) {
  if (http1_ != nullptr) return new ServerCall(&site_, http1_.get());
  return new ServerCall(&site_, connection_.get());
}

void ServerConnection::on_connection_closed() {
  // Deleted from the loop, not from inside the connection's own call stack.
  asio::post(thread_.io, [this] {
    live_connections_.fetch_sub(1, std::memory_order_acq_rel);
    thread_.connections.erase(self_);
  });
}

}  // namespace ferry::detail
