// server_connection_fuzzer: the bytes of a whole client connection, after the preface, fed to a
// server http2::Connection over the in-memory transport (src/transport/memory_stream.h, no
// sockets), in chunks whose sizes the input chooses. The server's streams behave as gRPC calls do:
// they take DATA and give its window back, answer the client's END_STREAM with headers, DATA and
// trailers, refuse a stream now and then, and reset one whose headers say so. So both
// directions of the connection engine run on hostile input: the frame parser, HPACK, the
// session's state machine, the closed-stream ledger, flow control, read parts and the gathered
// write path.
//
// Checks, beyond the sanitizers: the connection never reports a stream it did not open, every
// stream it opened is closed once the connection is, and nothing is reported after that.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "asio/executor_work_guard.hpp"
#include "asio/io_context.hpp"
#include "fuzz_check.h"
#include "http2/connection.h"
#include "transport/memory_stream.h"

namespace ferry::http2 {
namespace {

constexpr std::string_view kPreface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

class FuzzCall : public Stream {
 public:
  explicit FuzzCall(Connection* connection) : connection_(connection) {}

  bool on_header(std::string_view name, std::string_view value) override {
    FUZZ_CHECK(!closed);
    // A header the application rejects resets the stream (as a bad grpc-timeout would).
    return !(name == "x-reject" && value == "1");
  }
  void on_headers_done() override { FUZZ_CHECK(!closed); }
  void on_data(Slice chunk) override {
    FUZZ_CHECK(!closed);
    received_ += chunk.size();
    connection_->consume(this, chunk.size());
  }
  void on_remote_end() override {
    FUZZ_CHECK(!closed);
    if (answered_) return;
    answered_ = true;
    static constexpr HeaderField kResponse[] = {
        HeaderField::literal(":status", "200"),
        HeaderField::literal("content-type", "application/grpc")};
    // A response body as long as the request (bounded), then trailers.
    const std::string body(std::min<std::size_t>(received_ + 5, 70000), 'r');
    outbound.append_copy(body.data(), body.size());
    trailers.owned.push_back({"grpc-status", "0"});
    outbound_end = true;
    if (connection_->submit_response(this, kResponse, true)) connection_->resume(this);
  }
  void on_outbound_taken() override { FUZZ_CHECK(!closed); }
  void on_closed(ErrorCode) override {
    FUZZ_CHECK(!closed);
    closed = true;
  }

  bool closed = false;

 private:
  Connection* connection_;
  std::size_t received_ = 0;
  bool answered_ = false;
};

class Observer : public ConnectionObserver {
 public:
  std::vector<std::unique_ptr<FuzzCall>> calls;
  Connection* connection = nullptr;
  bool closed = false;

  Stream* on_stream_open(std::int32_t id) override {
    FUZZ_CHECK(!closed);
    // Every seventh stream is refused (REFUSED_STREAM), as a server at its limit would.
    if (id % 7 == 0 || calls.size() >= 256) return nullptr;
    calls.push_back(std::make_unique<FuzzCall>(connection));
    return calls.back().get();
  }
  void on_goaway(std::int32_t, ErrorCode) override { FUZZ_CHECK(!closed); }
  void on_connection_closed() override {
    FUZZ_CHECK(!closed);
    closed = true;
  }
};

void run(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return;
  // The first byte chooses the chunking: 1..256 bytes per delivery.
  const std::size_t chunk = std::size_t{data[0]} + 1;
  ++data;
  --size;

  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  auto pipe = MemoryPipe::create(io.get_executor(), 64 * 1024);
  Observer observer;  // outlives the connection, which reports to it
  ConnectionLimits limits;
  limits.max_concurrent_streams = 100;
  limits.stream_window = 65535;
  limits.connection_window = 1 << 20;
  limits.max_queued_send_bytes = 1 << 20;
  limits.write_policy.calls_per_write = 4;  // small parts, so that reads are split often
  auto connection = std::make_shared<Connection>(pipe->end(1), Role::kServer, limits, &observer);
  observer.connection = connection.get();
  connection->start();
  pipe->inject(1, kPreface);

  auto turn = [&] {
    for (int i = 0; i < 1000 && io.poll_one() > 0; ++i) {
    }
    (void)pipe->take_written(1);  // the client reads everything (its window opens again)
  };
  turn();
  for (std::size_t at = 0; at < size && !observer.closed; at += chunk) {
    const std::size_t n = std::min(chunk, size - at);
    pipe->inject(1, std::string_view(reinterpret_cast<const char*>(data + at), n));
    turn();
  }
  // The client goes away: everything ends.
  pipe->inject_eof(1);
  turn();
  connection->close();
  turn();
  FUZZ_CHECK(observer.closed);
  for (const auto& call : observer.calls) FUZZ_CHECK(call->closed);
}

}  // namespace
}  // namespace ferry::http2

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ferry::http2::run(data, size);
  return 0;
}
