// Implementation of ferry/service_config.h over the strict JSON reader (client/json.h).
#include "ferry/service_config.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "client/json.h"
#include "common/strings.h"

namespace ferry {
namespace {

using detail::JsonValue;
using detail::to_absl;
using Kind = JsonValue::Kind;

absl::Status bad(std::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("bad service config: ", to_absl(what)));
}

// A protobuf JSON Duration: "1s", "0.25s" (up to 9 fractional digits), not negative; a part of a
// millisecond counts as a whole one (rounded up, as gRPC C++ does), so a positive duration never
// becomes zero.
absl::StatusOr<std::chrono::milliseconds> duration(const JsonValue* v, std::string_view field) {
  if (v == nullptr || v->kind != Kind::kString) {
    return bad(absl::StrCat(to_absl(field), " must be a duration string like \"0.1s\""));
  }
  const std::string& s = v->string;
  std::size_t i = 0;
  std::int64_t seconds = 0;
  std::int64_t nanos = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9' && i < 12)
    seconds = seconds * 10 + (s[i++] - '0');
  bool ok = i > 0;
  if (ok && i < s.size() && s[i] == '.') {
    ++i;
    int digits = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9' && digits < 9) {
      nanos = nanos * 10 + (s[i++] - '0');
      ++digits;
    }
    ok = digits > 0;
    for (; digits < 9; ++digits) nanos *= 10;
  }
  if (!ok || i + 1 != s.size() || s[i] != 's') {
    return bad(absl::StrCat(to_absl(field), " must be a duration string like \"0.1s\""));
  }
  return std::chrono::milliseconds(seconds * 1000 + (nanos + 999'999) / 1'000'000);
}

absl::StatusOr<absl::StatusCode> status_code(const JsonValue& v) {
  static constexpr std::string_view kNames[] = {"OK",
                                                "CANCELLED",
                                                "UNKNOWN",
                                                "INVALID_ARGUMENT",
                                                "DEADLINE_EXCEEDED",
                                                "NOT_FOUND",
                                                "ALREADY_EXISTS",
                                                "PERMISSION_DENIED",
                                                "RESOURCE_EXHAUSTED",
                                                "FAILED_PRECONDITION",
                                                "ABORTED",
                                                "OUT_OF_RANGE",
                                                "UNIMPLEMENTED",
                                                "INTERNAL",
                                                "UNAVAILABLE",
                                                "DATA_LOSS",
                                                "UNAUTHENTICATED"};
  if (v.kind == Kind::kNumber && v.number >= 1 && v.number <= 16 &&
      v.number == std::floor(v.number)) {
    return static_cast<absl::StatusCode>(static_cast<int>(v.number));
  }
  if (v.kind == Kind::kString) {
    for (int i = 1; i <= 16; ++i) {
      if (v.string == kNames[i]) return static_cast<absl::StatusCode>(i);
    }
  }
  return bad("retryableStatusCodes holds an unknown status code");
}

absl::StatusOr<RetryPolicy> retry_policy(const JsonValue& v) {
  if (v.kind != Kind::kObject) return bad("retryPolicy must be an object");
  RetryPolicy p;
  const JsonValue* attempts = v.find("maxAttempts");
  if (attempts == nullptr || attempts->kind != Kind::kNumber || attempts->number < 2 ||
      attempts->number != std::floor(attempts->number)) {
    return bad("retryPolicy.maxAttempts must be an integer > 1");
  }
  p.max_attempts = attempts->number > 5 ? 5 : static_cast<int>(attempts->number);
  absl::StatusOr<std::chrono::milliseconds> initial =
      duration(v.find("initialBackoff"), "retryPolicy.initialBackoff");
  if (!initial.ok()) return initial.status();
  absl::StatusOr<std::chrono::milliseconds> max =
      duration(v.find("maxBackoff"), "retryPolicy.maxBackoff");
  if (!max.ok()) return max.status();
  if (initial->count() <= 0 || max->count() <= 0) return bad("retry back-offs must be > 0");
  p.initial_backoff = *initial;
  p.max_backoff = *max;
  const JsonValue* multiplier = v.find("backoffMultiplier");
  if (multiplier == nullptr || multiplier->kind != Kind::kNumber || !(multiplier->number > 0)) {
    return bad("retryPolicy.backoffMultiplier must be a number > 0");
  }
  p.backoff_multiplier = multiplier->number;
  const JsonValue* codes = v.find("retryableStatusCodes");
  if (codes == nullptr || codes->kind != Kind::kArray || codes->array.empty()) {
    return bad("retryPolicy.retryableStatusCodes must be a non-empty array");
  }
  p.retryable_status_codes.clear();
  for (const JsonValue& c : codes->array) {
    absl::StatusOr<absl::StatusCode> code = status_code(c);
    if (!code.ok()) return code.status();
    p.retryable_status_codes.push_back(*code);
  }
  return p;
}

// A methodConfig's maxRequestMessageBytes or maxResponseMessageBytes: a UInt32Value, which
// protobuf's JSON mapping writes as a number (and reads from a decimal string too).
absl::StatusOr<std::size_t> message_bytes(const JsonValue& v, const char* field) {
  double n = -1;
  if (v.kind == Kind::kNumber) {
    n = v.number;
  } else if (v.kind == Kind::kString && !v.string.empty() && v.string.size() <= 10 &&
             std::all_of(v.string.begin(), v.string.end(),
                         [](char c) { return c >= '0' && c <= '9'; })) {
    std::uint64_t digits = 0;
    std::from_chars(v.string.data(), v.string.data() + v.string.size(), digits);
    n = static_cast<double>(digits);
  }
  if (!(n >= 0) || n > 4294967295.0 || n != std::floor(n)) {
    return bad(absl::StrCat("methodConfig.", field, " must be an integer in [0, 2^32)"));
  }
  return static_cast<std::size_t>(n);
}

// A methodConfig's "timeout" (a duration), "waitForReady" (a boolean), "retryPolicy" and the
// message limits.
absl::StatusOr<MethodConfig> method_config(const JsonValue& mc) {
  MethodConfig c;
  if (const JsonValue* rp = mc.find("retryPolicy")) {
    absl::StatusOr<RetryPolicy> parsed = retry_policy(*rp);
    if (!parsed.ok()) return parsed.status();
    c.retry_policy = *std::move(parsed);
  }
  for (auto [name, field] : {std::pair{"maxRequestMessageBytes", &c.max_request_message_bytes},
                             std::pair{"maxResponseMessageBytes", &c.max_response_message_bytes}}) {
    if (const JsonValue* v = mc.find(name)) {
      absl::StatusOr<std::size_t> bytes = message_bytes(*v, name);
      if (!bytes.ok()) return bytes.status();
      *field = *bytes;
    }
  }
  if (const JsonValue* timeout = mc.find("timeout")) {
    absl::StatusOr<std::chrono::milliseconds> t = duration(timeout, "methodConfig.timeout");
    if (!t.ok()) return t.status();
    // gRPC (C++) reads a zero timeout as none: "0s" became a deadline of now, failing every call.
    if (t->count() > 0) c.timeout = *t;
  }
  if (const JsonValue* wait = mc.find("waitForReady")) {
    if (wait->kind != Kind::kBool) return bad("methodConfig.waitForReady must be a boolean");
    c.wait_for_ready = wait->boolean;
  }
  return c;
}

absl::StatusOr<LoadBalancingPolicy> policy_named(std::string_view name, bool* known) {
  *known = true;
  if (name == "pick_first") return LoadBalancingPolicy::kPickFirst;
  if (name == "round_robin") return LoadBalancingPolicy::kRoundRobin;
  *known = false;
  return LoadBalancingPolicy::kPickFirst;
}

}  // namespace

absl::Status apply_service_config(std::string_view json, ChannelOptions& options) {
  absl::StatusOr<JsonValue> doc = detail::parse_json(json);
  if (!doc.ok()) return doc.status();
  if (doc->kind != Kind::kObject) return bad("the document must be an object");
  ChannelOptions out = options;

  if (const JsonValue* lb = doc->find("loadBalancingConfig")) {
    if (lb->kind != Kind::kArray) return bad("loadBalancingConfig must be an array");
    bool chosen = false;
    for (const JsonValue& entry : lb->array) {
      if (entry.kind != Kind::kObject || entry.object.size() != 1) {
        return bad("each loadBalancingConfig entry must be an object with one member");
      }
      bool known = false;
      const LoadBalancingPolicy p = *policy_named(entry.object[0].first, &known);
      if (known) {
        out.load_balancing = p;
        chosen = true;
        break;
      }
    }
    if (!chosen) return bad("loadBalancingConfig names no policy ferry has");
  } else if (const JsonValue* name = doc->find("loadBalancingPolicy")) {
    if (name->kind != Kind::kString) return bad("loadBalancingPolicy must be a string");
    bool known = false;
    const LoadBalancingPolicy p = *policy_named(name->string, &known);
    if (!known) return bad(absl::StrCat("unknown loadBalancingPolicy '", name->string, "'"));
    out.load_balancing = p;
  }

  if (const JsonValue* methods = doc->find("methodConfig")) {
    if (methods->kind != Kind::kArray) return bad("methodConfig must be an array");
    // gRPC's service config: a name appears in one entry only, else the config is refused (which
    // entry applied was the last one's, silently). A hash set: linear in the names.
    absl::flat_hash_set<std::string> seen;
    for (const JsonValue& mc : methods->array) {
      if (mc.kind != Kind::kObject) return bad("each methodConfig must be an object");
      const JsonValue* names = mc.find("name");
      if (names == nullptr || names->kind != Kind::kArray) {
        return bad("methodConfig.name must be an array");
      }
      // Each entry is whole for the names it lists (gRPC picks one entry per call): a field it
      // lacks does not fall back to a less specific entry, so every name gets a MethodConfig
      // (possibly empty).
      absl::StatusOr<MethodConfig> call_defaults = method_config(mc);
      if (!call_defaults.ok()) return call_defaults.status();
      for (const JsonValue& n : names->array) {
        if (n.kind != Kind::kObject) return bad("each name must be an object");
        const JsonValue* service = n.find("service");
        const JsonValue* method = n.find("method");
        if ((service != nullptr && service->kind != Kind::kString) ||
            (method != nullptr && method->kind != Kind::kString)) {
          return bad("name.service and name.method must be strings");
        }
        const bool has_service = service != nullptr && !service->string.empty();
        const bool has_method = method != nullptr && !method->string.empty();
        if (has_method && !has_service) return bad("a name with a method needs its service");
        std::string key;  // empty for the defaults of every method
        if (has_service) {
          key = absl::StrCat("/", service->string, "/", has_method ? method->string : "");
        }
        if (!seen.insert(key).second) {
          return bad(key.empty() ? std::string("more than one methodConfig has the empty name")
                                 : absl::StrCat("the name ", key, " appears more than once"));
        }
        if (key.empty()) {
          out.method_config = *call_defaults;
        } else {
          out.method_configs[std::move(key)] = *call_defaults;
        }
      }
    }
  }

  if (const JsonValue* t = doc->find("retryThrottling")) {
    if (t->kind != Kind::kObject) return bad("retryThrottling must be an object");
    const JsonValue* max = t->find("maxTokens");
    const JsonValue* ratio = t->find("tokenRatio");
    if (max == nullptr || max->kind != Kind::kNumber || max->number <= 0 || max->number > 1000 ||
        max->number != std::floor(max->number)) {
      return bad("retryThrottling.maxTokens must be an integer in (0, 1000]");
    }
    // gRFC A6: tokenRatio has up to three decimal places (more are truncated, as gRPC C++ does)
    // and is > 0 after that; over 1000 (maxTokens's bound) one success would refill more than
    // any bucket holds. 0.0001 became a ratio that never refilled, 1e10 an int overflow.
    if (ratio == nullptr || ratio->kind != Kind::kNumber || !(ratio->number > 0) ||
        ratio->number > 1000) {
      return bad("retryThrottling.tokenRatio must be a number in (0, 1000]");
    }
    const double thousandths = std::floor(ratio->number * 1000 + 1e-6);
    if (thousandths < 1) {
      return bad("retryThrottling.tokenRatio must be at least 0.001 (three decimal places)");
    }
    out.retry_throttling.max_tokens = static_cast<int>(max->number);
    out.retry_throttling.token_ratio = thousandths / 1000;
  }
  options = std::move(out);
  return absl::OkStatus();
}

}  // namespace ferry
