// Implementation of src/http2/lifecycle.h.
#include "http2/lifecycle.h"

#include <algorithm>

#include "http2/connection.h"

namespace ferry::http2 {
namespace {

bool on(std::chrono::milliseconds d) { return d != kNever && d.count() > 0; }

// grpc-go ends a connection on the third strike (more than two).
constexpr int kMaxPingStrikes = 2;

}  // namespace

bool LifecyclePolicy::active() const {
  return on(handshake_timeout) || on(max_idle) || on(max_age) || on(keepalive.time) ||
         on(release_buffers_after) || police_pings;
}

LifecyclePolicy LifecyclePolicy::for_server(const ServerConnectionPolicy& p) {
  LifecyclePolicy out;
  out.handshake_timeout = p.handshake_timeout;
  out.max_idle = p.max_connection_idle;
  out.max_age = p.max_connection_age;
  out.max_age_grace = p.max_connection_age_grace;
  out.release_buffers_after = p.release_idle_buffers_after;
  out.keepalive = p.keepalive;
  out.police_pings = true;
  out.pings = p.client_pings;
  return out;
}

Lifecycle::Lifecycle(Connection& connection, const LifecyclePolicy& policy)
    : connection_(connection), policy_(policy), timer_(connection.executor()) {}

void Lifecycle::start() {
  created_ = last_activity_ = Clock::now();
  arm();
}

void Lifecycle::stop() {
  stopped_ = true;
  timer_.cancel();
}

Lifecycle::Clock::duration Lifecycle::tick() const {
  Clock::duration t = std::chrono::hours(24);
  if (on(policy_.max_idle)) t = std::min<Clock::duration>(t, policy_.max_idle / 2);
  if (on(policy_.release_buffers_after) && !buffers_released_) {
    t = std::min<Clock::duration>(t, policy_.release_buffers_after / 2);
  }
  if (on(policy_.keepalive.time)) {
    t = std::min<Clock::duration>(t, policy_.keepalive.time / 2);
    if (ping_outstanding_) t = std::min<Clock::duration>(t, policy_.keepalive.timeout);
  }
  return std::max<Clock::duration>(t, std::chrono::milliseconds(1));
}

void Lifecycle::arm() {
  if (stopped_) return;
  const Clock::time_point now = Clock::now();
  Clock::time_point next = now + tick();
  if (!handshake_done_ && on(policy_.handshake_timeout)) {
    next = std::min(next, created_ + policy_.handshake_timeout);
  }
  if (on(policy_.max_age)) {
    if (!aged_) {
      next = std::min(next, created_ + policy_.max_age);
    } else if (on(policy_.max_age_grace)) {
      next = std::min(next, goaway_at_ + policy_.max_age_grace);
    }
  }
  if (ping_outstanding_) next = std::min(next, ping_sent_ + policy_.keepalive.timeout);
  timer_.expires_at(next);
  // The timer keeps the connection alive until it fires or is cancelled (stop()).
  timer_.async_wait([self = connection_.shared_from_this(), this](const asio::error_code& ec) {
    if (ec || stopped_ || !self->is_open()) return;
    on_timer();
  });
}

void Lifecycle::on_timer() {
  const Clock::time_point now = Clock::now();
  if (!handshake_done_ && on(policy_.handshake_timeout) &&
      now >= created_ + policy_.handshake_timeout) {
    connection_.close();  // no HTTP/2 to speak with yet: just close
    return;
  }
  // Keepalive: any read since the last tick is a sign of life.
  if (connection_.reads() != reads_seen_) {
    reads_seen_ = connection_.reads();
    last_activity_ = now;
    ping_outstanding_ = false;  // whatever answered, the peer is there
    buffers_released_ = false;  // the connection has taken a read buffer again
  }
  if (on(policy_.release_buffers_after) && !buffers_released_ && connection_.open_streams() == 0 &&
      now - last_activity_ >= policy_.release_buffers_after) {
    buffers_released_ = connection_.release_read_buffers();
  }
  if (ping_outstanding_ && now >= ping_sent_ + policy_.keepalive.timeout) {
    connection_.close();  // the peer stopped answering
    return;
  }
  if (on(policy_.keepalive.time) && !ping_outstanding_ &&
      now - last_activity_ >= policy_.keepalive.time &&
      (connection_.open_streams() > 0 || policy_.keepalive.without_calls)) {
    ping_outstanding_ = true;
    ping_sent_ = now;
    connection_.ping();
  }
  // Idle: no stream open, and none opened since the last tick.
  if (on(policy_.max_idle)) {
    const bool idle_now =
        connection_.open_streams() == 0 && connection_.streams_opened() == opened_seen_;
    opened_seen_ = connection_.streams_opened();
    if (!idle_now) {
      idle_ = false;
    } else if (!idle_) {
      idle_ = true;
      idle_since_ = now;
    } else if (now - idle_since_ >= policy_.max_idle) {
      connection_.shutdown();  // GOAWAY; with no stream open the connection then closes
    }
  }
  if (on(policy_.max_age)) {
    if (!aged_ && now >= created_ + policy_.max_age) {
      aged_ = true;
      goaway_at_ = now;
      connection_.shutdown();
    } else if (aged_ && on(policy_.max_age_grace) && now >= goaway_at_ + policy_.max_age_grace) {
      connection_.close();
      return;
    }
  }
  arm();
}

void Lifecycle::on_ping_received() {
  if (!policy_.police_pings) return;
  const Clock::time_point now = Clock::now();
  if (reset_strikes_) {
    reset_strikes_ = false;
    ping_strikes_ = 0;
    last_peer_ping_ = now;
    return;
  }
  // As grpc-go judges: without a call open (and not permitted), any PING within two hours of
  // the previous one is a strike; otherwise one sooner than the minimum interval.
  const bool no_calls = connection_.open_streams() == 0 && !policy_.pings.permit_without_calls;
  const Clock::duration allowed = no_calls ? Clock::duration(std::chrono::hours(2))
                                           : Clock::duration(policy_.pings.min_interval);
  if (last_peer_ping_ != Clock::time_point::min() && now - last_peer_ping_ < allowed) {
    ++ping_strikes_;
  }
  last_peer_ping_ = now;
  if (ping_strikes_ > kMaxPingStrikes) {
    connection_.terminate(ErrorCode::kEnhanceYourCalm, "too_many_pings");
  }
}

}  // namespace ferry::http2
