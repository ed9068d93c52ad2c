// libFuzzer target: gRFC A43 authorization policies (ferry/authz.h, src/authz/policy.cc), read
// from arbitrary text: a policy is refused with INVALID_ARGUMENT or accepted without crashing,
// and an accepted one decides a few calls (cleartext and three kinds of certificate, with and
// without metadata) the same way twice, and as every rule tried in order without the indexes
// would, naming a rule whenever it allows and the rule's qualified name as "<policy>_<rule>".
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "authz/policy_internal.h"
#include "ferry/authz.h"
#include "ferry/metadata.h"
#include "ferry/tls.h"
#include "fuzz_check.h"

namespace {

const ferry::PeerIdentity kUris{"CN=c,O=o", {"c.test"}, {"spiffe://t/ns/a/sa/b", "https://x/id"}};
const ferry::PeerIdentity kDns{"CN=d", {"d.test", "e.test"}, {}};
const ferry::PeerIdentity kSubject{"CN=s,OU=u,O=o", {}, {}};
const ferry::PeerIdentity* const kPeers[] = {nullptr, &kUris, &kDns, &kSubject};
const char* const kMethods[] = {"/a.B/C", "/pkg.Svc/Get", "", "/x", "/a.B/CD", "/a"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto policy = ferry::AuthorizationPolicy::parse(text);
  if (!policy.ok()) {
    FUZZ_CHECK(policy.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  const ferry::AuthorizationPolicy& p = **policy;
  FUZZ_CHECK(!p.name().empty() && p.allow_rule_count() > 0);
  ferry::Metadata none;
  ferry::Metadata some;
  some.add("x-team", "ops");
  some.add("x-team", "");
  some.add("user-agent", "ferry/0.1");
  some.add("k-bin", std::string("a\nb\0c", 5));
  for (const ferry::PeerIdentity* peer : kPeers) {
    for (const char* method : kMethods) {
      for (const ferry::Metadata* md : {&none, &some}) {
        const ferry::AuthorizationDecision a = p.evaluate(method, *md, peer);
        const ferry::AuthorizationDecision b = p.evaluate(method, *md, peer);
        FUZZ_CHECK(a.allowed == b.allowed && a.rule == b.rule);
        const ferry::AuthorizationDecision linear =
            ferry::authz_detail::evaluate_linear(p, method, *md, peer);
        FUZZ_CHECK(a.allowed == linear.allowed && a.rule == linear.rule);
        if (a.allowed) FUZZ_CHECK(!a.rule.empty());
        if (!a.rule.empty()) {
          FUZZ_CHECK(a.qualified_rule == p.name() + "_" + std::string(a.rule));
        }
      }
    }
  }
  return 0;
}
