// How long a connection lives and whether its peer is still there (http2 layer, private): the
// handshake timeout, idle and age limits, keepalive PINGs and the policing of the peer's PINGs
// (ferry/connection_policy.h). One per connection, on one timer that ticks only as often as the
// shortest limit needs; reads and stream changes are counted by the connection, not timed, so
// the hot path pays nothing for it.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>

#include "asio/steady_timer.hpp"
#include "ferry/connection_policy.h"

namespace ferry::http2 {

class Connection;

struct LifecyclePolicy {
  std::chrono::milliseconds handshake_timeout = kNever;  // server: preface + SETTINGS
  std::chrono::milliseconds max_idle = kNever;
  std::chrono::milliseconds max_age = kNever;
  std::chrono::milliseconds max_age_grace = kNever;
  // No stream open and nothing read for this long: Connection::release_read_buffers().
  std::chrono::milliseconds release_buffers_after = kNever;
  KeepaliveOptions keepalive;
  bool police_pings = false;  // server: apply `pings` to the client's PINGs
  PingPolicy pings;

  // Whether any of it is on (else the connection needs no Lifecycle).
  bool active() const;
  // The policy a server applies to its connections.
  static LifecyclePolicy for_server(const ServerConnectionPolicy& p);
};

class Lifecycle {
 public:
  using Clock = std::chrono::steady_clock;

  Lifecycle(Connection& connection, const LifecyclePolicy& policy);

  // Arms the timer; the connection has started.
  void start();
  // Cancels the timer; the connection is closing.
  void stop();

  // The peer's first SETTINGS frame arrived: the handshake is complete.
  void on_peer_settings() { handshake_done_ = true; }
  // The peer sent a PING (not an ACK). May end the connection (too_many_pings).
  void on_ping_received();
  // Our PING was answered.
  void on_ping_ack() { ping_outstanding_ = false; }
  // We sent HEADERS or DATA: the peer's next PING is no strike and clears the strikes (as in
  // grpc-go: clients send PINGs to measure bandwidth as data arrives).
  void on_data_sent() { reset_strikes_ = true; }
  // The connection read again after release_read_buffers(): the timer, which stopped counting
  // toward a release, does again.
  void on_buffers_taken() {
    buffers_released_ = false;
    arm();  // re-arming cancels the wait under way
  }

 private:
  void arm();
  void on_timer();
  // The period between checks: half the shortest running limit, so that each is noticed
  // within 1.5 times its value.
  Clock::duration tick() const;

  Connection& connection_;
  LifecyclePolicy policy_;
  asio::steady_timer timer_;
  bool stopped_ = false;
  Clock::time_point created_;
  bool handshake_done_ = false;
  // Idle: since when no stream was open (as seen by the ticks).
  bool idle_ = false;
  Clock::time_point idle_since_;
  std::uint64_t opened_seen_ = 0;
  // Age.
  bool aged_ = false;
  Clock::time_point goaway_at_;
  // Buffers released while idle (release_buffers_after); reads_seen_ dates the last read.
  bool buffers_released_ = false;
  // Keepalive.
  std::uint64_t reads_seen_ = 0;
  Clock::time_point last_activity_;
  bool ping_outstanding_ = false;
  Clock::time_point ping_sent_;
  // The peer's PINGs.
  Clock::time_point last_peer_ping_ = Clock::time_point::min();
  int ping_strikes_ = 0;
  bool reset_strikes_ = false;
};

}  // namespace ferry::http2
