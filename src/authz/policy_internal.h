// ferry::authz's compiled policy (private): the matchers a parsed gRFC A43 policy becomes
// (src/authz/policy.cc), shared with the interceptor (src/authz/authz.cc).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "ferry/authz.h"

namespace ferry {

class Metadata;
struct PeerIdentity;

namespace authz_detail {

// Whether n bytes at a and b are equal, inline: a call usually compares its method or a name
// with many rules' patterns that differ early, and libc's memcmp through the PLT was a third of
// a 50-rule evaluation.
inline bool bytes_equal(const char* a, const char* b, std::size_t n) {
  const auto load8 = [](const char* p) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
  };
  const auto load4 = [](const char* p) {
    std::uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  };
  if (n >= 8) {
    if (load8(a) != load8(b) || load8(a + n - 8) != load8(b + n - 8)) return false;
    return n <= 16 || std::memcmp(a + 8, b + 8, n - 16) == 0;
  }
  if (n >= 4) return load4(a) == load4(b) && load4(a + n - 4) == load4(b + n - 4);
  for (std::size_t i = 0; i < n; ++i) {
    if (a[i] != b[i]) return false;
  }
  return true;
}

// The names an authenticated peer is matched by (A41): its URI SANs if it has any, else its DNS
// SANs if any, else its subject; none for an unauthenticated peer. Chosen once per call.
struct PeerNames {
  const std::string* begin = nullptr;
  const std::string* end = nullptr;
  bool authenticated() const { return begin != nullptr; }
};
PeerNames peer_names(const PeerIdentity* peer);

// grpc-go's string matchers as the policy language makes them.
struct StringMatch {
  enum class Kind : std::uint8_t {
    kExact,
    kPrefix,        // "x*"
    kSuffix,        // "*x"
    kNonEmptyLine,  // "*": the regexp ".+", anchored (no newline)
  };
  Kind kind = Kind::kExact;
  std::string text;
  bool matches(std::string_view value) const {
    const std::size_t n = text.size();
    switch (kind) {
      case Kind::kExact:
        return value.size() == n && bytes_equal(value.data(), text.data(), n);
      case Kind::kPrefix:
        return value.size() >= n && bytes_equal(value.data(), text.data(), n);
      case Kind::kSuffix:
        return value.size() >= n && bytes_equal(value.data() + value.size() - n, text.data(), n);
      case Kind::kNonEmptyLine:
        return !value.empty() && value.find('\n') == std::string_view::npos;
    }
    return false;
  }
};

// One entry of a rule's request.headers: any of values against key's values joined with ",".
struct HeaderMatch {
  std::string key;  // lowercase
  std::vector<StringMatch> values;
  bool matches(const Metadata& md) const;
};

struct Rule {
  std::string name;
  std::string qualified_name;           // "<policy>_<name>", grpc-go's name for audit logs
  std::vector<StringMatch> principals;  // any; none: any peer
  std::vector<StringMatch> paths;       // any; none: any method
  std::vector<HeaderMatch> headers;     // all
  // What the index found to hold already, so matches() skips it.
  enum class Known : std::uint8_t { kNothing, kPath, kPrincipal };
  bool matches(std::string_view method, const Metadata& md, PeerNames peer, Known known) const;
};

// The index's hash and equality: a hash of the length and the first and last 8 bytes, inline.
// abseil's string hash through its shared library was a third of an evaluation; the keys are
// the policy's own patterns, and a collision only costs a comparison.
struct PatternHash {
  using is_transparent = void;
  std::size_t operator()(std::string_view s) const {
    std::uint64_t a = 0;
    std::uint64_t b = 0;
    if (s.size() >= 8) {
      std::memcpy(&a, s.data(), 8);
      std::memcpy(&b, s.data() + s.size() - 8, 8);
    } else if (!s.empty()) {  // an empty view may have no data at all
      std::memcpy(&a, s.data(), s.size());
    }
    std::uint64_t h = (a ^ (s.size() * 0x9e3779b97f4a7c15ULL)) * 0xff51afd7ed558ccdULL;
    h ^= (b + (h >> 29)) * 0xc4ceb9fe1a85ec53ULL;
    return static_cast<std::size_t>(h ^ (h >> 32));
  }
};
struct PatternEq {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const {
    return a.size() == b.size() && bytes_equal(a.data(), b.data(), a.size());
  }
};

// Rule ids by the patterns (exact, prefix or suffix) of one of their conditions: lookup() hands
// each list of rules one of whose patterns matches value, by one hash lookup for the exact
// patterns and one per length of prefix (suffix) pattern.
struct PatternIndex {
  using Rules = std::vector<std::uint32_t>;  // ascending
  using ByText = absl::flat_hash_map<std::string, Rules, PatternHash, PatternEq>;
  ByText exact;
  std::vector<std::pair<std::size_t, ByText>> prefixes;  // by pattern length
  std::vector<std::pair<std::size_t, ByText>> suffixes;
  void add(const StringMatch& m, std::uint32_t rule);
  bool empty() const { return exact.empty() && prefixes.empty() && suffixes.empty(); }
  template <class Each>
  void lookup(std::string_view value, Each&& each) const;
};

// A list of rules (deny or allow) in the policy's order, compiled for a call to try few of them:
// a rule whose paths are all exact, prefix or suffix patterns is indexed by path, else one whose
// principals are by principal, else it is scanned. A call gathers the rules its method and its
// names find in the indexes, merges them with the scanned ones in the policy's order, and checks
// those only: a 50-rule policy costs a few hash lookups rather than 50 rules' comparisons.
struct RuleSet {
  std::vector<Rule> rules;
  std::vector<Rule::Known> keyed_by;  // per rule: the condition it is indexed by
  PatternIndex by_path;
  PatternIndex by_principal;
  std::vector<std::uint32_t> scanned;  // ascending
  void index();
  const Rule* first_match(std::string_view method, const Metadata& md, PeerNames peer) const;
  // Every rule in order, no index: what first_match must agree with (the fuzzer checks).
  const Rule* first_match_linear(std::string_view method, const Metadata& md, PeerNames peer) const;
};

bool principal_matches(const std::vector<StringMatch>& principals, PeerNames peer);

// JSON string quoting for the stdout logger.
void append_json_string(std::string& out, std::string_view s);

}  // namespace authz_detail

struct AuthorizationPolicy::Compiled {
  authz_detail::RuleSet deny;
  authz_detail::RuleSet allow;
};

namespace authz_detail {

struct Access {
  static const AuthorizationPolicy::Compiled& compiled(const AuthorizationPolicy& p) {
    return *p.compiled_;
  }
};

// evaluate() without the indexes: every rule tried in order. The tests and the fuzzer hold
// evaluate() to it.
inline AuthorizationDecision evaluate_linear(const AuthorizationPolicy& policy,
                                             std::string_view method, const Metadata& md,
                                             const PeerIdentity* peer) {
  const AuthorizationPolicy::Compiled& c = Access::compiled(policy);
  const PeerNames names = peer_names(peer);
  if (const Rule* r = c.deny.first_match_linear(method, md, names)) {
    return {false, r->name, r->qualified_name};
  }
  if (const Rule* r = c.allow.first_match_linear(method, md, names)) {
    return {true, r->name, r->qualified_name};
  }
  return {false, {}, {}};
}

}  // namespace authz_detail

}  // namespace ferry
