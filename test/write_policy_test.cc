// WritePolicy (ferry/write_policy.h) on an http2::Connection driven in memory: a read holding
// many calls is answered in parts of calls_per_write, each part written before the rest of the
// read is parsed; every answer arrives whole on its own stream, also when the reader is slow and
// the parts' writes complete asynchronously; calls_per_write = 0 keeps one write per read. Large
// answers built by coroutines the read woke leave once bytes_per_write of them are queued, before
// the next is built. Then the same over TCP through ferry's server and channel: many calls in
// flight, each echoed intact, and large ones too.
#include "ferry/write_policy.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "asio/co_spawn.hpp"
#include "asio/detached.hpp"
#include "asio/executor_work_guard.hpp"
#include "asio/io_context.hpp"
#include "common/wakeups.h"
#include "http2/connection.h"
#include "support/loopback.h"
#include "transport/memory_stream.h"

namespace ferry::http2::write_policy_test {
namespace {

// How a server stream answers once its request has ended.
enum class Answering {
  kInParse,    // at once, inside the parse (as a handler that does not suspend would, earlier)
  kEachWoken,  // from a wake-up of its own, run after the parse (a coroutine the read woke)
  kOneRunner,  // all from one wake-up, one after the other (the server's handler runner)
};

class Call;

// One wake-up answering every call queued on it, calling between_calls() after each, as the
// server's handler runner does.
class Runner final : public detail::Wakeup {
 public:
  void add(Call* call) {
    if (calls_.empty()) detail::WakeupQueue::current()->push(this);
    calls_.push_back(call);
  }
  void run() override;

 private:
  std::vector<Call*> calls_;
};

// One side of a call: records what arrives; a server stream answers once its request has ended.
class Call : public Stream, public detail::Wakeup {
 public:
  Connection* connection = nullptr;
  bool serving = false;
  Answering answering = Answering::kInParse;
  Runner* runner = nullptr;  // kOneRunner
  bool answered = false;
  std::string answer;  // what a serving stream sends back
  std::string data;
  bool remote_ended = false;
  bool closed = false;
  ErrorCode error = ErrorCode::kNoError;

  bool on_header(std::string_view, std::string_view) override { return true; }
  void on_headers_done() override {}
  void on_data(Slice chunk) override {
    data.append(chunk.view());
    connection->consume(this, chunk.size());
  }
  void on_remote_end() override {
    remote_ended = true;
    if (!serving) return;
    switch (answering) {
      case Answering::kInParse:
        answer_now();
        break;
      case Answering::kEachWoken:
        detail::WakeupQueue::current()->push(this);
        break;
      case Answering::kOneRunner:
        runner->add(this);
        break;
    }
  }
  void run() override { answer_now(); }
  void answer_now() {
    answered = true;
    outbound.append_copy(answer.data(), answer.size());
    outbound_end = true;
    trailers.owned.push_back({"grpc-status", "0"});
    const HeaderField status[] = {HeaderField::literal(":status", "200")};
    connection->submit_response(this, status, /*with_data=*/true);
  }
  void on_outbound_taken() override {}
  void on_closed(ErrorCode e) override {
    closed = true;
    error = e;
  }
  // A client call's whole request body.
  void queue(std::string_view body) {
    outbound.append_copy(body.data(), body.size());
    outbound_end = true;
  }
};

void Runner::run() {
  for (Call* c : std::exchange(calls_, {})) {
    c->answer_now();
    detail::WakeupQueue::between_calls();
  }
}

// The server's byte stream, watched: at every write, how many requests had ended by then, and
// how many had been answered.
class WatchedStream final : public ByteStream {
 public:
  WatchedStream(std::unique_ptr<ByteStream> inner, std::vector<int>* ended_at_write,
                std::vector<int>* answered_at_write,
                const std::vector<std::unique_ptr<Call>>* served)
      : inner_(std::move(inner)),
        ended_at_write_(ended_at_write),
        answered_at_write_(answered_at_write),
        served_(served) {}
  const asio::any_io_executor& executor() const override { return inner_->executor(); }
  void async_read_some(asio::mutable_buffer into,
                       std::shared_ptr<ByteStreamClient> client) override {
    inner_->async_read_some(into, std::move(client));
  }
  std::size_t write_some_now(std::span<const iovec> slices, asio::error_code& ec) override {
    note();
    return inner_->write_some_now(slices, ec);
  }
  void async_write(std::span<const asio::const_buffer> buffers,
                   std::shared_ptr<ByteStreamClient> client) override {
    inner_->async_write(buffers, std::move(client));
  }
  void close() override { inner_->close(); }
  std::string peer_address() const override { return inner_->peer_address(); }

 private:
  void note() {
    int ended = 0;
    int answered = 0;
    for (const auto& c : *served_) {
      ended += c->remote_ended ? 1 : 0;
      answered += c->answered ? 1 : 0;
    }
    ended_at_write_->push_back(ended);
    answered_at_write_->push_back(answered);
  }
  std::unique_ptr<ByteStream> inner_;
  std::vector<int>* ended_at_write_;
  std::vector<int>* answered_at_write_;
  const std::vector<std::unique_ptr<Call>>* served_;
};

class Server : public ConnectionObserver {
 public:
  std::vector<std::unique_ptr<Call>> served;
  Connection* connection = nullptr;
  std::size_t answer_size = 16;
  Answering answering = Answering::kInParse;
  Runner runner;

  Stream* on_stream_open(std::int32_t id) override {
    served.push_back(std::make_unique<Call>());
    Call& c = *served.back();
    c.connection = connection;
    c.serving = true;
    c.answering = answering;
    c.runner = &runner;
    // Each answer names its stream, so a mix-up between streams shows.
    c.answer = "answer " + std::to_string(id) + " ";
    c.answer.resize(std::max(c.answer.size(), answer_size), static_cast<char>('a' + id % 26));
    return &c;
  }
  void on_goaway(std::int32_t, ErrorCode) override {}
  void on_connection_closed() override {}
};

class Client : public ConnectionObserver {
 public:
  Stream* on_stream_open(std::int32_t) override { return nullptr; }
  void on_goaway(std::int32_t, ErrorCode) override {}
  void on_connection_closed() override {}
};

struct Ends {
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  std::shared_ptr<MemoryPipe> pipe;
  Client client_observer;
  Server server_observer;
  std::vector<int> ended_at_write;     // the server's writes
  std::vector<int> answered_at_write;  // the same
  std::shared_ptr<Connection> client;
  std::shared_ptr<Connection> server;
  std::vector<std::unique_ptr<Call>> calls;

  Ends(std::uint32_t calls_per_write, std::size_t capacity, std::size_t answer_size,
       Answering answering = Answering::kInParse,
       std::size_t bytes_per_write = WritePolicy{}.bytes_per_write) {
    pipe = MemoryPipe::create(io.get_executor(), capacity);
    ConnectionLimits limits;
    limits.write_policy.calls_per_write = calls_per_write;
    limits.write_policy.bytes_per_write = bytes_per_write;
    client = std::make_shared<Connection>(pipe->end(0), Role::kClient, limits, &client_observer);
    server = std::make_shared<Connection>(
        std::make_unique<WatchedStream>(pipe->end(1), &ended_at_write, &answered_at_write,
                                        &server_observer.served),
        Role::kServer, limits, &server_observer);
    server_observer.connection = server.get();
    server_observer.answer_size = answer_size;
    server_observer.answering = answering;
    client->start();
    server->start();
    io.poll();  // prefaces and SETTINGS
    ended_at_write.clear();
    answered_at_write.clear();
  }
  ~Ends() {
    client->close();
    server->close();
    io.poll();
  }

  // Opens n calls at once: the client's flush writes all their requests together, so that the
  // server reads them in one read (the pipe holds them all).
  void send_requests(int n) {
    const HeaderField headers[] = {HeaderField::literal(":method", "POST"),
                                   HeaderField::literal(":scheme", "http"),
                                   HeaderField::literal(":path", "/pkg.Svc/Method"),
                                   HeaderField::literal(":authority", "memory"),
                                   HeaderField::literal("content-type", "application/grpc")};
    for (int i = 0; i < n; ++i) {
      calls.push_back(std::make_unique<Call>());
      Call& c = *calls.back();
      c.connection = client.get();
      c.queue("request " + std::to_string(i));
      ASSERT_GT(client->submit_request(&c, headers), 0);
    }
  }

  bool run_until_all_closed() {
    for (int i = 0; i < 100000; ++i) {
      bool done = true;
      for (const auto& c : calls) done = done && c->closed;
      if (done) return true;
      if (io.poll_one() == 0) return false;
    }
    return false;
  }

  // Every call got the answer of its own stream, whole, and ended cleanly.
  void expect_all_answered() {
    ASSERT_EQ(server_observer.served.size(), calls.size());
    for (std::size_t i = 0; i < calls.size(); ++i) {
      const Call& served = *server_observer.served[i];
      EXPECT_EQ(served.data, "request " + std::to_string(i));
      EXPECT_TRUE(calls[i]->closed);
      EXPECT_EQ(calls[i]->error, ErrorCode::kNoError);
      EXPECT_EQ(calls[i]->data, served.answer) << "call " << i;
    }
  }
};

TEST(WritePolicy, ReadOfManyCallsIsAnsweredInParts) {
  Ends s(/*calls_per_write=*/24, /*capacity=*/1 << 20, /*answer_size=*/16);
  s.send_requests(64);
  ASSERT_TRUE(s.run_until_all_closed());
  s.expect_all_answered();
  // One read held all 64 requests; its answers left in parts of 24, each written when its 24th
  // request was parsed and before the next request ended: 24, 48, then the last 16.
  ASSERT_EQ(s.ended_at_write.size(), 3u) << ::testing::PrintToString(s.ended_at_write);
  EXPECT_EQ(s.ended_at_write[0], 24);
  EXPECT_EQ(s.ended_at_write[1], 48);
  EXPECT_EQ(s.ended_at_write[2], 64);
}

TEST(WritePolicy, ZeroKeepsOneWritePerRead) {
  Ends s(/*calls_per_write=*/0, /*capacity=*/1 << 20, /*answer_size=*/16);
  s.send_requests(64);
  ASSERT_TRUE(s.run_until_all_closed());
  s.expect_all_answered();
  ASSERT_EQ(s.ended_at_write.size(), 1u) << ::testing::PrintToString(s.ended_at_write);
  EXPECT_EQ(s.ended_at_write[0], 64);
}

TEST(WritePolicy, FewCallsInOneReadAreOneWrite) {
  Ends s(/*calls_per_write=*/24, /*capacity=*/1 << 20, /*answer_size=*/16);
  s.send_requests(24);  // a part exactly full: nothing of the read is left, so no early write
  ASSERT_TRUE(s.run_until_all_closed());
  s.expect_all_answered();
  ASSERT_EQ(s.ended_at_write.size(), 1u) << ::testing::PrintToString(s.ended_at_write);
  EXPECT_EQ(s.ended_at_write[0], 24);
}

// A slow reader: the pipe holds 2 KiB, far less than one part's answers (24 x 3 KiB), so the
// first part's write goes on asynchronously while the server parses on and the later parts queue
// behind it; every answer still arrives whole on its own stream.
TEST(WritePolicy, PartsQueueBehindAWriteTheReaderHoldsUp) {
  // The pipe holds 16 KiB: the requests (~3 KiB) pass whole, the answers (64 x 3000 B) do not.
  Ends s(/*calls_per_write=*/8, /*capacity=*/16 << 10, /*answer_size=*/3000);
  s.send_requests(64);
  ASSERT_TRUE(s.run_until_all_closed());
  s.expect_all_answered();
  // The first parts went out at once; the pipe was full before the read was parsed, so the
  // later parts queued behind the asynchronous rest instead of being written one by one.
  ASSERT_GE(s.ended_at_write.size(), 2u) << ::testing::PrintToString(s.ended_at_write);
  EXPECT_EQ(s.ended_at_write[0], 8);
  EXPECT_LT(s.ended_at_write.size(), 8u) << ::testing::PrintToString(s.ended_at_write);
}

// n calls whose answers (answer_size bytes each) are built as `answering` says, all ending in
// one read (the pipe holds every request): how many had been answered at each of the server's
// writes. Every answer must arrive whole on its own stream.
std::vector<int> answered_at_writes(Answering answering, int n, std::size_t answer_size,
                                    std::size_t bytes_per_write) {
  Ends s(/*calls_per_write=*/32, /*capacity=*/8 << 20, answer_size, answering, bytes_per_write);
  s.send_requests(n);
  EXPECT_TRUE(s.run_until_all_closed());
  s.expect_all_answered();
  for (int ended : s.ended_at_write) EXPECT_EQ(ended, n);
  return s.answered_at_write;
}

// Large answers built after the parse, by coroutines the read woke: once bytes_per_write of
// them are queued they are written, before the next is built, so the peer reads while this end
// builds the rest.
TEST(WritePolicy, LargeAnswersOfWokenCallsLeaveOneByOne) {
  EXPECT_EQ(answered_at_writes(Answering::kEachWoken, 8, 64 << 10, 64 << 10),
            (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST(WritePolicy, LargeAnswersOfOneRunnerLeaveOneByOne) {
  EXPECT_EQ(answered_at_writes(Answering::kOneRunner, 8, 64 << 10, 64 << 10),
            (std::vector<int>{1, 2, 3, 4, 5, 6, 7, 8}));
}

// Below bytes_per_write, the answers of one read stay one write (small calls keep their
// economy); and 0 turns the byte bound off.
TEST(WritePolicy, AnswersUnderTheByteBoundShareOneWrite) {
  for (Answering answering : {Answering::kEachWoken, Answering::kOneRunner}) {
    EXPECT_EQ(answered_at_writes(answering, 16, 1000, 64 << 10), (std::vector<int>{16}));
    EXPECT_EQ(answered_at_writes(answering, 8, 64 << 10, 0), (std::vector<int>{8}));
  }
}

}  // namespace
}  // namespace ferry::http2::write_policy_test

namespace ferry::testing::write_policy_test {
namespace {

// Through ferry's server and channel over TCP, both ends answering in parts of a few calls:
// with many calls in flight, every response is its own request's echo.
// payload_base: the smallest payload; sizes vary above it by up to 300 bytes.
void echo_many_in_flight(std::uint32_t calls_per_write, std::size_t bytes_per_write,
                         int workers = 64, std::size_t payload_base = 1) {
  ServerOptions server_options;
  server_options.write_policy.calls_per_write = calls_per_write;
  server_options.write_policy.bytes_per_write = bytes_per_write;
  ChannelOptions channel_options;
  channel_options.write_policy.calls_per_write = calls_per_write;
  channel_options.write_policy.bytes_per_write = bytes_per_write;
  Loopback lb(server_options, channel_options);
  constexpr int kCallsEach = 25;
  int mismatches = 0;
  int failures = 0;
  int done = 0;
  auto worker = [&](int w) -> asio::awaitable<void> {
    for (int i = 0; i < kCallsEach; ++i) {
      EchoRequest request;
      // Sizes vary, so that calls end at different points of a read.
      const std::size_t size = payload_base + static_cast<std::size_t>((w * 37 + i * 11) % 300);
      request.set_payload(std::string(size, static_cast<char>('a' + (w + i) % 26)) +
                          std::to_string(w * 1000 + i));
      EchoResponse response;
      ClientContext ctx;
      const absl::Status s = co_await lb.stub().Echo(ctx, request, response);
      if (!s.ok()) ++failures;
      if (response.payload() != request.payload()) ++mismatches;
    }
    ++done;
  };
  for (int w = 0; w < workers; ++w) asio::co_spawn(lb.io(), worker(w), asio::detached);
  ASSERT_TRUE(lb.wait_until([&] { return done == workers; }, std::chrono::seconds(30)));
  EXPECT_EQ(failures, 0);
  EXPECT_EQ(mismatches, 0);
}

TEST(WritePolicy, ManyInFlightOverTcpEachAnswerItsOwn) { echo_many_in_flight(4, 64 << 10); }
TEST(WritePolicy, ManyInFlightOverTcpOneCallPerPart) { echo_many_in_flight(1, 64 << 10); }
// Large calls, each end writing every 16 KiB its calls queue.
TEST(WritePolicy, LargeCallsInFlightOverTcpEachAnswerItsOwn) {
  echo_many_in_flight(32, 16 << 10, /*workers=*/8, /*payload_base=*/100 << 10);
}

}  // namespace
}  // namespace ferry::testing::write_policy_test
