// The fault suite's server side (test support): the Echo service with a ledger of the unary calls
// its handlers received, keyed by the request's payload (the client's call id), so a test can
// count, on the server, how often each call arrived and over how many connections; and a stats
// service through which a server in a child process reports what its connections left behind
// (handlers running, descriptors, resident memory). Serves in-process (the tests) and in a child
// process (fault_server).
#pragma once

#include <atomic>
#include <map>
#include <mutex>
#include <optional>
#include <ostream>
#include <set>
#include <string>
#include <string_view>

#include "ferry/service.h"
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

// What a server process holds right now, as its stats service reports it: the handlers' count,
// descriptors and memory, and where the memory is (ferry's buffer pool, malloc's heap).
struct ServerStats {
  long handlers_started = 0;   // unary and streaming handlers entered
  long handlers_finished = 0;  // returned (their coroutines finished)
  long fds = 0;                // entries of /proc/self/fd
  long rss_bytes = 0;          // resident (/proc/self/statm)
  long pool_in_use_bytes = 0;  // BufferPool blocks handed out
  long pool_idle_bytes = 0;    // BufferPool blocks cached (threads and shared list)
  long heap_in_use_bytes = 0;  // malloc: allocated (mallinfo2 uordblks + hblkhd)
  long heap_free_bytes = 0;    // malloc: free in its arenas (fordblks), resident or trimmed

  long handlers_running() const { return handlers_started - handlers_finished; }
  // One line, "key=value key=value ..." (sizes in bytes); parse() reads it back.
  std::string to_string() const;
  static std::optional<ServerStats> parse(std::string_view text);
  // This process's figures; the handlers' from ledger and probe.
  static ServerStats measure(const CallLedger& ledger, const EchoProbe& probe);
};
// For people: "3 handlers running (10 started), 42 fds, RSS 12.5 MiB (buffer pool: ...)".
std::ostream& operator<<(std::ostream& os, const ServerStats& stats);

// ferry.testing.FaultStats/Get (unary, EchoRequest to EchoResponse): the payload of the response
// is ServerStats::measure().to_string(). The ledger and the probe must outlive it.
class StatsService final : public Service {
 public:
  static constexpr std::string_view kGetPath = "/ferry.testing.FaultStats/Get";
  StatsService(const CallLedger* ledger, const EchoProbe* probe);
};

}  // namespace ferry::testing
