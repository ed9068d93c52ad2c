// Implementation of src/server/server_connection.h.
#include "server/server_connection.h"

#include "asio/post.hpp"
#include "http2/socket_stream.h"
#include "server/server_call.h"

namespace ferry::detail {

void ServerConnection::adopt(IoThread& thread, asio::ip::tcp::socket socket,
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

  conn->connection_ = std::make_shared<http2::Connection>(
      http2::make_tcp_stream(std::move(socket)), http2::Role::kServer, options, conn);
  site.peer = conn->connection_->peer_address();  // once per connection, not per call
  conn->connection_->set_lifecycle(http2::LifecyclePolicy::for_server(options));
  conn->connection_->start();
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
