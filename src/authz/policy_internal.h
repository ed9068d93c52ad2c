// ferry::authz's compiled policy (private): the matchers a parsed gRFC A43 policy becomes
// (src/authz/policy.cc), shared with the interceptor (src/authz/authz.cc).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "ferry/authz.h"

namespace ferry {

class Metadata;
struct PeerIdentity;

namespace authz_detail {

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
  bool matches(std::string_view value) const;
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
  // path_known: the caller found the method among this rule's exact paths already.
  bool matches(std::string_view method, const Metadata& md, const PeerIdentity* peer,
               bool path_known) const;
};

// A list of rules (deny or allow) in the policy's order, with the rules whose paths are all
// exact indexed by path: a call looks its method up once instead of comparing it to every path.
struct RuleSet {
  std::vector<Rule> rules;
  absl::flat_hash_map<std::string, std::vector<std::uint32_t>> by_path;  // ascending
  std::vector<std::uint32_t> scanned;                                    // the others, ascending
  void index();
  const Rule* first_match(std::string_view method, const Metadata& md,
                          const PeerIdentity* peer) const;
};

bool principal_matches(const std::vector<StringMatch>& principals, const PeerIdentity* peer);

// JSON string quoting for the stdout logger.
void append_json_string(std::string& out, std::string_view s);

}  // namespace authz_detail

struct AuthorizationPolicy::Compiled {
  authz_detail::RuleSet deny;
  authz_detail::RuleSet allow;
};

}  // namespace ferry
