// Implementation of src/server/handler_runners.h.
#include "server/handler_runners.h"

#include "asio/co_spawn.hpp"
#include "asio/detached.hpp"
#include "asio/post.hpp"
#include "asio/use_awaitable.hpp"
#include "common/wakeups.h"
#include "server/server_call.h"
#include "server/server_interceptors.h"

namespace ferry::detail {

// Out of line, as the destructor: a Job's reference needs ServerCall whole.
HandlerRunners::HandlerRunners(asio::any_io_executor executor) : executor_(std::move(executor)) {}

void HandlerRunners::set_interceptors(const ServerInterceptorChain* chain) {
  interceptors_ = chain;
}

HandlerRunners::~HandlerRunners() = default;

void HandlerRunners::submit(Ref<ServerCall> call, const Method* method) {
  jobs_.push_back(Job{std::move(call), method});
  if (!another_called_) call_another();
}

void HandlerRunners::stop() {
  stopping_ = true;
  while (!idle_.empty()) {
    Slot* slot = idle_.back();
    idle_.pop_back();
    slot->wake.notify();  // it finds nothing to do and ends
  }
}

void HandlerRunners::call_another() {
  another_called_ = true;
  if (!idle_.empty()) {
    Slot* slot = idle_.back();
    idle_.pop_back();
    slot->wake.notify();
    return;
  }
  Slot* slot;
  if (!spare_.empty()) {
    slot = spare_.back();
    spare_.pop_back();
  } else {
    slots_.push_back(std::make_unique<Slot>(executor_));
    slot = slots_.back().get();
  }
  asio::co_spawn(executor_, run(slot), asio::detached);
}

asio::awaitable<void> HandlerRunners::run(Slot* slot) {
  // Begin from the executor's queue: co_spawn would otherwise start this runner inside the
  // caller, possibly another runner's handler, and nest one in the other.
  co_await asio::post(executor_, asio::use_awaitable);
  while (true) {
    another_called_ = false;  // this runner is the one that was called: it takes the jobs now
    while (next_job_ < jobs_.size()) {
      Job job = std::move(jobs_[next_job_++]);
      if (next_job_ == jobs_.size()) {
        jobs_.clear();
        next_job_ = 0;
      } else if (!another_called_) {
        call_another();  // takes the rest should this handler suspend
      }
      ServerContext& ctx = job.call->context();
      absl::Status status;
      if (interceptors_ == nullptr) {
        try {
          status = co_await job.method->handler(ctx);
        } catch (...) {
          status = ServerInterceptorChain::thrown_status("handler");
        }
      } else {
        // The interceptors' hooks run here, in the runner's frame: the chain has no coroutine.
        ServerInterceptorChain::Pass pass = interceptors_->begin(ctx, job.method->kind);
        while (ServerInterceptor* next = interceptors_->start_next(ctx, pass)) {
          try {
            pass.status = co_await next->on_start(ctx, pass.info);
          } catch (...) {
            pass.status = ServerInterceptorChain::thrown_status("interceptor on_start");
          }
        }
        status = pass.status;  // a rejection is the call's status: the handler does not run
        if (status.ok()) {
          try {
            status = co_await job.method->handler(ctx);
          } catch (...) {
            status = ServerInterceptorChain::thrown_status("handler");
          }
        }
        interceptors_->finish(ctx, pass, status);
      }
      job.call->handler_done(status);
      // Resumed from the executor's queue or a connection's wake-ups: nothing of the call's is
      // below this on the stack, so the last reference may delete it at once.
      job.call.reset_inline();
      // Large answers leave before the next handler runs (WritePolicy::bytes_per_write).
      WakeupQueue::between_calls();
    }
    if (stopping_ || idle_.size() >= kMaxIdle) break;
    idle_.push_back(slot);
    co_await slot->wake.wait();
  }
  spare_.push_back(slot);
}

}  // namespace ferry::detail
