// A server with the Echo service on 127.0.0.1 and a channel to it, driven from the test thread
// (test support). run() spawns a coroutine on the client's io_context and turns the loop until
// it is done; probe() shows what the server's handlers did.
#pragma once

#include <chrono>
#include <future>
#include <memory>
#include <stdexcept>
#include <string>

#include "asio/co_spawn.hpp"
#include "asio/executor_work_guard.hpp"
#include "asio/io_context.hpp"
#include "asio/use_future.hpp"
#include "ferry/channel.h"
#include "ferry/server.h"
#include "support/echo_service.h"

namespace ferry::testing {

class Loopback {
 public:
  // extra: another service to serve beside Echo (handlers a test defines); must outlive this.
  explicit Loopback(ServerOptions server_options = {}, ChannelOptions channel_options = {},
                    const Service* extra = nullptr)
      : service_(&probe_), server_(server_options) {
    server_.add_service(service_);
    if (extra != nullptr) server_.add_service(*extra);
    absl::StatusOr<int> port = server_.start("127.0.0.1", 0);
    if (!port.ok()) throw std::runtime_error(std::string(port.status().message()));
    port_ = *port;
    channel_ = std::make_unique<Channel>(io_, target(), std::move(channel_options));
    stub_ = std::make_unique<Echo::Stub>(*channel_);
  }

  ~Loopback() {
    stub_.reset();
    channel_.reset();
    // Let the channel's close (and what it posts: calls' deletion, streams dropped by the test)
    // run before the server goes; not after run() gave up on a coroutine (see run()).
    for (int i = 0; i < 100 && !abandoned_ && io_.poll() > 0; ++i) {
    }
    server_.shutdown(std::chrono::milliseconds(100));
  }

  std::string target() const { return "127.0.0.1:" + std::to_string(port_); }
  int port() const { return port_; }
  Channel& channel() { return *channel_; }
  // The generated Echo stub over channel().
  Echo::Stub& stub() { return *stub_; }
  Server& server() { return server_; }
  asio::io_context& io() { return io_; }
  EchoProbe& probe() { return probe_; }

  // Turns the client's loop until done() holds or limit passes; returns done().
  template <class Pred>
  bool wait_until(Pred done, std::chrono::milliseconds limit = std::chrono::seconds(5)) {
    const auto until = std::chrono::steady_clock::now() + limit;
    while (!done() && std::chrono::steady_clock::now() < until) {
      io_.run_one_for(std::chrono::milliseconds(5));
    }
    return done();
  }

  // Runs make() (returning an asio::awaitable<T>) to completion on the client's loop.
  template <class Make>
  auto run(Make make, std::chrono::seconds limit = std::chrono::seconds(60)) {
    auto future = asio::co_spawn(io_, make(), asio::use_future);
    const auto until = std::chrono::steady_clock::now() + limit;
    while (future.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      if (std::chrono::steady_clock::now() > until) {
        // The coroutine may point into the caller's frame, which the exception unwinds: the
        // loop must never resume it (the destructor's poll() does nothing on a stopped loop).
        abandoned_ = true;
        io_.stop();
        throw std::runtime_error("run(): timed out");
      }
      io_.run_one_for(std::chrono::milliseconds(50));
    }
    return future.get();
  }

 private:
  EchoProbe probe_;  // before service_: the handlers point to it
  EchoService service_;
  Server server_;
  int port_ = 0;
  asio::io_context io_{1};
  // Without work the loop would stop itself (an io_context that runs out of work stays stopped
  // until restart()), and what the test posts later, e.g. a stream's release, would never run.
  asio::executor_work_guard<asio::io_context::executor_type> work_{io_.get_executor()};
  bool abandoned_ = false;
  std::unique_ptr<Channel> channel_;
  std::unique_ptr<Echo::Stub> stub_;
};

}  // namespace ferry::testing
