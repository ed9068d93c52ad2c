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
  site.methods = &table;
  site.runners = &thread.runners;
  site.deadlines = &thread.deadlines;
  site.limits = CallLimits{options.max_receive_message_size, options.max_send_message_size};
  site.max_header_bytes = options.max_header_list_size;
  site.active_calls = &active_calls;

  site.peer = stream->peer_address();  // once per connection, not per call
  const http2::LifecyclePolicy lifecycle = http2::LifecyclePolicy::for_server(options);
  if (options.credentials == nullptr) return conn->serve(std::move(stream), options, lifecycle);
  const ConnectionLimits limits = options;
  conn->handshake_ = std::make_unique<tls::ServerHandshake>(
      std::move(stream), *options.credentials,
      [conn, limits, lifecycle](absl::StatusOr<tls::Accepted> accepted) {
        if (!accepted.ok()) return conn->on_connection_closed();  // no handler ever ran
        conn->site_.identity = std::move(accepted->identity);
        conn->serve(std::move(accepted->stream), limits, lifecycle);
      });
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
