// ferry/resolver.h: name resolution for channels (client layer, public). A Resolver turns a
// channel's target into the addresses its subchannels connect to, one connection per address.
// The built-in resolvers follow the target's scheme (dns:, ipv4:, ipv6:, unix:, see channel.h);
// a user plugs in their own discovery (a static list, a file, a registry) through
// ChannelOptions::resolver.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
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

  // For resolvers told of changes (xDS): the channel calls watch(changed) once, on its executor,
  // before its first resolve(), and watch(nullptr) as it closes. Until then the resolver calls
  // changed() -- from any thread, never while it holds a lock the channel's thread could need --
  // whenever resolve() would now answer differently; the channel then resolves again at once,
  // min_resolve_interval notwithstanding. The default ignores it (the channel asks when it sees
  // a reason to).
  virtual void watch(std::function<void()> changed) { (void)changed; }

  // The load-balancing policy the addresses call for ("round_robin", "pick_first"), which then
  // wins over ChannelOptions::load_balancing; empty (the default) keeps the channel's.
  virtual std::string_view load_balancing_policy() const { return {}; }
};

// Resolvers for a scheme ferry does not know ("xds:///name"): factory gets the whole target and
// returns its resolver, or INVALID_ARGUMENT saying why the target is bad (the channel's calls
// then fail with UNAVAILABLE and that message). A registered scheme is looked up before the
// built-in ones; the target's default :authority is its path ("name" for "xds:///name").
// ferry::xds registers "xds" (ferry/xds.h). From any thread; registering a scheme again replaces
// its factory for channels made afterwards.
using ResolverFactory =
    std::function<absl::StatusOr<std::shared_ptr<Resolver>>(std::string_view target)>;
void register_resolver_scheme(std::string_view scheme, ResolverFactory factory);

// A resolver that always answers addresses (a fixed list of replicas; tests).
std::shared_ptr<Resolver> make_static_resolver(std::vector<Address> addresses);

}  // namespace ferry
