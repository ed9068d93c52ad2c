// http1_connection_fuzzer: the bytes of a whole HTTP/1.1 client connection fed to a server
// http1::Connection (src/http1, llhttp beneath) over the in-memory transport, in
// chunks whose sizes the input chooses. Its streams behave as calls do: they take the body and
// give it back to flow control, answer at the body's end (now with a length, now chunked, now
// before the body ended), and reject a header now and then. So request lines, headers, chunked
// and pipelined bodies, keep-alive, 100-continue and the response path all run on hostile input.
//
// Checks, beyond the sanitizers: a stream hears nothing after it is closed, every stream opened
// is closed once the connection is, and nothing is reported after that.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "asio/executor_work_guard.hpp"
#include "asio/io_context.hpp"
#include "fuzz_check.h"
#include "http1/connection.h"
#include "transport/memory_stream.h"

namespace ferry::http2 {
namespace {

class FuzzExchange : public Stream {
 public:
  FuzzExchange(StreamCarrier* carrier, int kind) : carrier_(carrier), kind_(kind) {}

  bool on_header(std::string_view name, std::string_view value) override {
    FUZZ_CHECK(!closed);
    return !(name == "x-reject" && value == "1");  // as a bad header would be
  }
  void on_headers_done() override {
    FUZZ_CHECK(!closed);
    if (kind_ == 0) answer(/*with_data=*/false);  // at once, before any body
  }
  void on_data(Slice chunk) override {
    FUZZ_CHECK(!closed);
    received_ += chunk.size();
    carrier_->consume(this, chunk.size());
  }
  void on_remote_end() override {
    FUZZ_CHECK(!closed);
    if (!answered_) answer(/*with_data=*/true);
  }
  void on_outbound_taken() override { FUZZ_CHECK(!closed); }
  void on_closed(ErrorCode) override {
    FUZZ_CHECK(!closed);
    closed = true;
  }

  bool closed = false;

 private:
  void answer(bool with_data) {
    answered_ = true;
    static constexpr HeaderField kResponse[] = {
        HeaderField::literal(":status", "200"),
        HeaderField::literal("content-type", "application/json")};
    const std::string body(std::min<std::size_t>(received_ + 3, 70000), 'r');
    outbound.append_copy(body.data(), body.size());
    // kind 1: the end queued before the headers (a length); kind 2: after them (chunked).
    if (kind_ != 2) outbound_end = true;
    carrier_->submit_response(this, kResponse, with_data);
    if (kind_ == 2) {
      outbound_end = true;
      carrier_->resume(this);
    }
  }

  StreamCarrier* carrier_;
  int kind_;
  std::size_t received_ = 0;
  bool answered_ = false;
};

class Observer : public ConnectionObserver {
 public:
  std::vector<std::unique_ptr<FuzzExchange>> exchanges;
  StreamCarrier* carrier = nullptr;
  bool closed = false;

  Stream* on_stream_open(std::int32_t id) override {
    FUZZ_CHECK(!closed);
    if (exchanges.size() >= 256) return nullptr;
    exchanges.push_back(std::make_unique<FuzzExchange>(carrier, (id / 2) % 3));
    return exchanges.back().get();
  }
  void on_goaway(std::int32_t, ErrorCode) override { FUZZ_CHECK(!closed); }
  void on_connection_closed() override {
    FUZZ_CHECK(!closed);
    closed = true;
  }
};

void run(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return;
  const std::size_t chunk = std::size_t{data[0]} + 1;  // 1..256 bytes per delivery
  ++data;
  --size;

  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  auto pipe = MemoryPipe::create(io.get_executor(), 64 * 1024);
  Observer observer;  // outlives the connection, which reports to it
  ConnectionLimits limits;
  limits.stream_window = 4096;  // small, so that reading stops and goes on often
  limits.max_header_list_size = 2048;
  limits.max_queued_send_bytes = 1 << 20;
  auto connection = std::make_shared<http1::Connection>(pipe->end(1), limits, LifecyclePolicy{},
                                                        /*tls=*/false, &observer);
  observer.carrier = connection.get();
  connection->start();

  auto turn = [&] {
    for (int i = 0; i < 1000 && io.poll_one() > 0; ++i) {
    }
    (void)pipe->take_written(1);  // the client reads everything
  };
  turn();
  for (std::size_t at = 0; at < size && !observer.closed; at += chunk) {
    const std::size_t n = std::min(chunk, size - at);
    pipe->inject(1, std::string_view(reinterpret_cast<const char*>(data + at), n));
    turn();
  }
  pipe->inject_eof(1);  // the client goes away: everything ends
  turn();
  connection->close();
  turn();
  FUZZ_CHECK(observer.closed);
  for (const auto& exchange : observer.exchanges) FUZZ_CHECK(exchange->closed);
}

}  // namespace
}  // namespace ferry::http2

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ferry::http2::run(data, size);
  return 0;
}
