// Closing a TCP byte stream while the peer's last bytes are still unread (src/http2/
// lingering_close.h): a plain close resets the connection, which the peer reads as an error; a
// graceful close sends a FIN, keeps draining what the peer sends, and lets the descriptor go
// when the peer closes too, or at the time limit.
#include "transport/lingering_close.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>

#include "asio/io_context.hpp"
#include "asio/ip/tcp.hpp"
#include "asio/read.hpp"
#include "asio/write.hpp"
#include "transport/socket_stream.h"

namespace ferry::http2::lingering_close_test {
namespace {

using namespace std::chrono_literals;

// A loopback TCP connection: the server's end as a byte stream on io, the client's as a plain
// blocking socket the test drives. The client has sent bytes the server never read.
struct UnreadBytes {
  asio::io_context io;
  asio::ip::tcp::socket client{io};
  std::unique_ptr<ByteStream> server;

  UnreadBytes() {
    asio::ip::tcp::acceptor acceptor(io, {asio::ip::make_address("127.0.0.1"), 0});
    client.connect(acceptor.local_endpoint());
    asio::ip::tcp::socket accepted(io);
    acceptor.accept(accepted);
    asio::write(client, asio::buffer(std::string(1000, 'r')));
    while (accepted.available() < 1000) std::this_thread::sleep_for(1ms);
    server = make_tcp_stream(std::move(accepted));
  }

  // What the client's next read ends with: eof for a FIN, connection_reset for a reset.
  asio::error_code client_read_end() {
    char byte;
    asio::error_code ec;
    client.read_some(asio::buffer(&byte, 1), ec);
    return ec;
  }

  // How the client's writes end: success when 100 writes pass, else the error (the reset; or a
  // broken pipe, for a write after the reset arrived).
  asio::error_code client_write_end() {
    asio::error_code ec;
    for (int i = 0; i < 100 && !ec; ++i) {
      asio::write(client, asio::buffer(std::string(1024, 'x')), ec);
      std::this_thread::sleep_for(1ms);
    }
    if (ec == asio::error::connection_reset) ec = asio::error::broken_pipe;
    return ec;
  }
};

// Why the graceful close exists: closing over unread bytes resets the connection, and the peer's
// next writes fail (a client sending a request just then loses the connection, and with it the
// chance to read the GOAWAY that had already arrived).
TEST(LingeringClose, PlainCloseOverUnreadBytesResetsTheConnection) {
  UnreadBytes c;
  c.server->close();
  EXPECT_EQ(c.client_write_end(), asio::error::broken_pipe);
}

TEST(LingeringClose, GracefulCloseSendsAFinAndDrainsUntilThePeerCloses) {
  UnreadBytes c;
  c.server->close_gracefully();
  c.io.poll();  // the lingering read takes the unread bytes
  EXPECT_EQ(c.client_read_end(), asio::error::eof);
  // The server's end still reads (and drops) what the client sends after the FIN.
  EXPECT_FALSE(c.client_write_end());
  c.client.close();
  c.io.run();  // returns once the lingering read saw the client's end: the descriptor is closed
}

TEST(LingeringClose, APeerThatNeverClosesIsLetGoAtTheLimit) {
  UnreadBytes c;
  const auto start = std::chrono::steady_clock::now();
  c.server->close_gracefully();
  c.io.run();  // only the time limit ends the lingering read
  EXPECT_GE(std::chrono::steady_clock::now() - start, kLingerLimit);
  EXPECT_EQ(c.client_read_end(), asio::error::eof);
  // The server's end is closed now: the client's writes fail (the first draws the reset).
  EXPECT_EQ(c.client_write_end(), asio::error::broken_pipe);
}

}  // namespace
}  // namespace ferry::http2::lingering_close_test
