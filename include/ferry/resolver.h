// ferry/resolver.h: name resolution for channels (client layer, public). A Resolver turns a
// channel's target into the addresses its subchannels connect to, one connection per address.
// The built-in resolvers follow the target's scheme (dns:, ipv4:, ipv6:, unix:, see channel.h);
// a user plugs in their own discovery (a static list, a file, a registry) through
// ChannelOptions::resolver.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "asio/any_io_executor.hpp"
#include "asio/awaitable.hpp"
#include "asio/ip/tcp.hpp"

namespace ferry {

// One address a subchannel connects to: a TCP endpoint or a Unix domain socket.
struct Address {
  asio::ip::tcp::endpoint tcp;  // used when unix_path is empty
  std::string unix_path;        // a Unix socket's path; an abstract name starts with '\0'

  // "127.0.0.1:50051", "[::1]:50051", "unix:/path".
  std::string to_string() const;
  friend bool operator==(const Address&, const Address&) = default;
};

// Resolves one target. The channel calls resolve() on its executor when it first needs
// addresses and again when a connection is lost or every address failed (at most once per
// ChannelOptions::min_resolve_interval). One resolve() at a time per channel.
class Resolver {
 public:
  virtual ~Resolver() = default;
  // The addresses, in the order of preference (pick_first tries them in this order), or
  // UNAVAILABLE saying why. It must not block the executor's thread: a blocking lookup belongs on
  // another thread (the built-in dns resolver uses asio's, which runs getaddrinfo off the loop).
  // An empty list counts as a failure.
  virtual asio::awaitable<absl::StatusOr<std::vector<Address>>> resolve(
      asio::any_io_executor executor) = 0;
};

// A resolver that always answers addresses (a fixed list of replicas; tests).
std::shared_ptr<Resolver> make_static_resolver(std::vector<Address> addresses);

}  // namespace ferry
