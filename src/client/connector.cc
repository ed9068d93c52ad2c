// Implementation of src/client/connector.h.
#include "client/connector.h"

#include "absl/strings/str_cat.h"
#include "asio/connect.hpp"
#include "asio/ip/tcp.hpp"
#include "asio/local/stream_protocol.hpp"
#include "asio/redirect_error.hpp"
#include "asio/steady_timer.hpp"
#include "asio/use_awaitable.hpp"
#include "http2/socket_stream.h"
#include "tls/handshake.h"

namespace ferry::detail {
namespace {

// Connects socket with connect(socket, ec) (an awaitable), closing it at deadline.
template <class Socket, class Connect>
asio::awaitable<absl::Status> connect_within(Socket& socket, Connect connect,
                                             std::chrono::steady_clock::time_point deadline,
                                             const std::string& target_string) {
  asio::steady_timer timeout(socket.get_executor(), deadline);
  bool timed_out = false;
  timeout.async_wait([&socket, &timed_out](const asio::error_code& e) {
    if (e) return;
    timed_out = true;
    asio::error_code ignored;
    socket.close(ignored);
  });
  asio::error_code ec;
  co_await connect(ec);
  timeout.cancel();
  if (timed_out) {
    co_return absl::UnavailableError(absl::StrCat("timed out connecting to ", target_string));
  }
  if (ec) {
    co_return absl::UnavailableError(
        absl::StrCat("failed to connect to ", target_string, ": ", ec.message()));
  }
  co_return absl::OkStatus();
}

}  // namespace

asio::awaitable<absl::StatusOr<std::unique_ptr<http2::ByteStream>>> connect_stream(
    asio::io_context::executor_type executor, const Target& target,
    const std::string& target_string, const ChannelOptions& options) {
  const auto deadline = std::chrono::steady_clock::now() + options.connect_timeout;
  std::unique_ptr<http2::ByteStream> stream;
  if (!target.unix_path.empty()) {
    asio::local::stream_protocol::socket socket(executor);
    const asio::local::stream_protocol::endpoint endpoint(target.unix_path);
    absl::Status s = co_await connect_within(
        socket,
        [&](asio::error_code& ec) {
          return socket.async_connect(endpoint, asio::redirect_error(asio::use_awaitable, ec));
        },
        deadline, target_string);
    if (!s.ok()) co_return s;
    stream = http2::make_unix_stream(std::move(socket));
  } else {
    asio::error_code ec;
    asio::ip::tcp::resolver resolver(executor);
    auto endpoints = co_await resolver.async_resolve(
        target.host, target.port, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      co_return absl::UnavailableError(
          absl::StrCat("cannot resolve ", target_string, ": ", ec.message()));
    }
    asio::ip::tcp::socket socket(executor);
    absl::Status s = co_await connect_within(
        socket,
        [&](asio::error_code& e) -> asio::awaitable<void> {
          co_await asio::async_connect(socket, endpoints,
                                       asio::redirect_error(asio::use_awaitable, e));
        },
        deadline, target_string);
    if (!s.ok()) co_return s;
    stream = http2::make_tcp_stream(std::move(socket));
  }
  if (options.credentials == nullptr) co_return stream;
  // The name the certificate must carry: the target's host (for a Unix socket, the authority).
  co_return co_await tls::client_handshake(
      std::move(stream), *options.credentials,
      target.unix_path.empty() ? target.host : target.authority, deadline);
}

}  // namespace ferry::detail
