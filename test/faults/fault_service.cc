// Implementation of test/faults/fault_service.h.
#include "faults/fault_service.h"

#include <unistd.h>

#include <chrono>

#include "asio/steady_timer.hpp"
#include "asio/this_coro.hpp"
#include "asio/use_awaitable.hpp"
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

}  // namespace ferry::testing
