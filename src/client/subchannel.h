// One connection of a channel to one resolved address (client layer, private): its connectivity
// state (IDLE, CONNECTING, READY, TRANSIENT_FAILURE, SHUTDOWN), the connection attempts with
// gRPC's back-off between them, and the HTTP/2 connection while READY. A GOAWAY or a lost
// connection takes it out of READY at once (the draining connection lives on through its calls'
// references). Everything runs on the channel's executor.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "asio/cancellation_signal.hpp"
#include "asio/io_context.hpp"
#include "asio/steady_timer.hpp"
#include "call/deadline_queue.h"
#include "client/backoff.h"
#include "client/outlier_detection.h"
#include "ferry/channel.h"
#include "ferry/client_interceptor.h"
#include "ferry/connectivity.h"
#include "ferry/resolver.h"
#include "http2/connection.h"

namespace ferry::detail {

class Subchannel;
struct SubchannelSettings;

// One HTTP/2 connection of a channel, and its observer (reports to its subchannel, if it still
// has one).
struct ChannelConnection final : http2::ConnectionObserver {
  explicit ChannelConnection(const asio::any_io_executor& executor)
      : deadlines(executor), settings_wait(executor) {}
  // HTTP/2 (http2::Connection), or HTTP/1.1 (http1::ClientPool).
  std::shared_ptr<http2::ClientTransport> connection;
  DeadlineQueue deadlines;      // its calls' deadlines, on one timer
  Subchannel* owner = nullptr;  // cleared when the subchannel lets go of it
  // Itself while the connection is open: the connection reports to this object up to the end
  // of its close(), even when the last call or picker holding it goes during that close.
  std::shared_ptr<ChannelConnection> self_while_open;
  // The server's SETTINGS (its half of the HTTP/2 preface) arrived. Until then the connection is
  // not READY: a peer that accepts TCP but says nothing (a black-holed link, a proxy before a
  // dead server, a server that is not HTTP/2) must fail the attempt, as in gRPC.
  bool settings_received = false;
  // The connection attempt waits on it for those SETTINGS, until its deadline: cancelled when
  // they arrive or the connection closes first.
  asio::steady_timer settings_wait;
  // Set once the connection is open (ConnectionEvent::kAttemptSucceeded): its close is told
  // (kClosed) to the interceptors these settings hold.
  std::shared_ptr<const SubchannelSettings> told_open;
  // Where its calls' outcomes count, when its cluster has outlier detection (gRFC A50,
  // client/outlier_detection.h); set by the channel on its thread.
  std::shared_ptr<EndpointCallCounts> call_counts;
  http2::Stream* on_stream_open(std::int32_t) override { return nullptr; }  // no server push
  void on_goaway(std::int32_t, http2::ErrorCode) override;
  void on_connection_closed() override;
  void on_peer_settings() override;
};

// Told of every state change of the subchannels it created (the channel, for its policy).
class SubchannelListener {
 public:
  virtual ~SubchannelListener() = default;
  // May create, connect or shut down subchannels, this one too.
  virtual void on_subchannel_state(Subchannel* subchannel, ConnectivityState state) = 0;
};

// What the subchannels of one channel share; owned by the channel, outlives them.
struct SubchannelSettings {
  ChannelOptions options;
  std::string tls_host;
  std::string target;  // canonical (client/target.h), for the interceptors' connection events
};

// Tells the channel's interceptors of a connection event (ClientInterceptor::on_connection_event);
// nothing when there are none.
void tell_connection_event(const SubchannelSettings& settings, ConnectionEvent event,
                           std::string_view disconnect_error = {});

class Subchannel : public std::enable_shared_from_this<Subchannel> {
 public:
  Subchannel(asio::io_context::executor_type executor, Address address,
             std::shared_ptr<const SubchannelSettings> settings, SubchannelListener* listener);
  ~Subchannel();
  Subchannel(const Subchannel&) = delete;
  Subchannel& operator=(const Subchannel&) = delete;

  const Address& address() const { return address_; }
  ConnectivityState state() const { return state_; }
  // Why the last attempt failed (OK before any failure).
  const absl::Status& last_error() const { return last_error_; }
  // The connection while READY, else null.
  const std::shared_ptr<ChannelConnection>& connection() const { return current_; }

  // IDLE: starts connecting (CONNECTING). Other states: nothing.
  void connect();
  // Whether a failed attempt is followed, after the back-off, by the next (the policy wants this
  // address connected), or by IDLE. Default true.
  void set_reconnect(bool reconnect) { reconnect_ = reconnect; }
  // The READY connection cannot take new streams (ids exhausted): treated as a GOAWAY.
  void drop_connection() { lose(current_.get(), "unknown"); }
  // SHUTDOWN: stops attempts; graceful lets the connection's calls finish (GOAWAY to the
  // server), else closes it (its calls fail). No more state reports.
  void shutdown(bool graceful);

  // From its connection's observer: GOAWAY received or the connection closed; reason is gRFC
  // A94's grpc.disconnect_error (a static string).
  void lose(ChannelConnection* conn, std::string_view reason);

 private:
  asio::awaitable<void> attempt_loop(std::shared_ptr<Subchannel> self);
  void set_state(ConnectivityState state);

  asio::io_context::executor_type executor_;
  Address address_;
  std::shared_ptr<const SubchannelSettings> settings_;
  SubchannelListener* listener_;
  ConnectivityState state_ = ConnectivityState::kIdle;
  absl::Status last_error_;
  Backoff backoff_;
  bool reconnect_ = true;
  asio::steady_timer retry_timer_;
  // Cancels attempt_loop's connection attempt in flight (a TCP connect or a TLS handshake) when
  // the subchannel shuts down, so that it ends even if the loop then stops running.
  asio::cancellation_signal attempt_cancel_;
  std::shared_ptr<ChannelConnection> current_;
  // The connection of the attempt under way while it waits for the server's SETTINGS (closed by
  // shutdown(), as current_ is).
  std::shared_ptr<ChannelConnection> handshaking_;
};

}  // namespace ferry::detail
