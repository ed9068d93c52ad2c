// Implementation of src/transport/socket_stream.h.
#include "transport/socket_stream.h"

#include <sys/socket.h>

#include <cerrno>
#include <climits>

#include "asio/write.hpp"
#include "transport/lingering_close.h"

namespace ferry::http2 {

std::size_t send_gathered(int fd, std::span<const iovec> iov, asio::error_code& ec) {
  std::size_t written = 0;
  while (!iov.empty()) {
    const std::size_t count = std::min<std::size_t>(iov.size(), IOV_MAX);
    std::size_t batch = 0;
    for (std::size_t i = 0; i < count; ++i) batch += iov[i].iov_len;
    msghdr msg{};
    msg.msg_iov = const_cast<iovec*>(iov.data());
    msg.msg_iovlen = count;
    ssize_t n;
    do {
      n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK) {
        ec = asio::error_code(errno, asio::system_category());
      } else if (written == 0) {
        ec = asio::error::would_block;
      }
      return written;
    }
    written += static_cast<std::size_t>(n);
    if (static_cast<std::size_t>(n) < batch) return written;  // the socket's buffer is full
    iov = iov.subspan(count);
  }
  return written;
}

namespace {

template <class Protocol>
class SocketStream final : public ByteStream {
 public:
  explicit SocketStream(typename Protocol::socket socket)
      : executor_(socket.get_executor()), socket_(std::move(socket)) {
    asio::error_code ignored;
    socket_.non_blocking(true, ignored);
  }

  const asio::any_io_executor& executor() const override { return executor_; }

  void async_read_some(asio::mutable_buffer into,
                       std::shared_ptr<ByteStreamClient> client) override {
    socket_.async_read_some(
        into, [client = std::move(client)](const asio::error_code& ec, std::size_t n) {
          client->on_read(ec, n);
        });
  }

  bool waits_without_buffer() const override { return true; }
  bool cancel_read() override {
    asio::error_code ignored;
    socket_.cancel(ignored);  // the connection has no write pending: only the read is cancelled
    return true;
  }

  void async_wait_readable(std::shared_ptr<ByteStreamClient> client) override {
    socket_.async_wait(
        Protocol::socket::wait_read,
        [client = std::move(client)](const asio::error_code& ec) { client->on_readable(ec); });
  }

  std::size_t read_some_now(asio::mutable_buffer into, asio::error_code& ec) override {
    ssize_t n;
    do {
      n = ::recv(socket_.native_handle(), into.data(), into.size(), MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    if (n > 0) return static_cast<std::size_t>(n);
    if (n == 0) {
      ec = into.size() == 0 ? asio::error_code() : asio::error::eof;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      ec = asio::error::would_block;
    } else {
      ec = asio::error_code(errno, asio::system_category());
    }
    return 0;
  }

  std::size_t write_some_now(std::span<const iovec> slices, asio::error_code& ec) override {
    return send_gathered(socket_.native_handle(), slices, ec);
  }

  void async_write(std::span<const asio::const_buffer> buffers,
                   std::shared_ptr<ByteStreamClient> client) override {
    asio::async_write(socket_, buffers,
                      [client = std::move(client)](const asio::error_code& ec, std::size_t) {
                        client->on_written(ec);
                      });
  }

  void close() override {
    asio::error_code ignored;
    socket_.shutdown(Protocol::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  void close_gracefully() override {
    if (!socket_.is_open()) return;
    // Released rather than closed: the pending operations end (operation_aborted) as they
    // would, and the descriptor leaves asio's reactor for the lingering read.
    asio::error_code ec;
    const int fd = socket_.release(ec);
    if (ec) {
      socket_.close(ec);
      return;
    }
    linger_then_close(executor_, fd);
  }

  std::string peer_address() const override;

  typename Protocol::socket& socket() { return socket_; }

 private:
  asio::any_io_executor executor_;
  typename Protocol::socket socket_;
};

template <>
std::string SocketStream<asio::ip::tcp>::peer_address() const {
  asio::error_code ec;
  auto endpoint = socket_.remote_endpoint(ec);
  if (ec) return "unknown";
  const bool v6 = endpoint.address().is_v6();
  return (v6 ? "ipv6:[" : "ipv4:") + endpoint.address().to_string() + (v6 ? "]:" : ":") +
         std::to_string(endpoint.port());
}

template <>
std::string SocketStream<asio::local::stream_protocol>::peer_address() const {
  asio::error_code ec;
  auto endpoint = socket_.remote_endpoint(ec);
  std::string path = ec ? std::string() : endpoint.path();
  if (path.empty()) {  // an accepted connection: the client's end is unnamed
    endpoint = socket_.local_endpoint(ec);
    if (!ec) path = endpoint.path();
  }
  if (!path.empty() && path.front() == '\0') return "unix-abstract:" + path.substr(1);
  return "unix:" + path;
}

}  // namespace

std::unique_ptr<ByteStream> make_unix_stream(asio::local::stream_protocol::socket socket) {
  return std::make_unique<SocketStream<asio::local::stream_protocol>>(std::move(socket));
}

std::unique_ptr<ByteStream> make_tcp_stream(asio::ip::tcp::socket socket) {
  asio::error_code ignored;
  socket.set_option(asio::ip::tcp::no_delay(true), ignored);
  return std::make_unique<SocketStream<asio::ip::tcp>>(std::move(socket));
}

}  // namespace ferry::http2
