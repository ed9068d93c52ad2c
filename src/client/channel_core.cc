// Implementation of src/client/channel_core.h.
#include "client/channel_core.h"

#include "absl/strings/str_cat.h"
#include "client/client_call.h"
#include "client/connector.h"

namespace ferry::detail {

ChannelCore::ChannelCore(asio::io_context::executor_type executor, std::string target,
                         ChannelOptions options)
    : executor_(executor),
      target_string_(std::move(target)),
      target_(parse_target(target_string_)),
      options_(std::move(options)),
      connected_(executor) {
  if (options_.authority.empty() && target_.ok()) options_.authority = target_->authority;
}

asio::awaitable<absl::StatusOr<std::shared_ptr<ChannelConnection>>> ChannelCore::connection() {
  auto self = shared_from_this();
  while (true) {
    if (closed_) co_return absl::CancelledError("the channel is closed");
    if (usable()) co_return current_;
    if (!connecting_) break;
    co_await connected_.wait();  // another call is connecting: share its outcome
    if (!connecting_ && !usable()) co_return connect_error_;
  }
  connecting_ = true;
  absl::Status status = co_await connect();
  connecting_ = false;
  connect_error_ = status;
  connected_.notify_all();
  if (!status.ok()) co_return status;
  co_return current_;
}

asio::awaitable<absl::Status> ChannelCore::connect() {
  if (!target_.ok()) co_return absl::UnavailableError(target_.status().message());
  absl::StatusOr<std::unique_ptr<http2::ByteStream>> stream =
      co_await connect_stream(executor_, *target_, target_string_, options_);
  if (!stream.ok()) co_return stream.status();
  if (closed_) co_return absl::CancelledError("the channel is closed");
  auto conn = std::make_shared<ChannelConnection>(executor_);
  conn->connection = std::make_shared<http2::Connection>(
      *std::move(stream), http2::Role::kClient, options_, conn.get());
  http2::LifecyclePolicy lifecycle;
  lifecycle.keepalive = options_.keepalive;
  conn->connection->set_lifecycle(lifecycle);
  conn->connection->start();
  // A draining predecessor (GOAWAY received) stays alive through its calls' references.
  current_ = std::move(conn);
  co_return absl::OkStatus();
}

asio::awaitable<ClientCall*> ChannelCore::start_call(std::string_view method,
                                                     ClientContext& context) {
  if (ClientCall* call = try_start_call(method, context)) co_return call;
  absl::StatusOr<std::shared_ptr<ChannelConnection>> conn = co_await connection();
  if (!conn.ok()) co_return new ClientCall(executor_, &context, conn.status());
  co_return start_call_on(*conn, method, context);
}

ClientCall* ChannelCore::start_call_on(const std::shared_ptr<ChannelConnection>& conn,
                                       std::string_view method, ClientContext& context) {
  auto* call = new ClientCall(conn, conn->connection.get(), &conn->deadlines, &context, options_,
                              options_.max_header_list_size);
  call->start(method, options_.authority, options_.user_agent);
  return call;
}

void ChannelCore::close() {
  closed_ = true;
  if (current_ != nullptr) current_->connection->close();
  current_.reset();
  connected_.notify_all();
}

}  // namespace ferry::detail
