// Implementation of ferry/channel.h: lazy connection, reconnection, and the unary, streaming
// and blocking entry points.
#include "ferry/channel.h"

#include <future>

#include "absl/strings/str_cat.h"
#include "asio/co_spawn.hpp"
#include "asio/connect.hpp"
#include "asio/executor_work_guard.hpp"
#include "asio/ip/tcp.hpp"
#include "asio/post.hpp"
#include "asio/redirect_error.hpp"
#include "asio/use_awaitable.hpp"
#include "asio/use_future.hpp"
#include "http2/connection.h"
#include "rpc/client_call.h"
#include "rpc/event.h"
#include "rpc/on_executor.h"

namespace ferry {
namespace detail {

// One HTTP/2 connection of a channel, and its observer.
struct ChannelConnection final : http2::ConnectionObserver {
  explicit ChannelConnection(const asio::any_io_executor& executor) : deadlines(executor) {}
  std::shared_ptr<http2::Connection> connection;
  DeadlineQueue deadlines;  // its calls' deadlines, on one timer
  http2::Stream* on_stream_open(std::int32_t) override { return nullptr; }  // no server push
  void on_goaway(std::int32_t, std::uint32_t) override {}
  void on_connection_closed() override {}
};

struct ChannelCore : std::enable_shared_from_this<ChannelCore> {
  asio::io_context::executor_type executor;
  std::string target;
  std::string host;
  std::string port;
  ChannelOptions options;
  std::shared_ptr<ChannelConnection> current;
  bool connecting = false;
  bool closed = false;
  absl::Status connect_error;
  Signal connected;  // any number of calls may wait for one connection attempt

  ChannelCore(asio::io_context::executor_type ex, std::string t, ChannelOptions o)
      : executor(ex), target(std::move(t)), options(std::move(o)), connected(ex) {
    std::string_view rest = target;
    if (rest.substr(0, 6) == "dns:///") rest.remove_prefix(6);
    if (rest.substr(0, 5) == "ipv4:" || rest.substr(0, 5) == "ipv6:") rest.remove_prefix(5);
    const std::size_t colon = rest.rfind(':');
    host = std::string(colon == std::string_view::npos ? rest : rest.substr(0, colon));
    port = colon == std::string_view::npos ? "443" : std::string(rest.substr(colon + 1));
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);
    }
    if (options.authority.empty()) options.authority = std::string(rest);
  }

  bool usable() const { return current != nullptr && current->connection->accepts_new_streams(); }

  // The connection to start a call on: the current one, or a new one.
  asio::awaitable<absl::StatusOr<std::shared_ptr<ChannelConnection>>> connection() {
    auto self = shared_from_this();
    while (true) {
      if (closed) co_return absl::CancelledError("the channel is closed");
      if (usable()) co_return current;
      if (!connecting) break;
      co_await connected.wait();  // another call is connecting: share its outcome
      if (!connecting && !usable()) co_return connect_error;
    }
    connecting = true;
    absl::Status status = co_await connect();
    connecting = false;
    connect_error = status;
    connected.notify_all();
    if (!status.ok()) co_return status;
    co_return current;
  }

  asio::awaitable<absl::Status> connect() {
    asio::error_code ec;
    asio::ip::tcp::resolver resolver(executor);
    auto endpoints = co_await resolver.async_resolve(
        host, port, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      co_return absl::UnavailableError(
          absl::StrCat("cannot resolve ", target, ": ", ec.message()));
    }
    asio::ip::tcp::socket socket(executor);
    asio::steady_timer timeout(executor, options.connect_timeout);
    bool timed_out = false;
    timeout.async_wait([&socket, &timed_out](const asio::error_code& e) {
      if (e) return;
      timed_out = true;
      asio::error_code ignored;
      socket.close(ignored);
    });
    co_await asio::async_connect(socket, endpoints, asio::redirect_error(asio::use_awaitable, ec));
    timeout.cancel();
    if (timed_out) {
      co_return absl::UnavailableError(absl::StrCat("timed out connecting to ", target));
    }
    if (ec) {
      co_return absl::UnavailableError(
          absl::StrCat("failed to connect to ", target, ": ", ec.message()));
    }
    if (closed) co_return absl::CancelledError("the channel is closed");
    http2::ConnectionSettings settings;
    settings.stream_window = options.stream_window;
    settings.connection_window = options.connection_window;
    settings.max_header_list_size = options.max_header_list_size;
    auto conn = std::make_shared<ChannelConnection>(executor);
    conn->connection = std::make_shared<http2::Connection>(std::move(socket), http2::Role::kClient,
                                                           settings, conn.get());
    conn->connection->start();
    // A draining predecessor (GOAWAY received) stays alive through its calls' references.
    current = std::move(conn);
    co_return absl::OkStatus();
  }

  // Starts a call: the returned ClientCall holds one reference for the caller.
  asio::awaitable<ClientCall*> start_call(std::string_view method, ClientContext& context) {
    if (ClientCall* call = try_start_call(method, context)) co_return call;
    absl::StatusOr<std::shared_ptr<ChannelConnection>> conn = co_await connection();
    if (!conn.ok()) co_return new ClientCall(executor, &context, conn.status());
    co_return start_call_on(*conn, method, context);
  }

  // start_call without suspending, when a connection is ready (the usual case); else null.
  // Spares a call the frames of start_call and connection().
  ClientCall* try_start_call(std::string_view method, ClientContext& context) {
    if (closed || !usable()) return nullptr;
    return start_call_on(current, method, context);
  }

  ClientCall* start_call_on(const std::shared_ptr<ChannelConnection>& conn,
                            std::string_view method, ClientContext& context) {
    const CallLimits limits{options.max_receive_message_size, options.max_send_message_size};
    auto* call = new ClientCall(conn, conn->connection.get(), &conn->deadlines, &context,
                                limits, options.max_header_list_size);
    call->start(method, options.authority, options.user_agent);
    return call;
  }

  void close() {
    closed = true;
    if (current != nullptr) current->connection->close();
    current.reset();
    connected.notify_all();
  }
};

}  // namespace detail

namespace {

// Starts a call and sends its one request with the end of the client's stream (unary and
// server-streaming calls). A request that cannot be sent (e.g. over the send limit) ends the call
// with the write's status: the server would otherwise wait for it forever.
asio::awaitable<detail::ClientCall*> start_with_request(detail::ChannelCore& core,
                                                        std::string_view method,
                                                        ClientContext& context,
                                                        const google::protobuf::MessageLite& request) {
  detail::ClientCall* call = co_await core.start_call(method, context);
  if (!call->done()) {
    absl::Status written = call->send_request(request);
    if (!written.ok()) call->cancel(written);
  }
  co_return call;
}

// Waits on another thread for open, a stream opening on executor. On the executor's own thread
// waiting would deadlock: the stream is then empty, and its operations say so.
BlockingClientStream wait_for_open(asio::io_context::executor_type executor,
                                   asio::awaitable<ClientStream> open) {
  if (executor.running_in_this_thread()) return BlockingClientStream(executor, {});
  ClientStream stream = asio::co_spawn(executor, std::move(open), asio::use_future).get();
  return BlockingClientStream(executor, std::move(stream));
}

asio::awaitable<absl::Status> unary_on_executor(std::shared_ptr<detail::ChannelCore> core,
                                                std::string_view method, ClientContext& context,
                                                const google::protobuf::MessageLite& request,
                                                google::protobuf::MessageLite& response) {
  // start_with_request inlined: a unary call is the hot path, and a nested coroutine would cost
  // it one more frame per call.
  detail::ClientCall* call = core->try_start_call(method, context);
  if (call == nullptr) call = co_await core->start_call(method, context);
  call->expect_single_message();
  if (!call->done()) {
    absl::Status written = call->send_request(request);
    if (!written.ok()) call->cancel(written);  // e.g. over the send limit: the status is the write's
  }
  // call->read(response) inlined too: its frame would stay alive while the call waits for the
  // response, a third frame per call in flight where asio's per-thread cache recycles two.
  std::optional<bool> got = false;
  if (!call->done()) {  // done already: it failed to start or to send, and nothing will come
    while (!(got = call->next_message(response))) co_await call->inbound_progress();
  }
  absl::Status status = co_await call->finish();
  // This coroutine runs on the call's executor, resumed from its queue: nothing of the call's
  // is below it on the stack, so the last reference may delete the call at once.
  call->unref_inline();
  if (status.ok() && !*got) {
    status = absl::InternalError("the server sent no response message for a unary call");
  }
  co_return status;
}

}  // namespace

Channel::Channel(asio::io_context& io, std::string target, ChannelOptions options)
    : core_(std::make_shared<detail::ChannelCore>(io.get_executor(), std::move(target),
                                                  std::move(options))) {}

Channel::Channel(std::string target, ChannelOptions options)
    : own_io_(std::make_unique<asio::io_context>(1)),
      core_(std::make_shared<detail::ChannelCore>(own_io_->get_executor(), std::move(target),
                                                  std::move(options))) {
  own_thread_ = std::thread([io = own_io_.get()] {
    auto work = asio::make_work_guard(*io);
    io->run();  // until ~Channel stops it, right after closing the connection
    // Then let what the close set off finish: the calls' deletion (posted by their last
    // release), the socket's aborted operations that hold the connection. Stopped with those
    // still queued, the io_context destroyed them unrun and leaked every call and connection.
    // Bounded, in case a user's operation on this loop is still waiting on something.
    io->restart();
    work.reset();
    io->run_for(std::chrono::seconds(1));
  });
}

Channel::~Channel() {
  auto core = core_;
  if (own_io_ != nullptr) {
    asio::post(core->executor, [core] { core->close(); });
    asio::post(core->executor, [io = own_io_.get()] { io->stop(); });
    own_thread_.join();
  } else {
    asio::post(core->executor, [core] { core->close(); });
  }
}

asio::io_context::executor_type Channel::executor() const { return core_->executor; }

// Not a coroutine itself: every coroutine frame a call holds while it waits is an allocation
// once more calls are in flight than asio's per-thread frame cache holds (two). On the channel's
// thread a unary call holds one frame, unary_on_executor's.
asio::awaitable<absl::Status> Channel::call(std::string_view method, ClientContext& context,
                                            const google::protobuf::MessageLite& request,
                                            google::protobuf::MessageLite& response) {
  if (core_->executor.running_in_this_thread()) {
    return unary_on_executor(core_, method, context, request, response);
  }
  // Everything by value or by reference to what the caller keeps alive while it awaits: this
  // function's own parameters are gone by then.
  auto make = [core = core_, method, &context, &request, &response] {
    return unary_on_executor(core, method, context, request, response);
  };
  return detail::on_executor(core_->executor, std::move(make));
}

asio::awaitable<ClientStream> Channel::open(std::string_view method, ClientContext& context) {
  auto core = core_;
  auto make = [&, core] { return core->start_call(method, context); };  // named: see call()
  detail::ClientCall* call = co_await detail::on_executor(core->executor, std::move(make));
  co_return ClientStream(call);
}

asio::awaitable<ClientStream> Channel::open(std::string_view method, ClientContext& context,
                                           const google::protobuf::MessageLite& request) {
  auto core = core_;
  auto make = [&, core] {  // named: see call()
    return start_with_request(*core, method, context, request);
  };

  detail::ClientCall* call = co_await detail::on_executor(core->executor, std::move(make));
  co_return ClientStream(call);
}

BlockingClientStream Channel::open_blocking(std::string_view method, ClientContext& context) {
  return wait_for_open(core_->executor, open(method, context));
}

BlockingClientStream Channel::open_blocking(std::string_view method, ClientContext& context,
                                            const google::protobuf::MessageLite& request) {
  return wait_for_open(core_->executor, open(method, context, request));
}

absl::Status Channel::call_blocking(std::string_view method, ClientContext& context,
                                    const google::protobuf::MessageLite& request,
                                    google::protobuf::MessageLite& response) {
  if (core_->executor.running_in_this_thread()) {
    return absl::FailedPreconditionError(
        "call_blocking on the channel's own thread would deadlock");
  }
  std::future<absl::Status> result = asio::co_spawn(
      core_->executor, unary_on_executor(core_, method, context, request, response),
      asio::use_future);
  return result.get();
}

}  // namespace ferry
