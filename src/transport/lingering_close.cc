// Implementation of src/transport/lingering_close.h.
#include "transport/lingering_close.h"

#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <memory>

#include "asio/posix/stream_descriptor.hpp"
#include "asio/steady_timer.hpp"

namespace ferry::http2 {
namespace {

class Lingerer : public std::enable_shared_from_this<Lingerer> {
 public:
  Lingerer(const asio::any_io_executor& executor, int fd)
      : descriptor_(executor, fd), timer_(executor, kLingerLimit) {}

  void start() {
    timer_.async_wait([self = shared_from_this()](const asio::error_code& ec) {
      if (!ec) self->close();
    });
    read();
  }

 private:
  void read() {
    descriptor_.async_read_some(
        asio::buffer(drop_), [self = shared_from_this()](const asio::error_code& ec, std::size_t) {
          if (ec) {
            self->close();  // the peer's end (or the time limit)
          } else {
            self->read();
          }
        });
  }
  void close() {
    asio::error_code ignored;
    timer_.cancel();
    descriptor_.close(ignored);
  }

  asio::posix::stream_descriptor descriptor_;
  asio::steady_timer timer_;
  std::array<char, 1024> drop_;  // small: many connections may linger at once
};

}  // namespace

void linger_then_close(const asio::any_io_executor& executor, int fd) {
  if (::shutdown(fd, SHUT_WR) != 0) {  // not connected any more: nothing to wait for
    ::close(fd);
    return;
  }
  std::make_shared<Lingerer>(executor, fd)->start();
}

}  // namespace ferry::http2
