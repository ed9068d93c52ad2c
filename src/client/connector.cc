// Implementation of src/client/connector.h.
#include "client/connector.h"

#include <exception>
#include <memory>

#include "absl/strings/str_cat.h"
#include "asio/ip/tcp.hpp"
#include "asio/local/stream_protocol.hpp"
#include "asio/redirect_error.hpp"
#include "asio/steady_timer.hpp"
#include "asio/use_awaitable.hpp"
#include "tls/handshake.h"
#include "transport/socket_stream.h"

namespace ferry::detail {
namespace {

// Connects socket with connect(socket, ec) (an awaitable), closing it at deadline.
template <class Socket, class Connect>
asio::awaitable<absl::Status> connect_within(Socket& socket, Connect connect,
                                             std::chrono::steady_clock::time_point deadline,
                                             const std::string& target_string) {
  // What the timeout's handler may touch, apart from this frame: when the connect completes
  // and the deadline passes in the same pass of the reactor, the handler is already queued when
  // cancel() comes, and runs after this frame (and the socket, moved into its stream or gone)
  // has been freed. It then finds the socket forgotten and does nothing.
  struct Watch {
    Socket* socket;
    bool timed_out = false;
  };
  auto watch = std::make_shared<Watch>(Watch{&socket});
  asio::steady_timer timeout(socket.get_executor(), deadline);
  timeout.async_wait([watch](const asio::error_code& e) {
    if (e || watch->socket == nullptr) return;
    watch->timed_out = true;
    asio::error_code ignored;
    watch->socket->close(ignored);
  });
  asio::error_code ec;
  co_await connect(ec);
  watch->socket = nullptr;
  timeout.cancel();
  if (watch->timed_out) {
    co_return absl::UnavailableError(absl::StrCat("timed out connecting to ", target_string));
  }
  if (ec) {
    co_return absl::UnavailableError(
        absl::StrCat("failed to connect to ", target_string, ": ", ec.message()));
  }
  co_return absl::OkStatus();
}

asio::awaitable<absl::StatusOr<std::unique_ptr<http2::ByteStream>>> connect_or_throw(
    asio::io_context::executor_type executor, const Address& address, const std::string& tls_host,
    std::chrono::steady_clock::time_point deadline, const ChannelOptions& options) {
  const std::string name = address.to_string();
  std::unique_ptr<http2::ByteStream> stream;
  if (!address.unix_path.empty()) {
    asio::local::stream_protocol::socket socket(executor);
    // asio's endpoint holds at most sizeof(sun_path) - 1 bytes (an abstract name's leading NUL
    // included), and throws beyond: a resolver's address may be longer than parse_target allows.
    if (address.unix_path.size() > kMaxUnixPathBytes) {
      co_return absl::UnavailableError(
          absl::StrCat("failed to connect to ", name, ": the path is too long for a Unix socket"));
    }
    const asio::local::stream_protocol::endpoint endpoint(address.unix_path);
    absl::Status s = co_await connect_within(
        socket,
        [&](asio::error_code& ec) {
          return socket.async_connect(endpoint, asio::redirect_error(asio::use_awaitable, ec));
        },
        deadline, name);
    if (!s.ok()) co_return s;
    stream = http2::make_unix_stream(std::move(socket));
  } else {
    asio::ip::tcp::socket socket(executor);
    absl::Status s = co_await connect_within(
        socket,
        [&](asio::error_code& e) {
          return socket.async_connect(address.tcp, asio::redirect_error(asio::use_awaitable, e));
        },
        deadline, name);
    if (!s.ok()) co_return s;
    stream = http2::make_tcp_stream(std::move(socket));
  }
  if (options.credentials == nullptr) co_return stream;
  co_return co_await tls::client_handshake(std::move(stream), *options.credentials, tls_host,
                                           deadline,
                                           options.http_version == ChannelHttpVersion::kHttp1);
}

}  // namespace

asio::awaitable<absl::StatusOr<std::unique_ptr<http2::ByteStream>>> connect_address(
    asio::io_context::executor_type executor, const Address& address, const std::string& tls_host,
    std::chrono::steady_clock::time_point deadline, const ChannelOptions& options) {
  // Its callers run it in coroutines spawned detached (the subchannel's attempts, an HTTP/1.1
  // pool's dials), where an exception would be dropped and the attempt never end: whatever
  // throws (asio's system errors, a failed allocation) ends the attempt with its status instead.
  try {
    co_return co_await connect_or_throw(executor, address, tls_host, deadline, options);
  } catch (const std::exception& e) {
    co_return absl::UnavailableError(
        absl::StrCat("failed to connect to ", address.to_string(), ": ", e.what()));
  }
}

}  // namespace ferry::detail
