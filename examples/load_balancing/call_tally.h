// call_tally.h: the load_balancing client's count of its calls: per phase of the run (before a
// server is stopped, while it stops, after) and per server that answered, and the failures.
// Its workers record on the channel's thread while the main thread waits on the counts.
#pragma once

#include <array>
#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/status.h"

enum Phase { kBefore, kDuring, kAfter };

class CallTally {
 public:
  // A call started in phase ended with status, answered by server (when OK).
  void record(Phase phase, const absl::Status& status, const std::string& server) {
    std::lock_guard lock(mutex_);
    ++calls_[phase];
    if (status.ok()) {
      ++by_server_[server][phase];
    } else {
      failures_.push_back(status.ToString());
    }
    changed_.notify_all();
  }

  // An attempt that failed (the call was then retried, or record() reports it failed).
  void record_failed_attempt(const absl::Status& status) {
    std::lock_guard lock(mutex_);
    failed_attempts_.push_back(status.ToString());
  }

  // Blocks until done() holds (called under the lock) or limit passed; whether it holds.
  template <class Done>
  bool wait(std::chrono::seconds limit, Done done) {
    std::unique_lock lock(mutex_);
    return changed_.wait_for(lock, limit, [&] { return done(*this); });
  }

  // The workers: how many run, and whether they should stop after their current call.
  void worker_started() {
    std::lock_guard lock(mutex_);
    ++workers_;
  }
  void worker_stopped() {
    std::lock_guard lock(mutex_);
    --workers_;
    changed_.notify_all();
  }
  void stop() {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  bool stopping() const {
    std::lock_guard lock(mutex_);
    return stopping_;
  }

  void set_phase(Phase phase) {
    std::lock_guard lock(mutex_);
    phase_ = phase;
  }
  Phase phase() const {
    std::lock_guard lock(mutex_);
    return phase_;
  }

  // For done() and for the report (under the lock, or once the workers stopped).
  int calls(Phase phase) const { return calls_[phase]; }
  int workers() const { return workers_; }
  const std::map<std::string, std::array<int, 3>>& by_server() const { return by_server_; }
  const std::vector<std::string>& failures() const { return failures_; }
  const std::vector<std::string>& failed_attempts() const { return failed_attempts_; }

 private:
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  Phase phase_ = kBefore;
  bool stopping_ = false;
  int workers_ = 0;
  std::array<int, 3> calls_{};
  std::map<std::string, std::array<int, 3>> by_server_;  // OK calls, per phase
  std::vector<std::string> failures_;
  std::vector<std::string> failed_attempts_;
};
