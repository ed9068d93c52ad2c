// The built-in resolvers a channel's target names (client layer, private): dns: and plain host
// names (every A/AAAA record, through asio's asynchronous resolver, off the I/O thread), ipv4: and
// ipv6: lists of literal addresses ("ipv4:10.0.0.1:50051,10.0.0.2:50051"), unix: and
// unix-abstract: (one socket). Parsing the forms is target.h's job; this picks the resolver.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "ferry/resolver.h"

namespace ferry::detail {

struct ResolvedTarget {
  std::shared_ptr<Resolver> resolver;
  std::string authority;  // the default :authority (a list's: its first address)
  std::string tls_host;   // the name a server certificate must carry
};

// INVALID_ARGUMENT for a target that does not parse, saying why; UNIMPLEMENTED for
// dns://dnsserver/host (a chosen DNS server: the system resolver under asio cannot be told one).
absl::StatusOr<ResolvedTarget> resolver_for_target(std::string_view target);

}  // namespace ferry::detail
