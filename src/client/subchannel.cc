// Implementation of src/client/subchannel.h.
#include "client/subchannel.h"

#include <algorithm>
#include <array>
#include <string>

#include "absl/strings/str_cat.h"
#include "asio/bind_cancellation_slot.hpp"
#include "asio/co_spawn.hpp"
#include "asio/detached.hpp"
#include "asio/post.hpp"
#include "asio/redirect_error.hpp"
#include "asio/use_awaitable.hpp"
#include "client/connector.h"
#include "common/strings.h"
#include "ferry/client_interceptor.h"
#include "http1/client_pool.h"

namespace ferry::detail {
namespace {

// gRFC A94's grpc.disconnect_error for a GOAWAY: "GOAWAY <code name>" for the codes RFC 9113
// defines, "unknown" for the rest (a server's arbitrary code must not make a label value).
std::string_view goaway_reason(http2::ErrorCode code) {
  static const auto reasons = [] {
    std::array<std::string, 14> r;
    for (std::size_t i = 0; i < r.size(); ++i) {
      r[i] = absl::StrCat("GOAWAY ", to_absl(http2::error_code_name(http2::ErrorCode(i))));
    }
    return r;
  }();
  const auto i = static_cast<std::size_t>(code);
  return i < reasons.size() ? std::string_view(reasons[i]) : std::string_view("unknown");
}

}  // namespace

void tell_connection_event(const SubchannelSettings& settings, ConnectionEvent event,
                           std::string_view disconnect_error) {
  for (const auto& interceptor : settings.options.interceptors) {
    try {
      interceptor->on_connection_event(event, ConnectionInfo{settings.target, disconnect_error});
    } catch (...) {
      // An observer's failure must not take the channel down.
    }
  }
}

void ChannelConnection::on_goaway(std::int32_t, http2::ErrorCode code) {
  if (owner != nullptr) owner->lose(this, goaway_reason(code));
}

void ChannelConnection::on_connection_closed() {
  settings_wait.cancel();
  if (owner != nullptr) owner->lose(this, "unknown");
  if (std::shared_ptr<const SubchannelSettings> settings = std::move(told_open)) {
    tell_connection_event(*settings, ConnectionEvent::kClosed);
  }
  // Let go once Connection::close() has returned.
  asio::post(connection->executor(), [self = std::move(self_while_open)] {});
}

void ChannelConnection::on_peer_settings() {
  settings_received = true;
  settings_wait.cancel();
}

Subchannel::Subchannel(asio::io_context::executor_type executor, Address address,
                       std::shared_ptr<const SubchannelSettings> settings,
                       SubchannelListener* listener)
    : executor_(executor),
      address_(std::move(address)),
      settings_(std::move(settings)),
      listener_(listener),
      backoff_(settings_->options.backoff),
      retry_timer_(executor) {}

Subchannel::~Subchannel() {
  if (current_ != nullptr) current_->owner = nullptr;
}

void Subchannel::set_state(ConnectivityState state) {
  if (state_ == state || state_ == ConnectivityState::kShutdown) return;
  state_ = state;
  if (listener_ != nullptr) listener_->on_subchannel_state(this, state);
}

void Subchannel::connect() {
  if (state_ != ConnectivityState::kIdle) return;
  set_state(ConnectivityState::kConnecting);
  asio::co_spawn(executor_, attempt_loop(shared_from_this()),
                 asio::bind_cancellation_slot(attempt_cancel_.slot(), asio::detached));
}

asio::awaitable<void> Subchannel::attempt_loop(std::shared_ptr<Subchannel> /*keeps it alive*/) {
  const ChannelOptions& options = settings_->options;
  while (state_ == ConnectivityState::kConnecting) {
    const auto started = std::chrono::steady_clock::now();
    const std::chrono::milliseconds delay = backoff_.next();
    // connection-backoff.md: an attempt may take the longer of the minimum connect timeout and
    // the current back-off.
    const auto deadline = started + std::max(options.connect_timeout, delay);
    absl::StatusOr<std::unique_ptr<http2::ByteStream>> stream =
        co_await connect_address(executor_, address_, settings_->tls_host, deadline, options);
    if (state_ != ConnectivityState::kConnecting) co_return;  // shut down meanwhile
    if (!stream.ok()) {
      last_error_ = stream.status();
    } else {
      auto conn = std::make_shared<ChannelConnection>(executor_);
      if (options.http_version == ChannelHttpVersion::kHttp1) {
        // More connections like this one, for calls in flight at once.
        auto dial = [executor = executor_, address = address_,
                     settings = settings_](std::function<void(http1::ClientPool::Dialed)> done) {
          asio::co_spawn(
              executor,
              [executor, address, settings, done = std::move(done)]() -> asio::awaitable<void> {
                const ChannelOptions& o = settings->options;
                done(co_await connect_address(executor, address, settings->tls_host,
                                              std::chrono::steady_clock::now() + o.connect_timeout,
                                              o));
              },
              asio::detached);
        };
        conn->connection =
            std::make_shared<http1::ClientPool>(*std::move(stream), std::move(dial), options,
                                                conn.get(), options.max_http1_connections);
      } else {
        auto h2 = std::make_shared<http2::Connection>(*std::move(stream), http2::Role::kClient,
                                                      options, conn.get());
        http2::LifecyclePolicy lifecycle;
        lifecycle.keepalive = options.keepalive;
        h2->set_lifecycle(lifecycle);
        conn->connection = std::move(h2);
      }
      conn->self_while_open = conn;
      conn->connection->start();
      // READY once the server's SETTINGS arrived, within the attempt's deadline (gRPC's
      // connectors wait for them too); the connection is the subchannel's only then.
      if (!conn->settings_received && conn->connection->is_open()) {
        handshaking_ = conn;
        conn->settings_wait.expires_at(deadline);
        asio::error_code ec;
        co_await conn->settings_wait.async_wait(asio::redirect_error(asio::use_awaitable, ec));
        handshaking_.reset();
      }
      if (state_ != ConnectivityState::kConnecting) {  // shut down meanwhile
        conn->connection->close();
        co_return;
      }
      if (conn->settings_received && conn->connection->accepts_new_streams()) {
        backoff_.reset();
        conn->owner = this;
        conn->told_open = settings_;
        tell_connection_event(*settings_, ConnectionEvent::kAttemptSucceeded);
        current_ = conn;
        set_state(ConnectivityState::kReady);
        co_return;
      }
      last_error_ = absl::UnavailableError(
          absl::StrCat(conn->connection->is_open() && !conn->settings_received
                           ? "timed out waiting for the server's HTTP/2 SETTINGS from "
                           : "connection closed by the server during the HTTP/2 handshake with ",
                       address_.to_string()));
      conn->connection->close();
    }
    tell_connection_event(*settings_, ConnectionEvent::kAttemptFailed);
    set_state(ConnectivityState::kTransientFailure);
    retry_timer_.expires_at(started + delay);
    asio::error_code ec;
    co_await retry_timer_.async_wait(asio::redirect_error(asio::use_awaitable, ec));
    if (state_ != ConnectivityState::kTransientFailure) co_return;
    set_state(reconnect_ ? ConnectivityState::kConnecting : ConnectivityState::kIdle);
  }
}

void Subchannel::lose(ChannelConnection* conn, std::string_view reason) {
  if (conn == nullptr || conn != current_.get()) return;
  auto self = shared_from_this();
  // The first reason only: a GOAWAY's, not the close that follows it (gRFC A94).
  tell_connection_event(*settings_, ConnectionEvent::kDisconnected, reason);
  conn->owner = nullptr;
  current_.reset();
  set_state(ConnectivityState::kIdle);
}

void Subchannel::shutdown(bool graceful) {
  if (state_ == ConnectivityState::kShutdown) return;
  state_ = ConnectivityState::kShutdown;
  listener_ = nullptr;
  retry_timer_.cancel();
  attempt_cancel_.emit(asio::cancellation_type::terminal);
  if (std::shared_ptr<ChannelConnection> conn = std::move(handshaking_)) conn->connection->close();
  if (std::shared_ptr<ChannelConnection> conn = std::move(current_)) {
    tell_connection_event(*settings_, ConnectionEvent::kDisconnected, "subchannel shutdown");
    conn->owner = nullptr;
    if (graceful) {
      conn->connection->shutdown();
    } else {
      conn->connection->close();
    }
  }
}

}  // namespace ferry::detail
