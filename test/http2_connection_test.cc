// http2::Connection driven in memory (src/transport/memory_stream.h), without sockets: a client and
// a server connection exchanging requests, responses, trailers, resets and GOAWAY; a write that
// outgrows the pipe and completes asynchronously; a peer that vanishes, or closes right after its
// GOAWAY; and bytes that are not HTTP/2, which end the connection cleanly.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "asio/executor_work_guard.hpp"
#include "asio/io_context.hpp"
#include "http2/connection.h"
#include "transport/memory_stream.h"

namespace ferry::http2::http2_connection_test {
namespace {

constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

// A stream that records what it is told; consumes DATA as it arrives.
class Recorder : public Stream {
 public:
  std::vector<std::pair<std::string, std::string>> headers;
  int header_blocks = 0;
  std::string data;
  bool remote_ended = false;
  bool closed = false;
  ErrorCode error = ErrorCode::kNoError;
  Connection* connection = nullptr;

  std::string header(std::string_view name) const {
    for (const auto& [n, v] : headers) {
      if (n == name) return v;
    }
    return "";
  }

  bool on_header(std::string_view name, std::string_view value) override {
    headers.emplace_back(name, value);
    return true;
  }
  void on_headers_done() override { ++header_blocks; }
  void on_data(Slice chunk) override {
    data.append(chunk.view());
    if (connection != nullptr) connection->consume(this, chunk.size());
  }
  void on_remote_end() override { remote_ended = true; }
  void on_outbound_taken() override {}
  void on_closed(ErrorCode e) override {
    closed = true;
    error = e;
  }

  // Outbound state, for the test to fill.
  void queue(std::string_view bytes, bool end) {
    outbound.append_copy(bytes.data(), bytes.size());
    outbound_end = end;
  }
  void add_trailer(std::string name, std::string value) {
    trailers.owned.push_back({std::move(name), std::move(value)});
  }
};

class Observer : public ConnectionObserver {
 public:
  // Server: streams the peer opens get a Recorder each.
  std::vector<std::unique_ptr<Recorder>> opened;
  bool refuse = false;
  bool goaway = false;
  ErrorCode goaway_error = ErrorCode::kNoError;
  bool closed = false;
  Connection* connection = nullptr;

  Stream* on_stream_open(std::int32_t) override {
    if (refuse) return nullptr;
    opened.push_back(std::make_unique<Recorder>());
    opened.back()->connection = connection;
    return opened.back().get();
  }
  void on_goaway(std::int32_t, ErrorCode error) override {
    goaway = true;
    goaway_error = error;
  }
  void on_connection_closed() override { closed = true; }
};

struct Pair {
  asio::io_context io;
  // A memory pipe's pending reads are not asio operations: without work the loop would stop
  // itself once idle, and what is posted later would never run.
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::shared_ptr<MemoryPipe> pipe;
  Observer client_observer;
  Observer server_observer;
  std::shared_ptr<Connection> client;
  std::shared_ptr<Connection> server;

  explicit Pair(std::size_t capacity = 256 * 1024) {
    pipe = MemoryPipe::create(io.get_executor(), capacity);
    client = std::make_shared<Connection>(pipe->end(0), Role::kClient, ConnectionLimits{},
                                          &client_observer);
    server = std::make_shared<Connection>(pipe->end(1), Role::kServer, ConnectionLimits{},
                                          &server_observer);
    client_observer.connection = client.get();
    server_observer.connection = server.get();
    client->start();
    server->start();
  }
  ~Pair() {
    client->close();
    server->close();
    io.poll();
  }

  template <class Pred>
  bool run_until(Pred done) {
    for (int i = 0; i < 10000 && !done(); ++i) {
      if (io.poll_one() == 0) break;
    }
    return done();
  }
};

// One connection on a memory pipe whose other end the test plays (MemoryPipe::inject and
// take_written): its `side` is 0 for a client, 1 for a server.
struct Played {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::shared_ptr<MemoryPipe> pipe = MemoryPipe::create(io.get_executor());
  Observer observer;
  std::shared_ptr<Connection> connection;
  int side;

  explicit Played(Role role) : side(role == Role::kClient ? 0 : 1) {
    connection = std::make_shared<Connection>(pipe->end(side), role, ConnectionLimits{}, &observer);
    observer.connection = connection.get();
    connection->start();
  }
  // Runs the loop until the connection closed (or nothing is left to run).
  void run_until_closed() {
    for (int i = 0; i < 1000 && !observer.closed; ++i) {
      if (io.poll_one() == 0) break;
    }
  }
};

std::vector<HeaderField> request_headers() {
  return {HeaderField::literal(":method", "POST"),
          HeaderField::literal(":scheme", "http"),
          HeaderField::literal(":path", "/pkg.Svc/Method"),
          HeaderField::literal(":authority", "memory"),
          HeaderField::literal("content-type", "application/grpc"),
          {"x-custom", "value"}};
}

TEST(Http2Connection, RequestResponseAndTrailersInMemory) {
  Recorder call;  // outlives the connections, which report to it until they close
  Pair p;
  call.connection = p.client.get();
  call.queue("request body", /*end=*/true);
  ASSERT_GT(p.client->submit_request(&call, request_headers()), 0);
  ASSERT_TRUE(p.run_until([&] {
    return !p.server_observer.opened.empty() && p.server_observer.opened[0]->remote_ended;
  }));
  Recorder& served = *p.server_observer.opened[0];
  EXPECT_EQ(served.header(":path"), "/pkg.Svc/Method");
  EXPECT_EQ(served.header("x-custom"), "value");
  EXPECT_EQ(served.data, "request body");

  served.queue("response body", /*end=*/true);
  served.add_trailer("grpc-status", "0");
  const HeaderField response[] = {HeaderField::literal(":status", "200")};
  ASSERT_TRUE(p.server->submit_response(&served, response, /*with_data=*/true));
  ASSERT_TRUE(p.run_until([&] { return call.closed; }));
  EXPECT_EQ(call.header(":status"), "200");
  EXPECT_EQ(call.header("grpc-status"), "0");
  EXPECT_EQ(call.header_blocks, 2);  // headers, then trailers
  EXPECT_EQ(call.data, "response body");
  EXPECT_EQ(call.error, ErrorCode::kNoError);
}

// A response larger than the pipe holds: the first write is partial, the rest goes out
// asynchronously as the client reads, and every byte arrives in order.
TEST(Http2Connection, WriteLargerThanThePipeCompletesAsynchronously) {
  Recorder call;
  Pair p(/*capacity=*/4096);
  call.connection = p.client.get();
  call.queue("", /*end=*/true);
  ASSERT_GT(p.client->submit_request(&call, request_headers()), 0);
  ASSERT_TRUE(p.run_until([&] { return !p.server_observer.opened.empty(); }));
  Recorder& served = *p.server_observer.opened[0];
  std::string big(300 * 1024, '\0');
  for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7);
  served.queue(big, /*end=*/true);
  served.add_trailer("grpc-status", "0");
  const HeaderField response[] = {HeaderField::literal(":status", "200")};
  ASSERT_TRUE(p.server->submit_response(&served, response, /*with_data=*/true));
  ASSERT_TRUE(p.run_until([&] { return call.closed; }));
  EXPECT_EQ(call.data.size(), big.size());
  EXPECT_TRUE(call.data == big);
}

TEST(Http2Connection, ResetReachesThePeerWithItsCode) {
  Recorder call;  // outlives the connections, which report to it until they close
  Pair p;
  call.connection = p.client.get();
  ASSERT_GT(p.client->submit_request(&call, request_headers()), 0);
  ASSERT_TRUE(p.run_until([&] { return !p.server_observer.opened.empty(); }));
  p.client->reset(&call, ErrorCode::kCancel);
  ASSERT_TRUE(p.run_until([&] { return p.server_observer.opened[0]->closed; }));
  EXPECT_EQ(p.server_observer.opened[0]->error, ErrorCode::kCancel);
  EXPECT_TRUE(call.closed);
}

TEST(Http2Connection, RefusedStreamIsResetWithRefusedStream) {
  Pair p;
  p.server_observer.refuse = true;
  Recorder call;
  ASSERT_GT(p.client->submit_request(&call, request_headers()), 0);
  ASSERT_TRUE(p.run_until([&] { return call.closed; }));
  EXPECT_EQ(call.error, ErrorCode::kRefusedStream);
}

TEST(Http2Connection, GoawayStopsNewStreamsAndLetsOpenOnesFinish) {
  Recorder call;  // outlives the connections, which report to it until they close
  Pair p;
  call.connection = p.client.get();
  call.queue("x", /*end=*/true);
  ASSERT_GT(p.client->submit_request(&call, request_headers()), 0);
  ASSERT_TRUE(p.run_until([&] { return !p.server_observer.opened.empty(); }));
  p.server->shutdown();
  ASSERT_TRUE(p.run_until([&] { return p.client_observer.goaway; }));
  EXPECT_EQ(p.client_observer.goaway_error, ErrorCode::kNoError);
  EXPECT_FALSE(p.client->accepts_new_streams());
  Recorder late;
  EXPECT_LT(p.client->submit_request(&late, request_headers()), 0);

  Recorder& served = *p.server_observer.opened[0];
  served.add_trailer("grpc-status", "0");
  served.queue("", /*end=*/true);
  const HeaderField response[] = {HeaderField::literal(":status", "200")};
  ASSERT_TRUE(p.server->submit_response(&served, response, /*with_data=*/true));
  p.run_until([&] { return call.closed && p.server_observer.closed; });
  EXPECT_TRUE(call.closed);
  // The server closes once its last stream is done.
  EXPECT_TRUE(p.server_observer.closed);
  EXPECT_EQ(call.error, ErrorCode::kNoError);
  EXPECT_EQ(call.header("grpc-status"), "0");
}

TEST(Http2Connection, PeerVanishingClosesOpenStreamsAsConnectionLost) {
  Recorder call;  // outlives the connections, which report to it until they close
  Pair p;
  ASSERT_GT(p.client->submit_request(&call, request_headers()), 0);
  ASSERT_TRUE(p.run_until([&] { return !p.server_observer.opened.empty(); }));
  p.client->close();
  ASSERT_TRUE(p.run_until([&] { return p.server_observer.closed; }));
  EXPECT_TRUE(p.server_observer.opened[0]->closed);
  EXPECT_EQ(p.server_observer.opened[0]->error, ErrorCode::kConnectionLost);
  EXPECT_EQ(call.error, ErrorCode::kConnectionLost);
}

// The server sends GOAWAY and closes at once (a TCP reset, say) while the client is about to
// write: the write fails, but the client still reads the GOAWAY that had arrived, so its streams
// above the GOAWAY's last stream id end as refused (which gRPC retries transparently), not as a
// lost connection.
TEST(Http2Connection, GoawayAfterAFailedWriteStillRefusesTheStreamsAboveIt) {
  Played c(Role::kClient);
  std::unique_ptr<ByteStream> server_end = c.pipe->end(1);
  Recorder first;
  ASSERT_GT(c.connection->submit_request(&first, request_headers()), 0);
  c.io.poll();
  ASSERT_FALSE(c.pipe->take_written(0).empty());  // preface, SETTINGS and the request left

  // The server's SETTINGS completes the client's pending read; the GOAWAY (last stream 0,
  // NO_ERROR) and the close arrive before the client reads again. Answering the SETTINGS, the
  // client writes, into a closed connection.
  c.pipe->inject(0, std::string("\x00\x00\x00\x04\x00\x00\x00\x00\x00", 9));
  c.pipe->inject(0, std::string("\x00\x00\x08\x07\x00\x00\x00\x00\x00"
                                "\x00\x00\x00\x00\x00\x00\x00\x00",
                                17));
  server_end->close();
  Recorder second;
  ASSERT_GT(c.connection->submit_request(&second, request_headers()), 0);
  c.run_until_closed();
  EXPECT_TRUE(c.observer.closed);
  EXPECT_TRUE(c.observer.goaway);
  EXPECT_TRUE(first.closed);
  EXPECT_EQ(first.error, ErrorCode::kRefusedStream);
  EXPECT_TRUE(second.closed);
  EXPECT_EQ(second.error, ErrorCode::kRefusedStream);
}

// A server connection fed bytes that are not HTTP/2 after the preface answers with GOAWAY and
// closes: no crash, no stream opened.
TEST(Http2Connection, GarbageAfterThePrefaceEndsTheConnectionWithGoaway) {
  Played s(Role::kServer);
  s.pipe->inject(1, kPreface);
  s.pipe->inject(1, std::string("\x00\x00\x04\x07\x00\x00\x00\x00\x00garbagegarbage", 23));
  s.run_until_closed();
  EXPECT_TRUE(s.observer.closed);
  EXPECT_TRUE(s.observer.opened.empty());
  const std::string out = s.pipe->take_written(1);
  // The server's SETTINGS, then a GOAWAY frame (type 7).
  bool goaway = false;
  for (std::size_t at = 0; at + 9 <= out.size();) {
    const std::size_t len = (std::uint8_t(out[at]) << 16) | (std::uint8_t(out[at + 1]) << 8) |
                            std::uint8_t(out[at + 2]);
    if (out[at + 3] == 0x7) goaway = true;
    at += 9 + len;
  }
  EXPECT_TRUE(goaway);
  EXPECT_TRUE(s.pipe->closed(1));
}

}  // namespace
}  // namespace ferry::http2::http2_connection_test
