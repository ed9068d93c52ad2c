// A server call's cancellation, shared with the client calls a handler makes on its behalf
// (calls layer, private): ClientContext::from_server_context links them, and when the server
// call is aborted (client cancel, deadline, lost connection, shutdown) every linked client call
// is cancelled too. Thread-safe: the server call and the client calls may live on different
// threads.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace ferry::detail {

class CancellationLink {
 public:
  using Callback = std::function<void(const absl::Status&)>;

  // Runs every registered callback once, with why (the first cancel wins; later ones do
  // nothing). Callbacks run on the calling thread, one at a time and outside the link's lock
  // (user code runs there: ServerContext::on_cancel), so a callback may add, remove or cancel.
  void cancel(const absl::Status& why) {
    std::unique_lock lock(mutex_);
    if (!why_.ok()) return;
    // Set once and never changed again: callbacks read it without the lock.
    why_ = why.ok() ? absl::CancelledError("the parent call was cancelled") : why;
    runner_ = std::this_thread::get_id();
    while (!callbacks_.empty()) {
      auto [id, fn] = std::move(callbacks_.front());
      callbacks_.erase(callbacks_.begin());
      running_ = id;
      lock.unlock();
      fn(why_);
      lock.lock();
      running_ = 0;
      idle_.notify_all();
    }
  }

  // Registers fn, run once by cancel(); at once, here, when cancel() has run. Returns an id for
  // remove(); 0 when fn ran already.
  std::uint64_t add(Callback fn) {
    std::unique_lock lock(mutex_);
    if (!why_.ok()) {
      lock.unlock();
      fn(why_);
      return 0;
    }
    callbacks_.emplace_back(++next_id_, std::move(fn));
    return next_id_;
  }

  // Unregisters; once it returns, the callback is not running and will not run (from another
  // thread it waits for a run under way; from inside the callback itself it returns at once).
  // id 0: nothing.
  void remove(std::uint64_t id) {
    if (id == 0) return;
    std::unique_lock lock(mutex_);
    for (auto it = callbacks_.begin(); it != callbacks_.end(); ++it) {
      if (it->first == id) {
        callbacks_.erase(it);
        return;
      }
    }
    if (runner_ != std::this_thread::get_id()) {
      idle_.wait(lock, [&] { return running_ != id; });
    }
  }

 private:
  std::mutex mutex_;
  std::condition_variable idle_;  // a callback's run ended
  absl::Status why_;              // OK until cancelled
  std::uint64_t next_id_ = 0;
  std::uint64_t running_ = 0;  // the callback cancel() runs now, 0 when none
  std::thread::id runner_;     // the thread that cancelled
  std::vector<std::pair<std::uint64_t, Callback>> callbacks_;
};

}  // namespace ferry::detail
