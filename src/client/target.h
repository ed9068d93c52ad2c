// Parsing a channel's target string (client layer, private), after gRPC's naming document:
//   host:port, host (port 443), [v6addr]:port       plain host names and addresses
//   dns:host:port, dns:///host:port                  DNS names
//   dns://dnsserver[:port]/host:port                 a DNS name to ask one DNS server about:
//                                                    parsed (dns_authority), but the built-in
//                                                    resolver cannot do it (target_resolver.h)
//   ipv4:addr:port, ipv6:[addr]:port                 one literal address
//   unix:path, unix:///absolute/path                 a Unix domain socket (authority localhost)
//   unix-abstract:name                               Linux's abstract socket namespace
// Address lists come with their own resolvers. The part after the scheme (the host and port, a
// path, an abstract name) is percent-decoded as RFC 3986 says and gRPC does: "%20" is a space,
// "%25" a '%' (an IPv6 zone: "ipv6:[fe80::1%25eth0]:80"), "%00" a NUL (abstract names only); a
// '%' without two hex digits after it is refused. dns:/host:port (one slash) is host:port.
#pragma once

#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace ferry::detail {

struct Target {
  std::string host;       // without brackets: "::1", "example.com"
  std::string port;       // "50051"; "443" when the target names none
  std::string authority;  // what :authority says by default: host[:port] as the target wrote it
  // A Unix domain socket's path (host and port empty); an abstract name starts with '\0'.
  std::string unix_path;
  // dns://dns_authority/host: the DNS server to ask ("8.8.8.8:53", "[::1]:53", "ns1:53"; the
  // port defaults to 53); empty for the system's servers.
  std::string dns_authority;
};

// INVALID_ARGUMENT "bad target '<target>': <why>", the words of every target error.
absl::Status bad_target(std::string_view target, std::string_view why);

// part (of target) percent-decoded; INVALID_ARGUMENT naming a malformed escape.
absl::StatusOr<std::string> percent_decode_target(std::string_view target, std::string_view part);

// INVALID_ARGUMENT for a target ferry cannot use, saying why.
absl::StatusOr<Target> parse_target(std::string_view target);

// The target as gRFC A66's grpc.target label names it (the "canonicalized target URI"): a target
// with one of the schemes above stays as written, any other gets the default scheme,
// "dns:///" + target ("localhost:50051" -> "dns:///localhost:50051").
std::string canonical_target(std::string_view target);

}  // namespace ferry::detail
