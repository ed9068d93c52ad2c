// ferry/connection_policy.h: how long connections live and how their liveness is checked
// (public): handshake timeout, idle and age limits, keepalive PINGs and the PINGs a server
// tolerates, named as grpc-go and grpc++ name them. ServerOptions and ChannelOptions hold these.
#pragma once

#include <chrono>
#include <cstddef>

namespace ferry {

// A duration that means "never" (the limit is off).
inline constexpr std::chrono::milliseconds kNever = std::chrono::milliseconds::max();

// Keepalive PINGs (both ends): after `time` without reading anything from the peer, send a
// PING; close the connection when its ACK does not arrive within `timeout`. Silence is noticed
// between `time` and 1.5 × `time` (it is checked on a timer, not on every read).
struct KeepaliveOptions {
  std::chrono::milliseconds time = kNever;
  std::chrono::milliseconds timeout = std::chrono::seconds(20);
  // Also PING while no call is open: a client keeping an idle connection (and the NAT mapping
  // or load balancer entry under it) alive. A server must permit it (PingPolicy).
  bool without_calls = false;
};

// The PINGs a server accepts from a client (grpc-go's keepalive enforcement policy). A PING
// sooner than min_interval after the previous one, or while no call is open unless
// permit_without_calls, is a strike; the third strike ends the connection with GOAWAY
// ENHANCE_YOUR_CALM "too_many_pings". The first PING after the server sent HEADERS or DATA clears
// the strikes (clients ping to measure bandwidth as data arrives), as grpc-go judges.
struct PingPolicy {
  std::chrono::milliseconds min_interval = std::chrono::minutes(5);
  bool permit_without_calls = false;
};

// A server's connections. Defaults are meant to be safe facing the internet.
struct ServerConnectionPolicy {
  // A connection whose client has not sent the HTTP/2 preface and its SETTINGS within this is
  // closed (half-open and silent TCP connections).
  std::chrono::milliseconds handshake_timeout = std::chrono::seconds(10);
  // A connection with no open call for this long gets GOAWAY and is closed. Clients reconnect on
  // their next call.
  std::chrono::milliseconds max_connection_idle = std::chrono::minutes(15);
  // A connection older than this gets GOAWAY (its calls go on, new ones go to a new connection:
  // spreads clients over replicas); after max_connection_age_grace more it is closed.
  std::chrono::milliseconds max_connection_age = kNever;
  std::chrono::milliseconds max_connection_age_grace = kNever;
  // The server's own keepalive: a PING after 2 hours of silence (gRPC's default).
  KeepaliveOptions keepalive{std::chrono::hours(2)};
  // What it tolerates of clients' PINGs.
  PingPolicy client_pings;
  // A connection with no open call that has read nothing for this long gives its read buffer
  // (a 64 KiB pooled block, and the block its output is written into) back to the pool and
  // waits for the client's next bytes without one; the next read takes a block again. This is
  // most of what an idle connection costs beyond its HTTP/2 session, and a block
  // a connection keeps is one the pool cannot return to the system. kNever keeps them.
  std::chrono::milliseconds release_idle_buffers_after = std::chrono::seconds(5);
  // Connections served at once; a connection accepted beyond it is closed at once. 0: no limit
  // (the process's descriptor limit still is one: when accept fails for lack of descriptors the
  // server retries after a pause instead of spinning).
  std::size_t max_connections = 0;
};

}  // namespace ferry
