// gRFC A43 policies (ferry/authz.h), in one process: what each matcher matches (principals by
// URI SAN, then DNS SAN, then subject; paths and headers exact, prefix, suffix and "*"; header
// values joined), the order of deny and allow rules, the names a decision reports, and every
// malformed policy grpc-go refuses, refused with the field named.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "authz/policy_internal.h"
#include "ferry/authz.h"
#include "ferry/metadata.h"
#include "ferry/tls.h"
#include "support/sanitized.h"

namespace ferry::authz_policy_test {
namespace {

std::shared_ptr<const AuthorizationPolicy> parse(const std::string& json) {
  auto p = AuthorizationPolicy::parse(json);
  EXPECT_TRUE(p.ok()) << p.status() << "\n" << json;
  return p.ok() ? *p : nullptr;
}

PeerIdentity client_cert() {  // test/certs/client.pem
  return {"CN=ferry test client,O=ferry test",
          {"client.ferry.test"},
          {"spiffe://ferry.test/ns/default/sa/client"}};
}
PeerIdentity dns_only() {
  return {"CN=dns client,O=ferry test", {"a.ferry.test", "b.ferry.test"}, {}};
}
PeerIdentity subject_only() { return {"CN=subject client,O=ferry test", {}, {}}; }

struct Call {
  std::string method = "/pkg.Svc/Get";
  Metadata md;
  const PeerIdentity* peer = nullptr;
};

std::string decide(const AuthorizationPolicy& p, const Call& c) {
  AuthorizationDecision d = p.evaluate(c.method, c.md, c.peer);
  // The indexes find what trying every rule in order finds.
  AuthorizationDecision linear = authz_detail::evaluate_linear(p, c.method, c.md, c.peer);
  EXPECT_EQ(d.allowed, linear.allowed) << c.method;
  EXPECT_EQ(d.rule, linear.rule) << c.method;
  return std::string(d.allowed ? "allow:" : "deny:") + std::string(d.rule);
}

TEST(AuthzPolicy, DenyRulesComeFirstThenAllowAndNothingElseIsAllowed) {
  auto p = parse(R"({"name":"authz",
    "deny_rules":[{"name":"no_admin","request":{"paths":["/pkg.Admin/*"]}}],
    "allow_rules":[{"name":"all_pkg","request":{"paths":["/pkg.*"]}},
                   {"name":"get","request":{"paths":["/pkg.Svc/Get"]}}]})");
  ASSERT_NE(p, nullptr);
  Call c;
  EXPECT_EQ(decide(*p, c), "allow:all_pkg");  // first matching allow rule, in the file's order
  c.method = "/pkg.Admin/Drop";
  EXPECT_EQ(decide(*p, c), "deny:no_admin");  // matches an allow rule too: deny wins
  c.method = "/other.Svc/Get";
  EXPECT_EQ(decide(*p, c), "deny:");
  AuthorizationDecision d = p->evaluate("/pkg.Admin/Drop", c.md, nullptr);
  EXPECT_EQ(d.qualified_rule, "authz_no_admin");
  EXPECT_EQ(p->name(), "authz");
  EXPECT_EQ(p->deny_rule_count(), 1u);
  EXPECT_EQ(p->allow_rule_count(), 2u);
}

TEST(AuthzPolicy, PathMatchers) {
  auto p = parse(R"({"name":"p","allow_rules":[
    {"name":"exact","request":{"paths":["/a.B/C"]}},
    {"name":"prefix","request":{"paths":["/a.P/*"]}},
    {"name":"suffix","request":{"paths":["*/Watch"]}},
    {"name":"two","request":{"paths":["/x.Y/One","/x.Y/Two"]}}]})");
  ASSERT_NE(p, nullptr);
  Call c;
  for (auto [method, want] :
       std::vector<std::pair<std::string, std::string>>{{"/a.B/C", "allow:exact"},
                                                        {"/a.B/CD", "deny:"},
                                                        {"/a.b/C", "deny:"},
                                                        {"/a.P/", "allow:prefix"},
                                                        {"/a.P/Q", "allow:prefix"},
                                                        {"/a.PQ", "deny:"},
                                                        {"/s.T/Watch", "allow:suffix"},
                                                        {"/Watch", "allow:suffix"},
                                                        {"Watch", "deny:"},
                                                        {"/x.Y/Two", "allow:two"},
                                                        {"/x.Y/One", "allow:two"},
                                                        {"/x.Y/Three", "deny:"},
                                                        {"", "deny:"}}) {
    c.method = method;
    EXPECT_EQ(decide(*p, c), want) << method;
  }
  // "*" is any non-empty path.
  auto any = parse(R"({"name":"p","allow_rules":[{"name":"any","request":{"paths":["*"]}}]})");
  c.method = "/a.B/C";
  EXPECT_EQ(decide(*any, c), "allow:any");
  c.method = "";
  EXPECT_EQ(decide(*any, c), "deny:");
}

TEST(AuthzPolicy, PrincipalsMatchUriSansThenDnsSansThenTheSubject) {
  auto p = parse(R"({"name":"p","allow_rules":[
    {"name":"spiffe","source":{"principals":["spiffe://ferry.test/ns/default/*"]}},
    {"name":"dns","source":{"principals":["*.ferry.test"]}},
    {"name":"subject","source":{"principals":["CN=subject client,O=ferry test"]}}]})");
  ASSERT_NE(p, nullptr);
  const PeerIdentity client = client_cert(), dns = dns_only(), subject = subject_only();
  Call c;
  c.peer = &client;
  EXPECT_EQ(decide(*p, c), "allow:spiffe");
  c.peer = &dns;
  EXPECT_EQ(decide(*p, c), "allow:dns");
  c.peer = &subject;
  EXPECT_EQ(decide(*p, c), "allow:subject");
  c.peer = nullptr;
  EXPECT_EQ(decide(*p, c), "deny:");

  // A certificate with URI SANs is matched by them only: its DNS SAN and subject are not
  // consulted (grpc-go, A41).
  auto by_dns = parse(R"({"name":"p","allow_rules":[
    {"name":"dns","source":{"principals":["client.ferry.test","CN=ferry test client,O=ferry test"]}}]})");
  c.peer = &client;
  EXPECT_EQ(decide(*by_dns, c), "deny:");
  c.peer = &dns;
  EXPECT_EQ(decide(*by_dns, c), "deny:");  // DNS SANs but not this one; subject not consulted
}

TEST(AuthzPolicy, StarIsAnyAuthenticatedPeerAndNoPrincipalsIsAnyPeer) {
  auto star =
      parse(R"({"name":"p","allow_rules":[{"name":"authn","source":{"principals":["*"]}}]})");
  auto none = parse(R"({"name":"p","allow_rules":[{"name":"anyone"}]})");
  const PeerIdentity client = client_cert();
  Call c;
  EXPECT_EQ(decide(*star, c), "deny:");  // cleartext, or TLS without a client certificate
  EXPECT_EQ(decide(*none, c), "allow:anyone");
  c.peer = &client;
  EXPECT_EQ(decide(*star, c), "allow:authn");
  // Suffix and exact principals.
  auto suffix =
      parse(R"({"name":"p","allow_rules":[{"name":"s","source":{"principals":["*/sa/client"]}}]})");
  EXPECT_EQ(decide(*suffix, c), "allow:s");
  auto exact = parse(
      R"({"name":"p","allow_rules":[{"name":"e","source":{"principals":["spiffe://ferry.test/ns/default/sa/clien"]}}]})");
  EXPECT_EQ(decide(*exact, c), "deny:");
}

TEST(AuthzPolicy, HeadersAreAllRequiredEachAnyValueOverTheJoinedValues) {
  auto p = parse(R"({"name":"p","allow_rules":[{"name":"h","request":{"headers":[
      {"key":"X-Team","values":["ops","dev*"]},
      {"key":"x-env","values":["*-prod"]}]}}]})");
  ASSERT_NE(p, nullptr);
  Call c;
  EXPECT_EQ(decide(*p, c), "deny:");
  c.md.add("x-team", "ops");
  EXPECT_EQ(decide(*p, c), "deny:");  // x-env missing
  c.md.add("x-env", "eu-prod");
  EXPECT_EQ(decide(*p, c), "allow:h");
  // A repeated key is one value joined with ",": "ops,sre" is neither "ops" nor "dev*".
  c.md.add("x-team", "sre");
  EXPECT_EQ(decide(*p, c), "deny:");
  Call d;
  d.md.add("x-team", "devs");
  d.md.add("x-env", "eu");
  d.md.add("x-env", "us-prod");  // "eu,us-prod" ends with "-prod"
  EXPECT_EQ(decide(*p, d), "allow:h");

  auto exact_joined = parse(R"({"name":"p","allow_rules":[{"name":"j","request":{"headers":[
      {"key":"k","values":["a,b"]}]}}]})");
  Call e;
  e.md.add("k", "a");
  e.md.add("k", "b");
  EXPECT_EQ(decide(*exact_joined, e), "allow:j");
  Call f;
  f.md.add("k", "a,b");
  EXPECT_EQ(decide(*exact_joined, f), "allow:j");
  Call g;
  g.md.add("k", "a,");
  g.md.add("k", "b");
  EXPECT_EQ(decide(*exact_joined, g), "deny:");

  auto star = parse(R"({"name":"p","allow_rules":[{"name":"s","request":{"headers":[
      {"key":"k","values":["*"]}]}}]})");
  Call empty;
  empty.md.add("k", "");
  EXPECT_EQ(decide(*star, empty), "deny:");  // ".+" wants a character
  empty.md.add("k", "");
  EXPECT_EQ(decide(*star, empty), "allow:s");  // ",": one
  Call bin;
  bin.md.add("k-bin", "a\nb");
  auto star_bin = parse(R"({"name":"p","allow_rules":[{"name":"s","request":{"headers":[
      {"key":"k-bin","values":["*"]}]}}]})");
  EXPECT_EQ(decide(*star_bin, bin), "deny:");  // '.' matches no newline
}

TEST(AuthzPolicy, ARuleMatchesWhenSourceAndRequestDo) {
  auto p = parse(R"({"name":"p","allow_rules":[{"name":"r",
      "source":{"principals":["*"]},
      "request":{"paths":["/a.B/C"],"headers":[{"key":"k","values":["v"]}]}}]})");
  const PeerIdentity client = client_cert();
  Call c;
  c.method = "/a.B/C";
  c.md.add("k", "v");
  EXPECT_EQ(decide(*p, c), "deny:");
  c.peer = &client;
  EXPECT_EQ(decide(*p, c), "allow:r");
  c.method = "/a.B/D";
  EXPECT_EQ(decide(*p, c), "deny:");
}

TEST(AuthzPolicy, ALaterRuleOfTheSameNameReplacesTheEarlierAsInGrpcGo) {
  auto p = parse(R"({"name":"p","allow_rules":[
      {"name":"r","request":{"paths":["/a.B/C"]}},
      {"name":"r","request":{"paths":["/a.B/D"]}}]})");
  EXPECT_EQ(p->allow_rule_count(), 1u);
  Call c;
  c.method = "/a.B/C";
  EXPECT_EQ(decide(*p, c), "deny:");
  c.method = "/a.B/D";
  EXPECT_EQ(decide(*p, c), "allow:r");
}

TEST(AuthzPolicy, FieldNamesMatchCaseInsensitivelyAndNullIsAbsentAsInGo) {
  auto p = parse(R"({"NAME":"p","Allow_Rules":[{"Name":"r","Request":{"Paths":["/a.B/C"]},
      "source":null}],"deny_rules":null})");
  ASSERT_NE(p, nullptr);
  Call c;
  c.method = "/a.B/C";
  EXPECT_EQ(decide(*p, c), "allow:r");
}

TEST(AuthzPolicy, IndexedAndScannedRulesKeepTheFilesOrder) {
  // Rules with exact paths only are looked up by path; the others scanned: the first match in
  // the file's order must win either way.
  std::string json = R"({"name":"p","allow_rules":[)";
  for (int i = 0; i < 30; ++i) {
    if (i > 0) json += ",";
    json += i % 3 == 0 ? R"({"name":"prefix)" + std::to_string(i) +
                             R"(","request":{"paths":["/m.S/*"]},"source":{"principals":["nobody)" +
                             std::to_string(i) + R"("]}})"
                       : R"({"name":"exact)" + std::to_string(i) +
                             R"(","request":{"paths":["/m.S/M)" + std::to_string(i % 5) + R"("]}})";
  }
  json += R"(,{"name":"last","request":{"paths":["/m.S/*"]}}]})";
  auto p = parse(json);
  ASSERT_NE(p, nullptr);
  Call c;
  c.method = "/m.S/M2";
  EXPECT_EQ(decide(*p, c), "allow:exact2");
  c.method = "/m.S/M0";
  EXPECT_EQ(decide(*p, c), "allow:exact5");  // 0 is a prefix rule whose principal fails
  c.method = "/m.S/Other";
  EXPECT_EQ(decide(*p, c), "allow:last");
}

TEST(AuthzPolicy, ACallThatFindsManyIndexedRulesStillGetsTheFirstInOrder) {
  // 100 rules on one path: more than a call gathers on its stack, so it tries every rule.
  std::string json = R"({"name":"p","allow_rules":[)";
  for (int i = 0; i < 100; ++i) {
    json += (i ? "," : "") + std::string(R"({"name":"r)") + std::to_string(i) +
            R"(","request":{"paths":["/a.B/C"],"headers":[{"key":"k","values":[")" +
            std::to_string(i) + R"("]}]}})";
  }
  json += "]}";
  auto p = parse(json);
  ASSERT_NE(p, nullptr);
  for (int i : {0, 63, 64, 99}) {
    Call c;
    c.method = "/a.B/C";
    c.md.add("k", std::to_string(i));
    EXPECT_EQ(decide(*p, c), "allow:r" + std::to_string(i));
  }
  Call none;
  none.method = "/a.B/C";
  EXPECT_EQ(decide(*p, none), "deny:");
}

// Every rule grpc-go's translatePolicy and engine apply at load, with grpc-go's words.
TEST(AuthzPolicy, MalformedPoliciesAreRefusedNamingTheField) {
  struct Case {
    const char* json;
    const char* error;
  };
  const Case cases[] = {
      {R"({"allow_rules":[{"name":"r"}]})", R"("name" is not present)"},
      {R"({"name":"","allow_rules":[{"name":"r"}]})", R"("name" is not present)"},
      {R"({"name":"p"})", R"("allow_rules" is not present)"},
      {R"({"name":"p","allow_rules":[]})", R"("allow_rules" is not present)"},
      {R"({"name":"p","deny_rules":[{"name":"d"}]})", R"("allow_rules" is not present)"},
      {R"({"name":"p","allow_rules":[{}]})", R"("allow_rules" 0: "name" is not present)"},
      {R"({"name":"p","deny_rules":[{"name":"d"},{"source":{}}],"allow_rules":[{"name":"r"}]})",
       R"("deny_rules" 1: "name" is not present)"},
      {R"({"name":"p","allow_rules":[{"name":"r","request":{"headers":[{"values":["v"]}]}}]})",
       R"("allow_rules" 0: "headers" 0: "key" is not present)"},
      {R"({"name":"p","allow_rules":[{"name":"r","request":{"headers":[{"key":"k"}]}}]})",
       R"("allow_rules" 0: "headers" 0: "values" is not present)"},
      {R"({"name":"p","allow_rules":[{"name":"r","request":{"headers":[{"key":"k","values":[]}]}}]})",
       R"("allow_rules" 0: "headers" 0: "values" is not present)"},
      {R"({"name":"p","allow_rules":[{"name":"r","request":{"headers":[{"key":"k","values":["v"]},{"key":":path","values":["v"]}]}}]})",
       R"("allow_rules" 0: "headers" 1: unsupported "key" :path)"},
      {R"({"name":"p","allow_rules":[{"name":"r","request":{"headers":[{"key":":authority","values":["v"]}]}}]})",
       R"(unsupported "key" :authority)"},
      {R"({"name":"p","allow_rules":[{"name":"r","request":{"headers":[{"key":"Host","values":["v"]}]}}]})",
       R"(unsupported "key" host)"},
      {R"({"name":"p","allow_rules":[{"name":"r","request":{"headers":[{"key":"grpc-timeout","values":["v"]}]}}]})",
       R"(unsupported "key" grpc-timeout)"},
      {R"({"name":"p","allow_rules":[{"name":"r","request":{"headers":[{"key":"GRPC-x","values":["v"]}]}}]})",
       R"(unsupported "key" grpc-x)"},
      {R"({"name":"p","allow_rules":[{"name":"r","request":{"headers":[{"key":"te","values":["v"]}]}}]})",
       R"(unsupported "key" te)"},
      {R"({"name":"p","allow_rules":[{"name":"r","request":{"headers":[{"key":"transfer-encoding","values":["v"]}]}}]})",
       R"(unsupported "key" transfer-encoding)"},
      {R"({"name":"p","allow_rules":[{"name":"r","request":{"headers":[{"key":"connection","values":["v"]}]}}]})",
       R"(unsupported "key" connection)"},
      {R"({"name":"p","allow_rules":[{"name":"r","request":{"headers":[{"key":"keep-alive","values":["v"]}]}}]})",
       R"(unsupported "key" keep-alive)"},
      {R"({"name":"p","allow_rules":[{"name":"r","request":{"headers":[{"key":"proxy-authorization","values":["v"]}]}}]})",
       R"(unsupported "key" proxy-authorization)"},
      {R"({"name":"p","allow_rules":[{"name":"r","request":{"headers":[{"key":"proxy-authenticate","values":["v"]}]}}]})",
       R"(unsupported "key" proxy-authenticate)"},
      {R"({"name":"p","allow_rules":[{"name":"r","request":{"headers":[{"key":"trailer","values":["v"]}]}}]})",
       R"(unsupported "key" trailer)"},
      {R"({"name":"p","allow_rules":[{"name":"r","request":{"headers":[{"key":"upgrade","values":["v"]}]}}]})",
       R"(unsupported "key" upgrade)"},
      {R"({"name":"p","allow_rules":[{"name":"r"}],"audit_logging_options":{"audit_condition":"SOMETIMES"}})",
       "failed to parse AuditCondition SOMETIMES. Allowed values"},
      {R"({"name":"p","allow_rules":[{"name":"r"}],"audit_logging_options":{"audit_condition":"on_deny"}})",
       "failed to parse AuditCondition on_deny"},
      {R"({"name":"p","allow_rules":[{"name":"r"}],"audit_logging_options":{"audit_loggers":[{"config":{}}]}})",
       "missing required field: name in audit_logging_options.audit_loggers[0]"},
      {R"({"name":"p","allow_rules":[{"name":"r"}],"audit_logging_options":{"audit_loggers":[{"name":"nope"}]}})",
       "no builder registered for nope"},
      {R"({"name":"p","allow_rules":[{"name":"r"}],"extra":1})",
       R"(unknown field "extra" in policy)"},
      {R"({"name":"p","allow_rules":[{"name":"r","sources":{}}]})",
       R"(unknown field "sources" in allow_rules)"},
      {R"({"name":"p","allow_rules":[{"name":"r","source":{"principal":["x"]}}]})",
       R"(unknown field "principal" in source)"},
      {R"({"name":"p","allow_rules":[{"name":"r","request":{"path":["x"]}}]})",
       R"(unknown field "path" in request)"},
      {R"({"name":"p","allow_rules":[{"name":"r","request":{"headers":[{"key":"k","value":["v"]}]}}]})",
       R"(unknown field "value" in headers[])"},
      {R"({"name":"p","allow_rules":[{"name":"r"}],"audit_logging_options":{"condition":"NONE"}})",
       R"(unknown field "condition" in audit_logging_options)"},
      {R"({"name":1,"allow_rules":[{"name":"r"}]})", R"("name" must be a string, not a number)"},
      {R"({"name":"p","allow_rules":{"name":"r"}})",
       R"("allow_rules" must be an array, not an object)"},
      {R"({"name":"p","allow_rules":[{"name":"r","request":{"paths":"/a.B/C"}}]})",
       R"("paths" must be an array, not a string)"},
      {R"({"name":"p","allow_rules":[{"name":"r","request":{"paths":[1]}}]})",
       R"("paths[]" must be a string, not a number)"},
      {R"({"name":"p","allow_rules":[{"name":"r","source":{"principals":[true]}}]})",
       R"("principals[]" must be a string, not a boolean)"},
      {R"({"name":"p","allow_rules":[{"name":"r"}],"audit_logging_options":{"audit_loggers":[{"name":"stdout_logger","is_optional":"yes"}]}})",
       R"("is_optional" must be a boolean, not a string)"},
      {R"({"name":"p","allow_rules":[{"name":"r"}],"audit_logging_options":{"audit_loggers":[{"name":"stdout_logger","config":[]}]}})",
       R"("config" must be an object, not an array)"},
      {R"([])", R"("policy" must be an object, not an array)"},
      {R"({"name":"p","allow_rules":[{"name":"r"}]} {})", "text after the value"},
      {R"({"name":"p","allow_rules":[{"name":"r"}])", "failed to unmarshal policy"},
      {R"({"name":"p","name":"q","allow_rules":[{"name":"r"}]})", "duplicate member 'name'"},
      {"", "failed to unmarshal policy"},
  };
  for (const Case& c : cases) {
    auto p = AuthorizationPolicy::parse(c.json);
    ASSERT_FALSE(p.ok()) << c.json;
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(p.status().message().find(c.error), std::string_view::npos)
        << p.status() << "\nwanted: " << c.error << "\nfor: " << c.json;
  }
}

TEST(AuthzPolicy, AnOptionalUnknownLoggerIsSkipped) {
  auto p = AuthorizationPolicy::parse(R"({"name":"p","allow_rules":[{"name":"r"}],
      "audit_logging_options":{"audit_condition":"ON_DENY",
      "audit_loggers":[{"name":"nope","is_optional":true},{"name":"stdout_logger"}]}})");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ((*p)->audit_condition(), AuditCondition::kOnDeny);
}

TEST(AuthzPolicy, TheStdoutLoggerEscapesAsGoDoes) {
  const AuditEvent event{"/a.B/C", "", "p<&>\"q", "p<&>\"q_r\n", true};
  ::testing::internal::CaptureStdout();
  make_stdout_audit_logger()->log(event);
  const std::string line = ::testing::internal::GetCapturedStdout();
  const std::string want =
      R"({"grpc_audit_log":{"rpc_method":"/a.B/C","principal":"","policy_name":"p\u003c\u0026\u003e\"q","matched_rule":"p\u003c\u0026\u003e\"q_r\n","authorized":true,"timestamp":")";
  EXPECT_EQ(line.substr(0, want.size()), want) << line;
}

TEST(AuthzPolicy, HugeAndDeepInputIsRefusedQuickly) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_FALSE(AuthorizationPolicy::parse(deep).ok());
  const std::string huge(AuthorizationPolicy::kMaxPolicyBytes + 1, ' ');
  auto p = AuthorizationPolicy::parse(huge);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("over the limit"), std::string_view::npos);
  // An object of 200k members (a 3 MB config; 50k under the sanitizers, ten times slower):
  // refused or read in time linear in its size.
  const int members = ferry::testing::kSanitized ? 50000 : 200000;
  std::string wide =
      R"({"name":"p","allow_rules":[{"name":"r"}],"audit_logging_options":{"audit_loggers":[{"name":"x","is_optional":true,"config":{)";
  for (int i = 0; i < members; ++i) wide += (i ? ",\"k" : "\"k") + std::to_string(i) + "\":0";
  wide += "}}]}}";
  const auto start = std::chrono::steady_clock::now();
  auto w = AuthorizationPolicy::parse(wide);
  EXPECT_TRUE(w.ok()) << w.status();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

}  // namespace
}  // namespace ferry::authz_policy_test
