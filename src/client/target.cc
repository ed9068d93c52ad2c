// Implementation of src/client/target.h.
#include "client/target.h"

#include "absl/strings/str_cat.h"
#include "common/strings.h"

namespace ferry::detail {

absl::Status bad_target(std::string_view target, std::string_view why) {
  return absl::InvalidArgumentError(
      absl::StrCat("bad target '", to_absl(target), "': ", to_absl(why)));
}

namespace {

bool consume_prefix(std::string_view& s, std::string_view prefix) {
  if (s.substr(0, prefix.size()) != prefix) return false;
  s.remove_prefix(prefix.size());
  return true;
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

absl::StatusOr<std::string> percent_decode_target(std::string_view target, std::string_view part) {
  std::string out;
  out.reserve(part.size());
  for (std::size_t i = 0; i < part.size(); ++i) {
    if (part[i] != '%') {
      out += part[i];
      continue;
    }
    // RFC 3986 §2.1: '%' is always followed by two hex digits ("%25" for a '%' itself).
    const int high = i + 2 < part.size() ? hex_value(part[i + 1]) : -1;
    const int low = high >= 0 ? hex_value(part[i + 2]) : -1;
    if (low < 0) {
      return bad_target(target,
                        absl::StrCat("a malformed percent-escape '", to_absl(part.substr(i, 3)),
                                     "' (RFC 3986: '%' and two hex digits; write '%' as %25)"));
    }
    out += static_cast<char>(high * 16 + low);
    i += 2;
  }
  return out;
}

// dns://authority/: a DNS server as host[:port], the port 53 when absent.
static bool valid_dns_server(std::string_view authority) {
  const bool bracketed = authority.front() == '[';
  const std::size_t close = bracketed ? authority.find(']') : 0;
  if (close == std::string_view::npos) return false;
  const std::string with_port = authority.find(':', close) == std::string_view::npos
                                    ? absl::StrCat(to_absl(authority), ":53")
                                    : std::string(authority);
  absl::StatusOr<Target> server = parse_target(with_port);
  // A scheme inside (dns:, unix:, ipv4:) shows as an authority other than what was written.
  return server.ok() && server->unix_path.empty() && server->authority == with_port;
}

std::string canonical_target(std::string_view target) {
  for (std::string_view scheme : {"dns:", "unix:", "unix-abstract:", "ipv4:", "ipv6:"}) {
    if (target.substr(0, scheme.size()) == scheme) return std::string(target);
  }
  return absl::StrCat("dns:///", to_absl(target));
}

absl::StatusOr<Target> parse_target(std::string_view target) {
  std::string_view rest = target;
  if (consume_prefix(rest, "unix-abstract:")) {
    // Any bytes, even none or NUL, name an abstract socket; at most 106 of them fit (asio's
    // endpoint holds 107 bytes, the leading NUL included; a longer name threw there and left the
    // channel CONNECTING for ever).
    absl::StatusOr<std::string> name = percent_decode_target(target, rest);
    if (!name.ok()) return name.status();
    if (name->size() > 106)
      return bad_target(target, "the abstract name is too long (over 106 bytes)");
    Target out;
    out.unix_path = std::string(1, '\0') + *name;
    out.authority = "localhost";
    return out;
  }
  if (consume_prefix(rest, "unix:")) {
    // unix:path (relative or absolute) or unix://absolute_path (no authority).
    if (consume_prefix(rest, "//") && (rest.empty() || rest.front() != '/')) {
      return bad_target(target, "unix:// needs an absolute path (unix:///path)");
    }
    absl::StatusOr<std::string> path = percent_decode_target(target, rest);
    if (!path.ok()) return path.status();
    if (path->empty()) return bad_target(target, "no path");
    if (path->size() > 107) return bad_target(target, "the path is too long for a Unix socket");
    if (path->find('\0') != std::string::npos) return bad_target(target, "NUL in the path");
    Target out;
    out.unix_path = *std::move(path);
    out.authority = "localhost";
    return out;
  }
  const bool literal = consume_prefix(rest, "ipv4:") || consume_prefix(rest, "ipv6:");
  std::string_view dns_authority;
  if (!literal && consume_prefix(rest, "dns:")) {
    // dns:[//authority/]host[:port]: an empty authority means the system's DNS servers.
    if (consume_prefix(rest, "//")) {
      const std::size_t slash = rest.find('/');
      if (slash == std::string_view::npos)
        return bad_target(target, "dns://authority needs a '/host'");
      dns_authority = rest.substr(0, slash);
      rest.remove_prefix(slash + 1);
      if (!dns_authority.empty() && !valid_dns_server(dns_authority)) {
        return bad_target(target, "the DNS server authority is not host[:port]");
      }
    } else {
      // dns:/host:port: RFC 3986 reads "/host:port" as the path, and gRPC (C++ and Go alike)
      // takes the host from the path without its leading '/' (it was the host "/host").
      consume_prefix(rest, "/");
    }
  }
  // The host and port are a URI's path: percent-decoded (RFC 3986 §2.1, as gRPC decodes them),
  // so an IPv6 zone is written "%25" ("[fe80::1%25eth0]:80"), the RFC 6874 form.
  absl::StatusOr<std::string> decoded = percent_decode_target(target, rest);
  if (!decoded.ok()) return decoded.status();
  rest = *decoded;
  if (rest.empty()) return bad_target(target, "no host");

  Target out;
  out.dns_authority = std::string(dns_authority);
  out.authority = std::string(rest);
  std::string_view host = rest;
  std::string_view port;
  if (rest.front() == '[') {
    const std::size_t close = rest.find(']');
    if (close == std::string_view::npos) return bad_target(target, "unterminated '['");
    host = rest.substr(1, close - 1);
    std::string_view after = rest.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return bad_target(target, "junk after ']'");
      port = after.substr(1);
    }
  } else if (const std::size_t colon = rest.rfind(':'); colon != std::string_view::npos) {
    if (rest.find(':') != colon) {
      return bad_target(target, "an IPv6 address needs brackets: [addr]:port");
    }
    host = rest.substr(0, colon);
    port = rest.substr(colon + 1);
  }
  if (host.empty()) return bad_target(target, "no host");
  if (port.empty()) {
    if (rest.back() == ':') return bad_target(target, "empty port");
    port = "443";
  }
  for (char c : port) {
    if (c < '0' || c > '9') return bad_target(target, "the port is not a number");
  }
  if (port.size() > 5 || std::stoul(std::string(port)) > 65535) {
    return bad_target(target, "the port is out of range");
  }
  out.host = std::string(host);
  out.port = std::string(port);
  return out;
}

}  // namespace ferry::detail
