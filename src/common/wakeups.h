// Wake-ups held back while a connection parses what it read (common, below every layer).
//
// The HTTP/2 session reports a read through callbacks; a coroutine woken from one of them cannot
// resume
// there, so its wake-up used to be posted: one more operation and one more turn of the event
// loop before, say, a client that got its response could send its next request. While a
// connection parses, the wake-ups raised on its thread are collected here instead, and the
// connection runs them itself, inline, once the parse has returned and before it flushes: what the
// woken coroutines write leaves in the same flush.
#pragma once

#include <cstddef>
#include <utility>
#include <vector>

namespace ferry::detail {

// A suspended coroutine's wake-up, owned by whatever it waits on.
class Wakeup {
 public:
  // Resumes the coroutine now (it must belong to the calling thread's executor), or posts its
  // resumption when it does not.
  virtual void run() = 0;

 protected:
  ~Wakeup() = default;
};

// What the owner of a queue does between the calls its wake-ups run: a connection writes the
// answers built so far once they are large (WritePolicy::bytes_per_write).
struct BetweenCalls {
  void (*fn)(void* arg) = nullptr;
  void* arg = nullptr;
};

// Whoever is woken must stay alive until the queue runs: a waiting coroutine holds a reference
// to what it waits on, so that holds for every Wakeup in ferry.
class WakeupQueue {
 public:
  // The queue that collects this thread's wake-ups now; null when they are to be posted.
  static WakeupQueue*& current() {
    thread_local WakeupQueue* queue = nullptr;
    return queue;
  }

  void push(Wakeup* w) { pending_.push_back(w); }
  bool empty() const { return pending_.empty(); }

  // Runs the wake-ups collected so far, in order. Those raised meanwhile (a resumed coroutine
  // wakes another) are posted as usual, since current() is no longer this queue. `between`
  // runs after each wake-up but the last, and whenever one of them calls between_calls().
  void run_all(BetweenCalls between = {}) {
    running_.swap(pending_);
    const BetweenCalls saved = std::exchange(between_now(), between);
    for (std::size_t i = 0; i < running_.size(); ++i) {
      running_[i]->run();
      if (i + 1 < running_.size()) between_calls();
    }
    between_now() = saved;
    running_.clear();  // keeps its capacity: no allocation per read once warm
  }

  // Called by code that runs several calls in one wake-up (the server's handler runner), after
  // each: the calls count as if each had been woken alone. Outside run_all it does nothing.
  static void between_calls() {
    const BetweenCalls& b = between_now();
    if (b.fn != nullptr) b.fn(b.arg);
  }

 private:
  static BetweenCalls& between_now() {
    thread_local BetweenCalls between;
    return between;
  }

  std::vector<Wakeup*> pending_;
  std::vector<Wakeup*> running_;
};

// Points current() at a queue for a scope (the parse of one read), restoring what was there.
class CollectWakeups {
 public:
  explicit CollectWakeups(WakeupQueue& q) : saved_(std::exchange(WakeupQueue::current(), &q)) {}
  ~CollectWakeups() { WakeupQueue::current() = saved_; }
  CollectWakeups(const CollectWakeups&) = delete;
  CollectWakeups& operator=(const CollectWakeups&) = delete;

 private:
  WakeupQueue* saved_;
};

}  // namespace ferry::detail
