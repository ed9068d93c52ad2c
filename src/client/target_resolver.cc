// Implementation of src/client/target_resolver.h and of ferry/resolver.h's static resolver.
#include "client/target_resolver.h"

#include <algorithm>
#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "asio/redirect_error.hpp"
#include "asio/use_awaitable.hpp"
#include "client/target.h"
#include "common/strings.h"

namespace ferry {

std::string Address::to_string() const {
  if (!unix_path.empty()) {
    if (unix_path.front() == '\0') return "unix-abstract:" + unix_path.substr(1);
    return "unix:" + unix_path;
  }
  const asio::ip::address a = tcp.address();
  return a.is_v6() ? absl::StrCat("[", a.to_string(), "]:", tcp.port())
                   : absl::StrCat(a.to_string(), ":", tcp.port());
}

namespace {

class StaticResolver final : public Resolver {
 public:
  explicit StaticResolver(std::vector<Address> addresses) : addresses_(std::move(addresses)) {}
  asio::awaitable<absl::StatusOr<std::vector<Address>>> resolve(asio::any_io_executor) override {
    if (addresses_.empty()) co_return absl::UnavailableError("the address list is empty");
    co_return addresses_;
  }

 private:
  std::vector<Address> addresses_;
};

// Every A and AAAA record of host, in getaddrinfo's order (RFC 6724), duplicates dropped.
class DnsResolver final : public Resolver {
 public:
  DnsResolver(std::string host, std::string port)
      : host_(std::move(host)), port_(std::move(port)) {}
  asio::awaitable<absl::StatusOr<std::vector<Address>>> resolve(
      asio::any_io_executor executor) override {
    asio::ip::tcp::resolver resolver(executor);
    asio::error_code ec;
    auto results = co_await resolver.async_resolve(host_, port_,
                                                   asio::redirect_error(asio::use_awaitable, ec));
    if (ec) {
      co_return absl::UnavailableError(
          absl::StrCat("cannot resolve ", host_, ":", port_, ": ", ec.message()));
    }
    std::vector<Address> out;
    for (const auto& entry : results) {
      Address a;
      a.tcp = entry.endpoint();
      if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(std::move(a));
    }
    if (out.empty()) co_return absl::UnavailableError(absl::StrCat("no address for ", host_));
    co_return out;
  }

 private:
  std::string host_;
  std::string port_;
};

}  // namespace

std::shared_ptr<Resolver> make_static_resolver(std::vector<Address> addresses) {
  return std::make_shared<StaticResolver>(std::move(addresses));
}

namespace {

std::mutex schemes_mutex;
// Never destroyed: channels may be made while static destructors run.
std::map<std::string, ResolverFactory, std::less<>>& registered_schemes() {
  static auto* schemes = new std::map<std::string, ResolverFactory, std::less<>>;
  return *schemes;
}

}  // namespace

void register_resolver_scheme(std::string_view scheme, ResolverFactory factory) {
  std::lock_guard lock(schemes_mutex);
  registered_schemes()[std::string(scheme)] = std::move(factory);
}

namespace detail {
namespace {

// ipv4:a:p,b:p / ipv6:[a]:p,[b]:p: each element must be a literal of the scheme's family.
absl::StatusOr<ResolvedTarget> literal_list(std::string_view target, std::string_view scheme) {
  std::string_view rest = target.substr(scheme.size());
  const bool v6 = scheme == "ipv6:";
  std::vector<Address> addresses;
  ResolvedTarget out;
  while (true) {
    const std::size_t comma = rest.find(',');
    const std::string_view element = rest.substr(0, comma);
    absl::StatusOr<Target> one = parse_target(absl::StrCat(to_absl(scheme), to_absl(element)));
    if (!one.ok()) return one.status();
    asio::error_code ec;
    const asio::ip::address ip = asio::ip::make_address(one->host, ec);
    if (ec || ip.is_v6() != v6) {
      return bad_target(target, absl::StrCat("'", to_absl(element), "' is not an ",
                                             v6 ? "IPv6" : "IPv4", " address"));
    }
    Address a;
    a.tcp = asio::ip::tcp::endpoint(ip, static_cast<unsigned short>(std::stoul(one->port)));
    addresses.push_back(std::move(a));
    if (out.authority.empty()) {
      out.authority = one->authority;
      out.tls_host = one->host;
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  out.resolver = make_static_resolver(std::move(addresses));
  return out;
}

}  // namespace

absl::StatusOr<ResolvedTarget> resolver_for_target(std::string_view target) {
  if (const std::size_t colon = target.find(':'); colon != std::string_view::npos) {
    ResolverFactory factory;
    {
      std::lock_guard lock(schemes_mutex);
      const auto& schemes = registered_schemes();
      if (auto it = schemes.find(target.substr(0, colon)); it != schemes.end())
        factory = it->second;
    }
    if (factory) {
      absl::StatusOr<std::shared_ptr<Resolver>> resolver = factory(target);
      if (!resolver.ok()) return bad_target(target, to_std(resolver.status().message()));
      if (*resolver == nullptr) return bad_target(target, "its scheme's factory made no resolver");
      // scheme:[//authority]/path: the default :authority is the path.
      std::string_view path = target.substr(colon + 1);
      if (path.substr(0, 2) == "//") {
        const std::size_t slash = path.find('/', 2);
        path = slash == std::string_view::npos ? std::string_view() : path.substr(slash);
      }
      while (!path.empty() && path.front() == '/') path.remove_prefix(1);
      ResolvedTarget out;
      out.resolver = *std::move(resolver);
      out.authority = std::string(path);
      out.tls_host = out.authority;
      return out;
    }
  }
  for (std::string_view scheme : {std::string_view("ipv4:"), std::string_view("ipv6:")}) {
    if (target.substr(0, scheme.size()) == scheme) return literal_list(target, scheme);
  }
  absl::StatusOr<Target> parsed = parse_target(target);
  if (!parsed.ok()) return parsed.status();
  ResolvedTarget out;
  out.authority = parsed->authority;
  if (!parsed->unix_path.empty()) {
    Address a;
    a.unix_path = parsed->unix_path;
    out.resolver = make_static_resolver({std::move(a)});
    out.tls_host = parsed->authority;
    return out;
  }
  if (!parsed->dns_authority.empty()) {
    // asio resolves through getaddrinfo, which asks the servers of /etc/resolv.conf and cannot
    // be pointed at another: refusing beats silently asking the wrong server.
    return absl::UnimplementedError(absl::StrCat(
        "target '", to_absl(target), "': asking the DNS server '", to_absl(parsed->dns_authority),
        "' is not supported (ferry's dns resolver uses the system's resolver, getaddrinfo); use "
        "dns:///host:port or plug a Resolver (ChannelOptions::resolver)"));
  }
  out.tls_host = parsed->host;
  out.resolver = std::make_shared<DnsResolver>(parsed->host, parsed->port);
  return out;
}

}  // namespace detail
}  // namespace ferry
