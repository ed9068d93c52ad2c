// ferry/connectivity.h: a channel's connectivity, as gRPC's connectivity-semantics document
// names it (client layer, public): the state of each connection (subchannel) and of the channel
// as its load-balancing policy sums them up, and the reconnect back-off between attempts.
#pragma once

#include <chrono>
#include <string_view>

namespace ferry {

// IDLE: no connection and none being made (a call or the policy starts one). CONNECTING: an
// attempt is under way (TCP, TLS, then the server's HTTP/2 SETTINGS, within the connect
// deadline). READY: the server's SETTINGS arrived, calls go out. TRANSIENT_FAILURE: the last
// attempt failed; the next comes after a back-off. SHUTDOWN: the channel is closed.
enum class ConnectivityState { kIdle, kConnecting, kReady, kTransientFailure, kShutdown };

// "IDLE", "CONNECTING", "READY", "TRANSIENT_FAILURE", "SHUTDOWN".
std::string_view connectivity_state_name(ConnectivityState state);

// gRPC's connection back-off (connection-backoff.md): the first retry comes initial after the
// failed attempt started, each later one multiplier times the previous delay, capped at max, and
// spread by +-jitter (a fraction) so that clients do not reconnect in step. An attempt may last
// max(ChannelOptions::connect_timeout, the current delay).
struct BackoffOptions {
  std::chrono::milliseconds initial = std::chrono::seconds(1);
  double multiplier = 1.6;
  double jitter = 0.2;
  std::chrono::milliseconds max = std::chrono::seconds(120);
};

// How a channel spreads calls over the addresses its target resolves to (gRPC's policies).
enum class LoadBalancingPolicy {
  // Connects to the addresses in order until one succeeds and sends every call there; moves on
  // when that connection goes. gRPC's default.
  kPickFirst,
  // Connects to every address and sends the calls to the READY ones in turn.
  kRoundRobin,
};

}  // namespace ferry
