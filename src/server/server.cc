// Implementation of ferry/server.h: the I/O threads, the acceptor that hands connections to
// them (server/listener.h, server/server_connection.h), and graceful shutdown.
#include "ferry/server.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "asio/post.hpp"
#include "ferry/offload.h"
#include "server/io_thread.h"
#include "server/listener.h"
#include "server/method_table.h"
#include "server/server_connection.h"
#include "server/server_interceptors.h"

namespace ferry {
namespace {

// How long shutdown lets an I/O thread's loop run after the last offloaded work came back, when
// the shutdown's own bound has passed: enough to resume the handler and end its call.
constexpr std::chrono::milliseconds kDrainAfterOffload{500};

}  // namespace

using detail::IoThread;
using detail::ServerConnection;

struct Server::Impl {
  ServerOptions options;
  detail::MethodTable methods;
  std::unique_ptr<detail::ServerInterceptorChain> interceptors;  // null when none registered
  std::vector<const Service*> service_list;                      // as added, for Server::services()
  std::vector<std::unique_ptr<IoThread>> threads;
  std::unique_ptr<detail::Listener> listener;  // TCP or Unix
  std::atomic<bool> logged_connection_limit{false};
  std::atomic<std::size_t> live_connections{0};
  std::atomic<std::size_t> active_calls{0};
  std::atomic<bool> shutting_down{false};
  bool started = false;
  bool stopped = false;

  bool on_accept(IoThread& thread, std::unique_ptr<http2::ByteStream> stream);
  void adopt(IoThread& thread, std::unique_ptr<http2::ByteStream> stream);
};

bool Server::Impl::on_accept(IoThread& thread, std::unique_ptr<http2::ByteStream> stream) {
  if (shutting_down.load()) return false;
  if (options.max_connections != 0 &&
      live_connections.load(std::memory_order_acquire) >= options.max_connections) {
    if (!logged_connection_limit.exchange(true)) {
      std::fprintf(stderr, "ferry: %zu connections (max_connections): closing new ones\n",
                   options.max_connections);
    }
    return true;  // the stream is dropped, which closes it; keep accepting
  }
  logged_connection_limit = false;
  live_connections.fetch_add(1, std::memory_order_acq_rel);
  asio::post(thread.io,
             [this, &thread, s = std::move(stream)]() mutable { adopt(thread, std::move(s)); });
  return true;
}

void Server::Impl::adopt(IoThread& thread, std::unique_ptr<http2::ByteStream> stream) {
  if (shutting_down.load()) {  // accepted as shutdown began: refuse rather than serve
    stream->close();
    live_connections.fetch_sub(1, std::memory_order_acq_rel);
    return;
  }
  ServerConnection::adopt(thread, std::move(stream), options, methods, active_calls,
                          live_connections);
}

Server::Server(ServerOptions options) : impl_(std::make_unique<Impl>()) {
  impl_->options = options;
}

Server::~Server() { shutdown(std::chrono::milliseconds(0)); }

void Server::add_service(const Service& service) {
  impl_->methods.add(service);
  impl_->service_list.push_back(&service);
}

absl::StatusOr<int> Server::start(const std::string& host, int port) {
  if (impl_->started) return absl::FailedPreconditionError("server already started");
  if (!impl_->options.interceptors.empty() && impl_->interceptors == nullptr) {
    impl_->interceptors =
        std::make_unique<detail::ServerInterceptorChain>(impl_->options.interceptors);
  }
  unsigned n = impl_->options.num_threads;
  if (n == 0) n = std::max(1u, std::thread::hardware_concurrency());
  for (unsigned i = 0; i < n; ++i) {
    impl_->threads.push_back(std::make_unique<IoThread>());
    impl_->threads.back()->runners.set_interceptors(impl_->interceptors.get());
  }

  absl::StatusOr<std::unique_ptr<detail::Listener>> listener =
      detail::Listener::open(impl_->threads[0]->io, host, port);
  if (!listener.ok()) {
    impl_->threads.clear();
    return listener.status();
  }
  const int bound = (*listener)->port();
  impl_->listener = *std::move(listener);
  impl_->started = true;
  impl_->listener->start(impl_->threads, [impl = impl_.get()](IoThread& t, auto stream) {
    return impl->on_accept(t, std::move(stream));
  });
  for (auto& t : impl_->threads) {
    t->thread = std::thread([t = t.get()] {
      detail::set_offloads_of_this_thread(&t->offloads);
      t->io.run();
      detail::set_offloads_of_this_thread(nullptr);
    });
  }
  return bound;
}

void Server::shutdown(std::chrono::milliseconds grace) {
  Impl& s = *impl_;
  if (!s.started || s.stopped) return;
  s.stopped = true;
  for (const Service* service : s.service_list) service->on_server_shutdown();  // e.g. health
  s.shutting_down.store(true);
  const auto deadline = std::chrono::steady_clock::now() + grace;

  auto on_every_connection = [&s](auto fn) {
    for (auto& t : s.threads) {
      asio::post(t->io, [t = t.get(), fn] {
        for (auto& conn : t->connections) fn(*conn);
      });
    }
  };
  asio::post(s.threads[0]->io, [&s] { s.listener->close(); });
  // GOAWAY: calls in flight go on, new streams are refused, idle connections close.
  on_every_connection([](ServerConnection& c) { c.shutdown(); });

  auto wait_until = [&s](std::chrono::steady_clock::time_point until) {
    while (s.live_connections.load() > 0 && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  };
  wait_until(deadline);
  // Past the grace period: cancel what is left (handlers see is_cancelled, their reads and
  // writes fail) and close.
  on_every_connection([](ServerConnection& c) { c.close(); });
  wait_until(std::chrono::steady_clock::now() + std::chrono::seconds(2));

  for (auto& t : s.threads) {
    asio::post(t->io, [t = t.get()] {
      t->runners.stop();
      t->deadlines.stop();
      t->memory_trim.stop();
    });
    t->work.reset();
  }
  // Work handed to ferry::offload cannot be interrupted, and its pool posts the result back
  // into the handler's io_context: that must outlive the post, however long the work takes (it
  // used to be stopped after 2 s and destroyed with the server, and the pool then posted into
  // freed memory). Handlers that ignore cancellation would keep a loop alive for ever: stop each
  // after a bound, one for every thread (it used to be 2 s for each thread in turn).
  auto offloads_done = [](IoThread& t) {
    while (t.offloads.load(std::memory_order_acquire) > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  };
  // Waits for t's loop to run out of work and end by itself, or for deadline.
  auto loop_ended = [](IoThread& t, std::chrono::steady_clock::time_point deadline) {
    while (!t.io.stopped() && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  };
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (auto& t : s.threads) {
    loop_ended(*t, until);
    offloads_done(*t);
    // The pool's last post resumes a handler on this loop: let the loop run it and end the call
    // (its connection is closed, so that is quick) before stopping it, or the call's frames go
    // with the io_context's queue, never finished (LeakSanitizer saw a ServerCall so lost when
    // the offloaded work outlasted the bound). Bounded as well, for handlers that keep going.
    loop_ended(*t, std::max(until, std::chrono::steady_clock::now() + kDrainAfterOffload));
    t->io.stop();
    if (t->thread.joinable()) t->thread.join();
    // A handler may have offloaded more just before the stop: its pool posts into the stopped
    // (still living) io_context, whose destruction then drops what it posted.
    offloads_done(*t);
  }
  s.listener.reset();
}

const std::vector<const Service*>& Server::services() const { return impl_->service_list; }

std::size_t Server::active_calls() const { return impl_->active_calls.load(); }

}  // namespace ferry
