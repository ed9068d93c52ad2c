// Server handlers run on a few long-lived coroutines per I/O thread (server layer, private).
//
// Spawning a coroutine per call (asio::co_spawn) costs every call an entry frame, two work
// guards, a posted completion and a turn of the loop (measured in docs/design/
// server_call_path.md). A runner instead takes calls from a queue one after the other and
// awaits each handler; a handler that completes without suspending (most unary handlers) costs
// only its own frames, which asio then recycles since they come and go in order.
//
// A handler that suspends keeps its runner: so that the calls queued behind it are not held up,
// a runner about to run a handler with more calls waiting first makes sure a second runner is on
// its way (one wake-up per batch of calls, not per call). Runners left with nothing to do wait
// for work; beyond a few idle ones they end.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "asio/any_io_executor.hpp"
#include "asio/awaitable.hpp"
#include "call/event.h"
#include "common/ref.h"
#include "ferry/service.h"

namespace ferry::detail {

class ServerCall;
class ServerInterceptorChain;

// One per I/O thread; every member is touched on that thread only. Destroy it before its
// executor's io_context: idle runners' frames go with it.
class HandlerRunners {
 public:
  explicit HandlerRunners(asio::any_io_executor executor);
  // Idle runners go with their slots (their frames' destruction is posted to the executor).
  // Runners inside a handler belong to what the handler waits on, and need nothing of this.
  ~HandlerRunners();
  HandlerRunners(const HandlerRunners&) = delete;
  HandlerRunners& operator=(const HandlerRunners&) = delete;

  // The server's interceptors, run around every handler from now on (null: none). The chain
  // must outlive the runners. Before the first submit.
  void set_interceptors(const ServerInterceptorChain* chain);

  // Runs method's handler for call, between the interceptors' hooks, holding the reference it
  // is given until the handler is done.
  void submit(Ref<ServerCall> call, const Method* method);

  // Server shutdown: idle runners end, and busy ones end once they run out of jobs, so that
  // the io_context runs out of work (an idle runner counts as work).
  void stop();

 private:
  struct Job {
    Ref<ServerCall> call;  // released once the handler is done, or with a runner's frame
    const Method* method;
  };
  // Where an idle runner waits. Owned here, not by the runner's frame: destroying the slot
  // destroys a waiting runner (its frame belongs to the handler the Event keeps).
  struct Slot {
    explicit Slot(const asio::any_io_executor& ex) : wake(ex) {}
    Event wake;
  };

  static constexpr std::size_t kMaxIdle = 4;

  asio::awaitable<void> run(Slot* slot);
  // Wakes an idle runner, or starts a new one, to take jobs.
  void call_another();

  asio::any_io_executor executor_;
  const ServerInterceptorChain* interceptors_ = nullptr;
  std::vector<Job> jobs_;
  std::size_t next_job_ = 0;
  bool another_called_ = false;  // a runner is on its way and has not started taking jobs yet
  bool stopping_ = false;
  std::vector<std::unique_ptr<Slot>> slots_;  // one per runner there is or was
  std::vector<Slot*> idle_;                   // runners waiting for jobs
  std::vector<Slot*> spare_;                  // slots of runners that ended
};

}  // namespace ferry::detail
