// Implementation of test/faults/fault_service.h.
#include "faults/fault_service.h"

#include <dirent.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "asio/steady_timer.hpp"
#include "asio/this_coro.hpp"
#include "asio/use_awaitable.hpp"
#include "ferry/buffer_pool.h"
#include "ferry/server_context.h"

namespace ferry::testing {

void CallLedger::record(const std::string& id, const std::string& peer) {
  std::lock_guard lock(mutex_);
  ++counts_[id];
  peers_.insert(peer);
}

int CallLedger::count(const std::string& id) const {
  std::lock_guard lock(mutex_);
  auto it = counts_.find(id);
  return it == counts_.end() ? 0 : it->second;
}

std::map<std::string, int> CallLedger::counts() const {
  std::lock_guard lock(mutex_);
  return counts_;
}

std::set<std::string> CallLedger::peers() const {
  std::lock_guard lock(mutex_);
  return peers_;
}

asio::awaitable<absl::Status> FaultService::Echo(ServerContext& ctx, const EchoRequest& request,
                                                 EchoResponse& response) {
  ledger_->started.fetch_add(1);
  ledger_->record(request.payload(), ctx.peer());
  if (log_fd_ >= 0) {
    std::string line = request.payload() + "\n";
    (void)!::write(log_fd_, line.data(), line.size());
  }
  asio::steady_timer timer(co_await asio::this_coro::executor);
  const auto until =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(request.delay_ms());
  while (!ctx.is_cancelled() && std::chrono::steady_clock::now() < until) {
    timer.expires_after(std::chrono::milliseconds(2));
    co_await timer.async_wait(asio::use_awaitable);
  }
  absl::Status status = absl::OkStatus();
  if (ctx.is_cancelled()) {
    status = absl::CancelledError("cancelled");
  } else if (request.response_size() > 0) {
    response.mutable_payload()->assign(static_cast<std::size_t>(request.response_size()), 'r');
  } else {
    response.set_payload(request.payload());
  }
  ledger_->finished.fetch_add(1);
  co_return status;
}

namespace {

// The fields of ServerStats by their names in to_string().
constexpr std::pair<const char*, long ServerStats::*> kStatsFields[] = {
    {"handlers_started", &ServerStats::handlers_started},
    {"handlers_finished", &ServerStats::handlers_finished},
    {"fds", &ServerStats::fds},
    {"rss", &ServerStats::rss_bytes},
    {"pool_in_use", &ServerStats::pool_in_use_bytes},
    {"pool_idle", &ServerStats::pool_idle_bytes},
    {"heap_in_use", &ServerStats::heap_in_use_bytes},
    {"heap_free", &ServerStats::heap_free_bytes},
};

long open_descriptors() {
  DIR* dir = ::opendir("/proc/self/fd");
  if (dir == nullptr) return -1;
  long n = 0;
  while (const dirent* e = ::readdir(dir)) {
    if (e->d_name[0] != '.') ++n;
  }
  ::closedir(dir);
  return n - 1;  // the directory's own descriptor
}

long resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return -1;
  unsigned long size = 0, resident = 0;
  const bool read = std::fscanf(f, "%lu %lu", &size, &resident) == 2;
  std::fclose(f);
  return read ? static_cast<long>(resident) * ::sysconf(_SC_PAGESIZE) : -1;
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const ServerStats& s) {
  auto mib = [](long bytes) { return static_cast<double>(bytes) / (1 << 20); };
  char line[320];
  std::snprintf(line, sizeof line,
                "%ld handlers running (%ld started), %ld fds, RSS %.1f MiB (buffer pool: %.1f in "
                "use, %.1f idle; malloc: %.1f in use, %.1f free)",
                s.handlers_running(), s.handlers_started, s.fds, mib(s.rss_bytes),
                mib(s.pool_in_use_bytes), mib(s.pool_idle_bytes), mib(s.heap_in_use_bytes),
                mib(s.heap_free_bytes));
  return os << line;
}

std::string ServerStats::to_string() const {
  std::string out;
  for (const auto& [name, field] : kStatsFields) {
    absl::StrAppend(&out, out.empty() ? "" : " ", name, "=", this->*field);
  }
  return out;
}

std::optional<ServerStats> ServerStats::parse(std::string_view text) {
  ServerStats stats;
  std::size_t found = 0;
  while (!text.empty()) {
    const std::size_t end = std::min(text.find(' '), text.size());
    const std::string_view pair = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    const std::size_t eq = pair.find('=');
    if (eq == std::string_view::npos) return std::nullopt;
    const std::string_view value = pair.substr(eq + 1);
    for (const auto& [name, field] : kStatsFields) {
      if (pair.substr(0, eq) != name) continue;
      const auto [rest, ec] =
          std::from_chars(value.data(), value.data() + value.size(), stats.*field);
      if (ec != std::errc() || rest != value.data() + value.size()) return std::nullopt;
      ++found;
    }
  }
  if (found != std::size(kStatsFields)) return std::nullopt;
  return stats;
}

ServerStats ServerStats::measure(const CallLedger& ledger, const EchoProbe& probe) {
  ServerStats stats;
  stats.handlers_started = ledger.started.load() + probe.started.load();
  stats.handlers_finished = ledger.finished.load() + probe.finished.load();
  stats.fds = open_descriptors();
  stats.rss_bytes = resident_bytes();
  const BufferPoolStats pool = BufferPool::instance().stats();
  stats.pool_in_use_bytes = pool.blocks_in_use * static_cast<long>(BufferPool::kBlockSize);
  stats.pool_idle_bytes = static_cast<long>(pool.blocks_idle() * BufferPool::kBlockSize);
  const struct mallinfo2 heap = ::mallinfo2();
  stats.heap_in_use_bytes = static_cast<long>(heap.uordblks + heap.hblkhd);
  stats.heap_free_bytes = static_cast<long>(heap.fordblks);
  return stats;
}

StatsService::StatsService(const CallLedger* ledger, const EchoProbe* probe)
    : Service("ferry.testing.FaultStats") {
  add_unary<EchoRequest, EchoResponse>(
      "Get",
      [ledger, probe](ServerContext&, const EchoRequest&,
                      EchoResponse& response) -> asio::awaitable<absl::Status> {
        response.set_payload(ServerStats::measure(*ledger, *probe).to_string());
        co_return absl::OkStatus();
      });
}

}  // namespace ferry::testing
