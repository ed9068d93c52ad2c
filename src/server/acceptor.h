// The server's acceptor loop (server layer, private): accepts connections and hands each to the
// next I/O thread in turn; closes a connection accepted beyond max_connections; and when accept
// fails for lack of descriptors or memory, pauses before trying again (logging once) instead of
// spinning on a listening socket that stays readable. Runs on the first I/O thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "asio/ip/tcp.hpp"
#include "asio/steady_timer.hpp"
#include "server/io_thread.h"

namespace ferry::detail {

class Acceptor {
 public:
  // Takes a socket accepted for a thread, on that thread.
  using Adopt = std::function<void(IoThread& thread, asio::ip::tcp::socket socket)>;

  // live_connections: the server's count, incremented here for each connection handed on (and
  // decremented by whoever closes it). max_connections 0: no limit.
  Acceptor(asio::ip::tcp::acceptor acceptor, const std::vector<std::unique_ptr<IoThread>>& threads,
           std::atomic<std::size_t>& live_connections, std::size_t max_connections, Adopt adopt);

  // Starts accepting; from any thread (the loop runs on the acceptor's executor).
  void start();
  // Stops accepting; on the acceptor's executor.
  void close();

  // How long accept pauses after running out of descriptors (or memory).
  static constexpr std::chrono::milliseconds kRetryAfter{100};

 private:
  void accept_next();
  void on_accept(IoThread& target, const asio::error_code& ec, asio::ip::tcp::socket socket);

  asio::ip::tcp::acceptor acceptor_;
  const std::vector<std::unique_ptr<IoThread>>& threads_;
  std::atomic<std::size_t>& live_connections_;
  std::size_t max_connections_;
  Adopt adopt_;
  asio::steady_timer retry_;
  std::size_t next_thread_ = 0;
  bool closed_ = false;
  bool logged_exhaustion_ = false;
  bool logged_limit_ = false;
};

}  // namespace ferry::detail
