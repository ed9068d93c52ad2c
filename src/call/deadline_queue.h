// The deadlines of the calls on one executor, on one timer (calls layer, private): one queue per
// server I/O thread, one per client connection.
//
// A timer per call costs every call with a deadline (most real clients send grpc-timeout) an
// asio wait operation, allocated, cancelled and completed through the loop (docs/design/
// server_call_path.md has the figures). Instead the calls' deadlines sit in a heap with one
// timer armed for the earliest; a call leaves the heap when it ends. With uniform timeouts the
// earliest deadline only moves later, so the timer is rarely re-armed.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "asio/any_io_executor.hpp"
#include "asio/steady_timer.hpp"

namespace ferry::detail {

class DeadlineQueue;

// A deadline a DeadlineQueue keeps: a base of the call it times.
class Deadline {
 public:
  bool queued() const { return index_ != kNotQueued; }

 protected:
  Deadline() = default;
  ~Deadline() = default;
  Deadline(const Deadline&) = delete;
  Deadline& operator=(const Deadline&) = delete;

 private:
  friend class DeadlineQueue;
  static constexpr std::size_t kNotQueued = SIZE_MAX;

  // The deadline has passed. Called on the queue's thread, after the entry left the queue; may
  // destroy the object.
  virtual void on_deadline() = 0;

  std::chrono::steady_clock::time_point when_;
  std::size_t index_ = kNotQueued;  // position in the queue's heap
};

// Every member is used on the executor's thread only.
class DeadlineQueue {
 public:
  using TimePoint = std::chrono::steady_clock::time_point;

  explicit DeadlineQueue(const asio::any_io_executor& executor) : timer_(executor) {}
  ~DeadlineQueue() { *alive_ = false; }
  DeadlineQueue(const DeadlineQueue&) = delete;
  DeadlineQueue& operator=(const DeadlineQueue&) = delete;

  // Queues d (not queued yet) to expire at when.
  void add(Deadline* d, TimePoint when);
  // Takes d out of the queue; nothing when it is not queued.
  void remove(Deadline* d);
  // Server shutdown: cancels the timer, so that the loop can run out of work; deadlines queued
  // from now on do not expire (the server cancels what is left).
  void stop();

  std::size_t size() const { return heap_.size(); }

 private:
  // Points the timer at the earliest deadline, if it is earlier than the one it waits for.
  void arm();
  void on_timer();
  void place(std::size_t i, Deadline* d) {
    heap_[i] = d;
    d->index_ = i;
  }
  void sift_up(std::size_t i);
  void sift_down(std::size_t i);

  std::vector<Deadline*> heap_;  // a binary min-heap on when_
  asio::steady_timer timer_;
  TimePoint armed_for_ = TimePoint::max();  // what the pending wait is for; max when none
  bool stopped_ = false;
  // False once the queue is destroyed; the timer's handler holds it. A wait that has completed
  // has its handler queued already, and destroying the timer does not cancel that: a client
  // connection owns its queue and goes with its last call, which an earlier handler of the same
  // pass of the loop may end (a lost connection failing its calls as their deadline passes).
  // One allocation per queue; copied into the handler only when the timer is re-armed.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace ferry::detail
