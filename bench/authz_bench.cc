// The cost of an authorization policy per call (ferry/authz.h): AuthorizationPolicy::evaluate
// for a call against policies of 1 and 50 rules, with the metadata and client certificate a real
// call carries, and the heap allocations per call (alloc_counter.cc; must be 0). Baseline in the
// same binary: the one-rule policy. The interceptor adds to this one shared_ptr copy (the policy
// kept for the call) and two relaxed counters.
#include <benchmark/benchmark.h>

#include <string>

#include "alloc_counter.h"
#include "ferry/authz.h"
#include "ferry/metadata.h"
#include "ferry/tls.h"

namespace {

const ferry::PeerIdentity kClient{"CN=ferry test client,O=ferry test",
                                  {"client.ferry.test"},
                                  {"spiffe://ferry.test/ns/default/sa/client"}};

ferry::Metadata real_metadata() {
  ferry::Metadata md;
  md.add("user-agent", "grpc-java-netty/1.68.1");
  md.add("x-request-id", "4bf92f3577b34da6a3ce929d0e0e4736");
  md.add("x-team", "payments");
  return md;
}

// 10 deny rules the call misses (principals of other workloads, a header it lacks), then 40
// allow rules: `exact` of them on exact paths of other services, the others on path prefixes
// with principals and headers, the last one the call's. With `indexable` false, none has a
// path or principal the index can use ("*" principals, no paths): all 50 are tried in turn.
std::string fifty_rules(int exact, bool indexable = true) {
  std::string json = R"({"name":"bench","deny_rules":[)";
  for (int i = 0; i < 10; ++i) {
    const std::string n = std::to_string(i);
    const std::string principal =
        indexable ? "spiffe://ferry.test/ns/bad" + n + "/*" : std::string("*");
    json += (i ? "," : "") + std::string(R"({"name":"deny)") + n +
            R"(","source":{"principals":[")" + principal +
            R"("]},"request":{"headers":[{"key":"x-block)" + n + R"(","values":["*"]}]}})";
  }
  json += R"(],"allow_rules":[)";
  for (int i = 0; i < 39; ++i) {
    const std::string n = std::to_string(i);
    json += i ? "," : "";
    if (!indexable) {
      json += R"({"name":"scanned)" + n + R"(","source":{"principals":["*"]},"request":{)" +
              R"("headers":[{"key":"x-team","values":["team)" + n + R"("]}]}})";
    } else if (i < exact) {
      json += R"({"name":"exact)" + n + R"(","request":{"paths":["/bench.Service)" + n +
              R"(/Get","/bench.Service)" + n + R"(/Put"]}})";
    } else {
      json += R"({"name":"prefix)" + n +
              R"(","source":{"principals":["spiffe://ferry.test/ns/default/sa/other)" + n +
              R"(","*.other.test"]},"request":{"paths":["/bench.Prefix)" + n +
              R"(/*"],"headers":[{"key":"x-team","values":["team)" + n + R"("]}]}})";
    }
  }
  json += R"(,{"name":"echo","source":{"principals":["spiffe://ferry.test/ns/default/*"]},
      "request":{"paths":["/ferry.testing.Echo/*"],
                 "headers":[{"key":"x-team","values":["payments","billing"]}]}}]})";
  return json;
}

void evaluate(benchmark::State& state, const std::string& json, bool want_allowed) {
  auto policy = ferry::AuthorizationPolicy::parse(json);
  if (!policy.ok()) {
    state.SkipWithError(std::string(policy.status().message()).c_str());
    return;
  }
  const ferry::Metadata md = real_metadata();
  const std::string_view method = "/ferry.testing.Echo/Echo";
  const std::uint64_t allocations = ferry::bench::thread_allocation_count();
  for (auto _ : state) {
    const ferry::AuthorizationDecision d = (*policy)->evaluate(method, md, &kClient);
    benchmark::DoNotOptimize(d);
    if (d.allowed != want_allowed) state.SkipWithError("wrong decision");
  }
  state.counters["allocs/call"] = benchmark::Counter(
      static_cast<double>(ferry::bench::thread_allocation_count() - allocations) /
      static_cast<double>(state.iterations()));
}

void BM_OneRule(benchmark::State& state) {
  evaluate(
      state,
      R"({"name":"one","allow_rules":[{"name":"echo","request":{"paths":["/ferry.testing.Echo/Echo"]}}]})",
      true);
}
// 20 of the 39 other allow rules on exact paths, 19 scanned.
void BM_FiftyRules(benchmark::State& state) { evaluate(state, fifty_rules(20), true); }
// No exact paths: every allow rule on a path prefix.
void BM_FiftyRulesPrefixes(benchmark::State& state) { evaluate(state, fifty_rules(0), true); }
// The worst case: no rule the index can find, all 50 tried in turn, the call's the last.
void BM_FiftyRulesUnindexable(benchmark::State& state) {
  evaluate(state, fifty_rules(0, /*indexable=*/false), true);
}
// No rule matches: all 50 tried, denied.
void BM_FiftyRulesDenied(benchmark::State& state) {
  std::string json = fifty_rules(20);
  json.replace(json.find("payments"), 8, "nobody12");
  evaluate(state, json, false);
}

BENCHMARK(BM_OneRule);
BENCHMARK(BM_FiftyRules);
BENCHMARK(BM_FiftyRulesPrefixes);
BENCHMARK(BM_FiftyRulesUnindexable);
BENCHMARK(BM_FiftyRulesDenied);

}  // namespace

BENCHMARK_MAIN();
