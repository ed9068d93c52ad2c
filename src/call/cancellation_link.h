// A server call's cancellation, shared with the client calls a handler makes on its behalf
// (calls layer, private): ClientContext::from_server_context links them, and when the server
// call is aborted (client cancel, deadline, lost connection, shutdown) every linked client call
// is cancelled too. Thread-safe: the server call and the client calls may live on different
// threads.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace ferry::detail {

class CancellationLink {
 public:
  using Callback = std::function<void(const absl::Status&)>;

  // Runs every registered callback once, with why (the first cancel wins; later ones do
  // nothing). Callbacks run on the calling thread, under the link's lock: they must only hand
  // the work to their own executor (post), never call back into the link.
  void cancel(const absl::Status& why) {
    std::lock_guard lock(mutex_);
    if (!why_.ok()) return;
    why_ = why.ok() ? absl::CancelledError("the parent call was cancelled") : why;
    for (auto& [id, fn] : callbacks_) fn(why_);
    callbacks_.clear();
  }

  // Registers fn, run once by cancel(); at once (here, under the lock) when cancel() has run.
  // Returns an id for remove(); 0 when fn ran already.
  std::uint64_t add(Callback fn) {
    std::lock_guard lock(mutex_);
    if (!why_.ok()) {
      fn(why_);
      return 0;
    }
    callbacks_.emplace_back(++next_id_, std::move(fn));
    return next_id_;
  }

  // Unregisters; once it returns, the callback is not running and will not run. id 0: nothing.
  void remove(std::uint64_t id) {
    if (id == 0) return;
    std::lock_guard lock(mutex_);
    for (auto it = callbacks_.begin(); it != callbacks_.end(); ++it) {
      if (it->first == id) {
        callbacks_.erase(it);
        return;
      }
    }
  }

 private:
  std::mutex mutex_;
  absl::Status why_;  // OK until cancelled
  std::uint64_t next_id_ = 0;
  std::vector<std::pair<std::uint64_t, Callback>> callbacks_;
};

}  // namespace ferry::detail
