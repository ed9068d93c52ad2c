// The fault suite's server side (test support): the Echo service with a ledger of the unary calls
// its handlers received, keyed by the request's payload (the client's call id), so a test can
// count, on the server, how often each call arrived and over how many connections. Serves
// in-process (the tests) and in a child process (fault_server, for SIGKILL).
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <set>
#include <string>

#include "support/echo_service.h"

namespace ferry::testing {

// What the handlers received; any thread.
class CallLedger {
 public:
  void record(const std::string& id, const std::string& peer);
  // How many times the call with this id reached a handler.
  int count(const std::string& id) const;
  std::map<std::string, int> counts() const;
  // The peers (client address:port, one per connection) the calls came over.
  std::set<std::string> peers() const;
  // Unary handlers entered and returned (a returned handler's coroutine is finished).
  std::atomic<int> started{0};
  std::atomic<int> finished{0};

 private:
  mutable std::mutex mutex_;
  std::map<std::string, int> counts_;
  std::set<std::string> peers_;
};

// Echo (unary) records each call in the ledger (and, when log_fd >= 0, writes its id and a
// newline there with one write(2), which a SIGKILL cannot undo), waits delay_ms unless the call
// is cancelled, and answers the payload (or response_size bytes). The streaming methods are
// EchoService's, reporting to probe.
class FaultService final : public Echo::Service {
 public:
  explicit FaultService(CallLedger* ledger, EchoProbe* probe = nullptr, int log_fd = -1)
      : ledger_(ledger), log_fd_(log_fd), streams_(probe) {}

  asio::awaitable<absl::Status> Echo(ServerContext& ctx, const EchoRequest& request,
                                     EchoResponse& response) override;
  asio::awaitable<absl::Status> Collect(ServerContext& ctx, ServerReader<EchoRequest>& reader,
                                        EchoResponse& response) override {
    return streams_.Collect(ctx, reader, response);
  }
  asio::awaitable<absl::Status> Expand(ServerContext& ctx, const EchoRequest& request,
                                       ServerWriter<EchoResponse>& writer) override {
    return streams_.Expand(ctx, request, writer);
  }
  asio::awaitable<absl::Status> Chat(
      ServerContext& ctx, ServerReaderWriter<EchoRequest, EchoResponse>& stream) override {
    return streams_.Chat(ctx, stream);
  }

 private:
  CallLedger* ledger_;
  int log_fd_;
  EchoService streams_;
};

}  // namespace ferry::testing
