// http1_client_fuzzer: the bytes of a whole HTTP/1.1 server connection, its responses, fed to a
// client's http1::ClientPool (src/http1, llhttp beneath) over the in-memory
// transport, in chunks whose sizes the input chooses. The input's second byte picks how many
// calls are made at once (1..4; all but the first wait for the connection, since more cannot be
// dialed here) and how they behave: a body complete before the head (content-length) or ended
// later (chunked), a header rejected now and then, a call cancelled after its headers. So status
// lines, headers, content-length, chunked and close-delimited bodies, 1xx responses, keep-alive
// and the pool's hand-over of its connection to the next call all run on hostile input.
//
// Checks, beyond the sanitizers: a call hears nothing after it is closed, every call is closed
// once the pool is, and nothing is reported after that.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "asio/executor_work_guard.hpp"
#include "asio/io_context.hpp"
#include "asio/post.hpp"
#include "fuzz_check.h"
#include "http1/client_pool.h"
#include "transport/memory_stream.h"

namespace ferry::http2 {
namespace {

class FuzzCall : public Stream {
 public:
  FuzzCall(ClientTransport* transport, int behaviour)
      : transport_(transport), behaviour_(behaviour) {}

  void send() {
    static constexpr HeaderField kRequest[] = {
        HeaderField::literal(":method", "POST"), HeaderField::literal(":scheme", "http"),
        HeaderField::literal(":path", "/fuzz.Service/Call"),
        HeaderField::literal(":authority", "fuzz"),
        HeaderField::literal("content-type", "application/proto")};
    outbound.append_copy("hello", 5);
    if (behaviour_ % 2 == 0) outbound_end = true;  // a content-length
    submitted = transport_->submit_request(this, kRequest) >= 0;
    if (!submitted) {
      closed = true;
      return;
    }
    if (behaviour_ % 2 == 1) {  // chunked: the end comes after the head
      outbound.append_copy(" world", 6);
      outbound_end = true;
      transport_->resume(this);
    }
  }

  bool on_header(std::string_view name, std::string_view value) override {
    FUZZ_CHECK(!closed);
    return !(name == "x-reject" && value == "1");  // as a bad header would be
  }
  void on_headers_done() override {
    FUZZ_CHECK(!closed);
    if (behaviour_ == 2) transport_->reset(this, ErrorCode::kCancel);  // cancelled
  }
  void on_data(Slice chunk) override {
    FUZZ_CHECK(!closed);
    transport_->consume(this, chunk.size());
  }
  void on_remote_end() override { FUZZ_CHECK(!closed); }
  void on_outbound_taken() override { FUZZ_CHECK(!closed); }
  void on_closed(ErrorCode) override {
    FUZZ_CHECK(!closed);
    closed = true;
  }

  bool submitted = false;
  bool closed = false;

 private:
  ClientTransport* transport_;
  int behaviour_;
};

class Observer : public ConnectionObserver {
 public:
  bool closed = false;
  Stream* on_stream_open(std::int32_t) override { return nullptr; }
  void on_goaway(std::int32_t, ErrorCode) override { FUZZ_CHECK(!closed); }
  void on_connection_closed() override {
    FUZZ_CHECK(!closed);
    closed = true;
  }
};

void run(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return;
  const std::size_t chunk = std::size_t{data[0]} + 1;  // 1..256 bytes per delivery
  const int calls = data[1] % 4 + 1;
  const int behaviours = data[1] / 4;
  data += 2;
  size -= 2;

  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  auto pipe = MemoryPipe::create(io.get_executor(), 64 * 1024);
  Observer observer;  // outlives the pool, which reports to it
  ConnectionLimits limits;
  limits.stream_window = 4096;  // small, so that reading stops and goes on often
  limits.max_header_list_size = 2048;
  // No second connection here: a dial fails, and the waiting calls wait for the first.
  auto dial = [&io](std::function<void(http1::ClientPool::Dialed)> done) {
    asio::post(io, [done = std::move(done)] { done(absl::UnavailableError("fuzz: no dial")); });
  };
  auto pool = std::make_shared<http1::ClientPool>(pipe->end(1), dial, limits, &observer);
  pool->start();
  std::vector<std::unique_ptr<FuzzCall>> made;
  for (int i = 0; i < calls; ++i) {
    made.push_back(std::make_unique<FuzzCall>(pool.get(), (behaviours >> (2 * i)) % 3));
    made.back()->send();
  }

  auto turn = [&] {
    for (int i = 0; i < 1000 && io.poll_one() > 0; ++i) {
    }
    (void)pipe->take_written(1);  // the server reads everything
  };
  turn();
  for (std::size_t at = 0; at < size && !observer.closed; at += chunk) {
    const std::size_t n = std::min(chunk, size - at);
    pipe->inject(1, std::string_view(reinterpret_cast<const char*>(data + at), n));
    turn();
  }
  pipe->inject_eof(1);  // the server goes away
  turn();
  pool->close();
  turn();
  FUZZ_CHECK(observer.closed);
  for (const auto& call : made) FUZZ_CHECK(call->closed);
}

}  // namespace
}  // namespace ferry::http2

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  ferry::http2::run(data, size);
  return 0;
}
