// Implementation of src/server/acceptor.h.
#include "server/acceptor.h"

#include <cstdio>

#include "asio/post.hpp"

namespace ferry::detail {
namespace {

// Failures that last until something else gives resources back: retrying at once would spin.
bool out_of_resources(const asio::error_code& ec) {
  return ec == asio::error::no_descriptors || ec == asio::error::no_buffer_space ||
         ec == asio::error::no_memory ||
         ec == asio::error_code(ENFILE, asio::system_category());
}

}  // namespace

Acceptor::Acceptor(asio::ip::tcp::acceptor acceptor,
                   const std::vector<std::unique_ptr<IoThread>>& threads,
                   std::atomic<std::size_t>& live_connections, std::size_t max_connections,
                   Adopt adopt)
    : acceptor_(std::move(acceptor)),
      threads_(threads),
      live_connections_(live_connections),
      max_connections_(max_connections),
      adopt_(std::move(adopt)),
      retry_(acceptor_.get_executor()) {}

void Acceptor::start() {
  asio::post(acceptor_.get_executor(), [this] { accept_next(); });
}

void Acceptor::close() {
  closed_ = true;
  asio::error_code ignored;
  acceptor_.close(ignored);
  retry_.cancel();
}

void Acceptor::accept_next() {
  if (closed_) return;
  IoThread& target = *threads_[next_thread_];
  next_thread_ = (next_thread_ + 1) % threads_.size();
  acceptor_.async_accept(target.io, [this, &target](const asio::error_code& ec,
                                                    asio::ip::tcp::socket socket) {
    on_accept(target, ec, std::move(socket));
  });
}

void Acceptor::on_accept(IoThread& target, const asio::error_code& ec,
                         asio::ip::tcp::socket socket) {
  if (closed_ || ec == asio::error::operation_aborted) return;
  if (ec) {
    if (!out_of_resources(ec)) {
      accept_next();  // the client gave up before we accepted (ECONNABORTED): carry on
      return;
    }
    if (!logged_exhaustion_) {
      logged_exhaustion_ = true;
      std::fprintf(stderr, "ferry: accept failed (%s); retrying every %lld ms until it works\n",
                   ec.message().c_str(), static_cast<long long>(kRetryAfter.count()));
    }
    retry_.expires_after(kRetryAfter);
    retry_.async_wait([this](const asio::error_code& e) {
      if (!e) accept_next();
    });
    return;
  }
  logged_exhaustion_ = false;
  if (max_connections_ != 0 && live_connections_.load(std::memory_order_acquire) >= max_connections_) {
    if (!logged_limit_) {
      logged_limit_ = true;
      std::fprintf(stderr, "ferry: %zu connections (max_connections): closing new ones\n",
                   max_connections_);
    }
    asio::error_code ignored;
    socket.close(ignored);
    accept_next();
    return;
  }
  logged_limit_ = false;
  live_connections_.fetch_add(1, std::memory_order_acq_rel);
  asio::post(target.io, [this, &target, s = std::move(socket)]() mutable {
    adopt_(target, std::move(s));
  });
  accept_next();
}

}  // namespace ferry::detail
