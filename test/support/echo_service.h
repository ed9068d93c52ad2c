// The Echo service of ferry.testing (test support): one method per call kind, driven by the
// knobs in echo.proto. Used by the transport tests and the loopback benchmarks.
#pragma once

#include <atomic>
#include <mutex>
#include <set>
#include <string_view>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "ferry/testing/echo.ferry.h"

namespace ferry::testing {

// The :path of each Echo method, for tests of the type-erased API (ferry::Channel::open/call).
namespace echo_methods {
inline constexpr std::string_view kEcho = Echo::kEchoPath;
inline constexpr std::string_view kCollect = Echo::kCollectPath;
inline constexpr std::string_view kExpand = Echo::kExpandPath;
inline constexpr std::string_view kChat = Echo::kChatPath;
}  // namespace echo_methods

// What the Echo handlers did, for tests that must see the server side of a call (cancellation,
// backpressure). Handlers run on the server's threads: every field may be read from any thread.
struct EchoProbe {
  std::atomic<int> started{0};            // handlers entered
  std::atomic<int> finished{0};           // handlers returned
  std::atomic<int> saw_cancellation{0};   // handlers that returned with ctx.is_cancelled()
  std::atomic<long> messages_read{0};     // request messages the streaming handlers read
  std::atomic<long> messages_written{0};  // response writes that returned OK

  // The status each handler returned, in order of return.
  std::vector<absl::Status> results() const {
    std::lock_guard lock(mutex_);
    return results_;
  }
  // The server threads the handlers ran on.
  std::set<std::thread::id> threads() const {
    std::lock_guard lock(mutex_);
    return threads_;
  }
  void record(const absl::Status& status, bool cancelled) {
    {
      std::lock_guard lock(mutex_);
      results_.push_back(status);
      threads_.insert(std::this_thread::get_id());
    }
    if (cancelled) saw_cancellation.fetch_add(1);
    finished.fetch_add(1);
  }

 private:
  mutable std::mutex mutex_;
  std::vector<absl::Status> results_;
  std::set<std::thread::id> threads_;
};

// The ferry.testing.Echo service (echo.proto), on its generated base:
//   Echo    (unary)             one response: payload echoed or response_size bytes; echoes
//                               "initial-*" client metadata in the response headers and
//                               "trailing-*" in the trailers; status_code/delay_ms honoured.
//   Collect (client streaming)  counts the requests and their payload bytes; after reading a
//                               request with delay_ms it waits that long before reading on (a
//                               slow reader); a request with status_code ends the call with it.
//   Expand  (server streaming)  response_count responses of response_size bytes, delay_ms apart.
//   Chat    (bidi)              answers each request at once, like Echo.
// When probe is non-null (it must outlive the service's calls) every handler reports to it.
class EchoService final : public testing::Echo::Service {
 public:
  explicit EchoService(EchoProbe* probe = nullptr) : probe_(probe) {}

  asio::awaitable<absl::Status> Echo(ServerContext& ctx, const EchoRequest& request,
                                     EchoResponse& response) override;
  asio::awaitable<absl::Status> Collect(ServerContext& ctx, ServerReader<EchoRequest>& reader,
                                        EchoResponse& response) override;
  asio::awaitable<absl::Status> Expand(ServerContext& ctx, const EchoRequest& request,
                                       ServerWriter<EchoResponse>& writer) override;
  asio::awaitable<absl::Status> Chat(
      ServerContext& ctx, ServerReaderWriter<EchoRequest, EchoResponse>& stream) override;

 private:
  EchoProbe* probe_;
};

}  // namespace ferry::testing
