// One of the server's I/O threads (server layer, private): an io_context run by one thread,
// with what the connections and calls on it share: the handler runners and the deadline queue.
// A connection and its calls stay on the thread that accepted them.
#pragma once

#include <atomic>
#include <list>
#include <memory>
#include <thread>

#include "asio/executor_work_guard.hpp"
#include "asio/io_context.hpp"
#include "call/deadline_queue.h"
#include "server/handler_runners.h"
#include "server/memory_trim_timer.h"

namespace ferry::detail {

class ServerConnection;

struct IoThread {
  asio::io_context io{1};
  asio::executor_work_guard<asio::io_context::executor_type> work{io.get_executor()};
  // The coroutines handlers run on; destroyed before io (members go in reverse order).
  HandlerRunners runners{io.get_executor()};
  // The deadlines of this thread's calls, on one timer.
  DeadlineQueue deadlines{io.get_executor()};
  // Gives the buffer pool's idle blocks, and what a burst left, back when traffic falls.
  MemoryTrimTimer memory_trim{io.get_executor()};
  std::thread thread;
  // Work this thread's handlers gave ferry::offload that the pool has not handed back yet: the
  // pool then still posts into io, which must live until it is done (Server::shutdown waits).
  std::atomic<int> offloads{0};
  // This thread's connections; touched only on this thread.
  std::list<std::unique_ptr<ServerConnection>> connections;
};

}  // namespace ferry::detail
