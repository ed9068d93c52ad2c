// A channel's connection management (client layer, private): the parsed target, the current
// HTTP/2 connection, connecting it (lazily, shared by every call waiting for it) and replacing
// it once it is lost or draining (GOAWAY). Calls start here. Everything runs on the channel's
// executor.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "asio/awaitable.hpp"
#include "asio/io_context.hpp"
#include "call/deadline_queue.h"
#include "call/event.h"
#include "client/target.h"
#include "ferry/channel.h"
#include "http2/connection.h"

namespace ferry::detail {

class ClientCall;

// One HTTP/2 connection of a channel, and its observer.
struct ChannelConnection final : http2::ConnectionObserver {
  explicit ChannelConnection(const asio::any_io_executor& executor) : deadlines(executor) {}
  std::shared_ptr<http2::Connection> connection;
  DeadlineQueue deadlines;  // its calls' deadlines, on one timer
  http2::Stream* on_stream_open(std::int32_t) override { return nullptr; }  // no server push
  void on_goaway(std::int32_t, http2::ErrorCode) override {}
  void on_connection_closed() override {}
};

class ChannelCore : public std::enable_shared_from_this<ChannelCore> {
 public:
  ChannelCore(asio::io_context::executor_type executor, std::string target,
              ChannelOptions options);

  const asio::io_context::executor_type& executor() const { return executor_; }

  // Starts a call: the returned ClientCall holds one reference for the caller. A call that
  // cannot connect is returned over, with UNAVAILABLE.
  asio::awaitable<ClientCall*> start_call(std::string_view method, ClientContext& context);
  // start_call without suspending, when a connection is ready (the usual case); else null.
  // Spares a call the frames of start_call and connection().
  ClientCall* try_start_call(std::string_view method, ClientContext& context) {
    if (closed_ || !usable()) return nullptr;
    return start_call_on(current_, method, context);
  }

  // The channel's client interceptors (ChannelOptions::interceptors); usually none.
  const std::vector<std::shared_ptr<ClientInterceptor>>& interceptors() const {
    return options_.interceptors;
  }

  // Closes the connection; calls still running fail, later ones fail with CANCELLED.
  void close();

 private:
  bool usable() const {
    return current_ != nullptr && current_->connection->accepts_new_streams();
  }
  // The connection to start a call on: the current one, or a new one.
  asio::awaitable<absl::StatusOr<std::shared_ptr<ChannelConnection>>> connection();
  asio::awaitable<absl::Status> connect();
  ClientCall* start_call_on(const std::shared_ptr<ChannelConnection>& conn,
                            std::string_view method, ClientContext& context);

  asio::io_context::executor_type executor_;
  std::string target_string_;
  absl::StatusOr<Target> target_;
  ChannelOptions options_;
  std::shared_ptr<ChannelConnection> current_;
  bool connecting_ = false;
  bool closed_ = false;
  absl::Status connect_error_;
  Signal connected_;  // any number of calls may wait for one connection attempt
};

}  // namespace ferry::detail
