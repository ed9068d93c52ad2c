// The io_context and thread of a Channel that runs its own (Channel(target)) (client layer,
// private), shared with the streams opened on it, since a stream may outlive its channel. Once
// the channel's thread has ended nothing runs the loop any more: a stream's work then runs on the
// thread that asks for it, which is safe because nothing else touches the calls by then (closing
// the channel ended them all, and the thread ran what that set off).
#pragma once

#include <atomic>
#include <chrono>
#include <mutex>
#include <utility>

#include "asio/executor_work_guard.hpp"
#include "asio/io_context.hpp"
#include "asio/post.hpp"

namespace ferry::detail {

class ChannelLoop {
 public:
  asio::io_context& io() { return io_; }

  // The channel's thread: runs the loop until stop(), then what the channel's close set off
  // (the calls' deletion, posted by their last release; the socket's aborted operations, which
  // hold the connection: stopped with those still queued, the io_context destroyed them unrun
  // and leaked every call and connection), bounded in case a user's operation on this loop
  // still waits on something. Then the loop has ended.
  void run() {
    {
      auto work = asio::make_work_guard(io_);
      io_.run();
    }
    io_.restart();
    io_.run_for(std::chrono::seconds(1));
    // What was posted since, then the end, under the lock that post_or_run takes: a stream's
    // work is either posted before the end and run here, or run by its own thread after it,
    // never both at once. (Recursive: what runs here may post more.)
    std::lock_guard lock(mutex_);
    io_.restart();
    io_.poll();
    ended_.store(true, std::memory_order_release);
  }
  // From any thread: run() stops waiting for work.
  void stop() { io_.stop(); }

  // Whether run() has ended: the loop's work then runs on the thread that has it. (An operation
  // that races with the channel's destruction may still be posted to a loop about to end, and
  // wait for ever: destroy the channel after its streams' operations, or the streams first.)
  bool ended() const { return ended_.load(std::memory_order_acquire); }

  // Runs spawn() (which posts work to this loop) under the lock the loop's end takes, unless the
  // loop has ended: what it posts then runs, in the loop or in its final poll, never stranded in
  // a queue nobody runs any more. Returns whether it ran spawn().
  template <class Fn>
  bool unless_ended(Fn spawn) {
    std::lock_guard lock(mutex_);
    if (ended_.load(std::memory_order_relaxed)) return false;
    spawn();
    return true;
  }

  // Runs fn on the loop's thread (posted), or here once the loop has ended.
  template <class Fn>
  void post_or_run(Fn fn) {
    {
      std::lock_guard lock(mutex_);
      if (!ended_.load(std::memory_order_relaxed)) {
        asio::post(io_, std::move(fn));
        return;
      }
    }
    fn();
  }

 private:
  asio::io_context io_{1};
  std::recursive_mutex mutex_;
  std::atomic<bool> ended_{false};
};

}  // namespace ferry::detail
