// Implementation of src/server/listener.h: one accept loop, instantiated for TCP and for Unix
// domain sockets.
#include "server/listener.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "asio/ip/tcp.hpp"
#include "asio/local/stream_protocol.hpp"
#include "asio/post.hpp"
#include "asio/steady_timer.hpp"
#include "transport/socket_stream.h"

namespace ferry::detail {
namespace {

// Failures that last until something else gives resources back: retrying at once would spin.
bool out_of_resources(const asio::error_code& ec) {
  return ec == asio::error::no_descriptors || ec == asio::error::no_buffer_space ||
         ec == asio::error::no_memory || ec == asio::error_code(ENFILE, asio::system_category());
}

std::unique_ptr<http2::ByteStream> make_stream(asio::ip::tcp::socket s) {
  return http2::make_tcp_stream(std::move(s));
}
std::unique_ptr<http2::ByteStream> make_stream(asio::local::stream_protocol::socket s) {
  return http2::make_unix_stream(std::move(s));
}

template <class Protocol>
class SocketListener final : public Listener {
 public:
  using Acceptor = typename Protocol::acceptor;

  SocketListener(Acceptor acceptor, std::string unix_file)
      : acceptor_(std::move(acceptor)),
        unix_file_(std::move(unix_file)),
        retry_(acceptor_.get_executor()) {}
  ~SocketListener() override { close(); }

  int port() const override;

  void start(const std::vector<std::unique_ptr<IoThread>>& threads, OnAccept on_accept) override {
    threads_ = &threads;
    on_accept_ = std::move(on_accept);
    accept_next();
  }

  void close() override {
    asio::error_code ignored;
    acceptor_.close(ignored);
    retry_.cancel();
    if (!unix_file_.empty()) {
      ::unlink(unix_file_.c_str());
      unix_file_.clear();
    }
  }

 private:
  void accept_next() {
    IoThread& target = *(*threads_)[next_thread_];
    next_thread_ = (next_thread_ + 1) % threads_->size();
    acceptor_.async_accept(target.io, [this, &target](const asio::error_code& ec,
                                                      typename Protocol::socket socket) {
      if (ec == asio::error::operation_aborted || !acceptor_.is_open()) return;
      if (ec && out_of_resources(ec)) {
        if (!logged_exhaustion_) {
          logged_exhaustion_ = true;
          std::fprintf(stderr, "ferry: accept failed (%s); retrying every %lld ms until it works\n",
                       ec.message().c_str(), static_cast<long long>(kRetryAfter.count()));
        }
        retry_.expires_after(kRetryAfter);
        retry_.async_wait([this](const asio::error_code& e) {
          if (!e && acceptor_.is_open()) accept_next();
        });
        return;
      }
      // Any other error is the client's (it gave up before the accept): carry on.
      if (!ec) {
        logged_exhaustion_ = false;
        if (!on_accept_(target, make_stream(std::move(socket)))) return;
      }
      accept_next();
    });
  }

  Acceptor acceptor_;
  std::string unix_file_;  // removed on close
  const std::vector<std::unique_ptr<IoThread>>* threads_ = nullptr;
  std::size_t next_thread_ = 0;
  OnAccept on_accept_;
  asio::steady_timer retry_;
  bool logged_exhaustion_ = false;
};

template <>
int SocketListener<asio::ip::tcp>::port() const {
  asio::error_code ec;
  return acceptor_.local_endpoint(ec).port();
}
template <>
int SocketListener<asio::local::stream_protocol>::port() const {
  return 0;
}

template <class Protocol>
absl::StatusOr<std::unique_ptr<Listener>> listen(asio::io_context& io,
                                                 const typename Protocol::endpoint& endpoint,
                                                 const std::string& name, bool reuse_address,
                                                 std::string unix_file) {
  typename Protocol::acceptor acceptor(io);
  asio::error_code ec;
  acceptor.open(endpoint.protocol(), ec);
  if (!ec && reuse_address) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) acceptor.bind(endpoint, ec);
  if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return absl::UnavailableError(absl::StrCat("cannot listen on ", name, ": ", ec.message()));
  return std::make_unique<SocketListener<Protocol>>(std::move(acceptor), std::move(unix_file));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Listener>> Listener::open(asio::io_context& io,
                                                         const std::string& host, int port) {
  using Local = asio::local::stream_protocol;
  const bool abstract = absl::StartsWith(host, "unix-abstract:");
  if (abstract || absl::StartsWith(host, "unix:")) {
    std::string path = host.substr(host.find(':') + 1);
    if (abstract) {
      path.insert(0, 1, '\0');
    } else if (absl::StartsWith(path, "//")) {
      path.erase(0, 2);  // unix:///absolute/path
    }
    if (path.empty() || path.size() > 107) {
      return absl::InvalidArgumentError(absl::StrCat("bad Unix socket address '", host, "'"));
    }
    if (!abstract) {
      // A socket file left by an earlier run would fail the bind: replace it (not other files).
      struct stat st;
      if (::stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode)) ::unlink(path.c_str());
    }
    std::string file = abstract ? std::string() : path;
    return listen<Local>(io, Local::endpoint(path), host, false, std::move(file));
  }
  asio::error_code ec;
  const asio::ip::address address = asio::ip::make_address(host, ec);
  if (ec) return absl::InvalidArgumentError(absl::StrCat("bad listen address '", host, "'"));
  if (port < 0 || port > 65535) return absl::InvalidArgumentError("port out of range");
  return listen<asio::ip::tcp>(io,
                               asio::ip::tcp::endpoint(address, static_cast<unsigned short>(port)),
                               absl::StrCat(host, ":", port), true, {});
}

}  // namespace ferry::detail
