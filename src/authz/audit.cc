// ferry::authz's audit logging (gRFC A59, ferry/authz.h): which decisions a policy logs, the
// event its loggers get, and the built-in stdout_logger, which writes grpc-go's JSON lines.
#include <cstdio>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "authz/policy_internal.h"
#include "common/strings.h"
#include "ferry/authz.h"
#include "ferry/tls.h"

namespace ferry {

namespace {

// The peer's SPIFFE ID as grpc-go's credentials find it: its one URI SAN, when that is
// spiffe://<host>/<path>; "" otherwise (a certificate with several URI SANs has none).
std::string_view spiffe_id(const PeerIdentity* peer) {
  if (peer == nullptr || peer->uris.size() != 1) return {};
  std::string_view uri = peer->uris[0];
  constexpr std::string_view kScheme = "spiffe://";
  if (uri.size() <= kScheme.size() ||
      !absl::StartsWithIgnoreCase(detail::to_absl(uri), detail::to_absl(kScheme)))
    return {};
  const std::string_view rest = uri.substr(kScheme.size());
  const std::size_t slash = rest.find('/');
  if (slash == 0 || slash == std::string_view::npos || uri.size() > 2048) return {};
  return uri;
}

// Go's time.RFC3339Nano in UTC: trailing zeros of the fraction dropped, "Z".
std::string rfc3339_nano_now() {
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  std::tm tm{};
  gmtime_r(&now.tv_sec, &tm);
  char out[64];
  std::size_t n = std::strftime(out, sizeof(out), "%Y-%m-%dT%H:%M:%S", &tm);
  if (now.tv_nsec != 0) {
    char frac[16];
    std::snprintf(frac, sizeof(frac), ".%09ld", static_cast<long>(now.tv_nsec));
    std::size_t len = std::strlen(frac);
    while (len > 1 && frac[len - 1] == '0') --len;
    frac[len] = '\0';
    n += static_cast<std::size_t>(std::snprintf(out + n, sizeof(out) - n, "%s", frac));
  }
  std::snprintf(out + n, sizeof(out) - n, "Z");
  return out;
}

class StdoutAuditLogger final : public AuditLogger {
 public:
  void log(const AuditEvent& e) override {
    std::string line = "{\"grpc_audit_log\":{\"rpc_method\":";
    authz_detail::append_json_string(line, e.method);
    line += ",\"principal\":";
    authz_detail::append_json_string(line, e.principal);
    line += ",\"policy_name\":";
    authz_detail::append_json_string(line, e.policy_name);
    line += ",\"matched_rule\":";
    authz_detail::append_json_string(line, e.matched_rule);
    absl::StrAppend(&line, ",\"authorized\":", e.authorized ? "true" : "false", ",\"timestamp\":\"",
                    rfc3339_nano_now(), "\"}}\n");
    static std::mutex mutex;  // one line at a time, whole, from every I/O thread
    std::lock_guard lock(mutex);
    std::fwrite(line.data(), 1, line.size(), stdout);
    std::fflush(stdout);
  }
};

}  // namespace

std::shared_ptr<AuditLogger> make_stdout_audit_logger() {
  static const std::shared_ptr<AuditLogger> logger = std::make_shared<StdoutAuditLogger>();
  return logger;
}

void AuthorizationPolicy::audit(std::string_view method, const PeerIdentity* peer,
                                const AuthorizationDecision& decision) const {
  if (audit_loggers_.empty()) return;
  // gRFC A59: the policy's condition, as its deny and allow engines apply it, logs each call
  // once at most.
  bool wanted = false;
  switch (audit_condition_) {
    case AuditCondition::kNone:
      break;
    case AuditCondition::kOnDeny:
      wanted = !decision.allowed;
      break;
    case AuditCondition::kOnAllow:
      wanted = decision.allowed;
      break;
    case AuditCondition::kOnDenyAndAllow:
      wanted = true;
      break;
  }
  if (!wanted) return;
  const AuditEvent event{method, spiffe_id(peer), name_, decision.qualified_rule, decision.allowed};
  for (const std::shared_ptr<AuditLogger>& logger : audit_loggers_) logger->log(event);
}

}  // namespace ferry
