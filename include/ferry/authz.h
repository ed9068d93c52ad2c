// ferry/authz.h: gRPC authorization policies (gRFC A43) and their audit logs (gRFC A59), as a
// server interceptor (library ferry::authz, above the core like ferry::metrics). The policy is the
// JSON that grpc-go's authz.NewStatic and gRPC C++'s AuthorizationPolicyProvider read, so a
// team's policy files work unchanged; docs/authorization.md is the guide.
//
//   auto authz = ferry::AuthorizationInterceptor::from_file("/etc/app/policy.json",
//                                                           std::chrono::seconds(30));
//   if (!authz.ok()) ...;                       // the first load must succeed
//   options.interceptors.insert(options.interceptors.begin(), *authz);
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "ferry/server_context.h"
#include "ferry/server_interceptor.h"

namespace ferry {

class Metadata;
struct PeerIdentity;
namespace authz_detail {
struct Access;  // the compiled policy, for ferry's tests and fuzzer
}

// gRFC A59's audit_condition: which decisions are logged.
enum class AuditCondition { kNone, kOnDeny, kOnAllow, kOnDenyAndAllow };

// One authorization decision, as audit loggers see it (the fields of grpc-go's audit.Event).
// Views valid during AuditLogger::log only.
struct AuditEvent {
  std::string_view method;        // "/package.Service/Method"
  std::string_view principal;     // the peer's SPIFFE ID (its one spiffe:// URI SAN), or ""
  std::string_view policy_name;   // the policy's "name"
  std::string_view matched_rule;  // "<policy name>_<rule name>", or "" when no rule matched
  bool authorized = false;
};

// An application's audit logger. log runs on the call's I/O thread, before the handler, for
// every call the policy's audit_condition selects: it must be quick and thread-safe (one logger
// serves every I/O thread); hand slow work on.
class AuditLogger {
 public:
  virtual ~AuditLogger() = default;
  virtual void log(const AuditEvent& event) = 0;
};

// Builds the logger a policy's audit_logging_options.audit_loggers names, from the entry's
// "config" object as JSON text ("{}" when the entry has none). An error fails the policy's load.
using AuditLoggerFactory =
    std::function<absl::StatusOr<std::shared_ptr<AuditLogger>>(std::string_view config_json)>;

// The built-in "stdout_logger": one JSON line per event on standard output, as grpc-go's writes
// it: {"grpc_audit_log":{"rpc_method":...,"principal":...,"policy_name":...,"matched_rule":...,
// "authorized":...,"timestamp":"<RFC 3339, nanoseconds>"}}. Writes under a lock; allocates.
std::shared_ptr<AuditLogger> make_stdout_audit_logger();

struct AuthorizationOptions {
  // Audit loggers by the name a policy gives them, beside the built-in "stdout_logger" (an entry
  // of that name here replaces it). A policy naming a logger not here fails to load unless the
  // entry says "is_optional": true (then that entry is skipped), as in grpc-go.
  std::map<std::string, AuditLoggerFactory, std::less<>> audit_loggers;
};

// What a policy decided for one call. rule views the policy: valid while it lives.
struct AuthorizationDecision {
  bool allowed = false;
  // The rule that decided, as named in the policy: the deny rule that matched (denied), or the
  // allow rule that matched (allowed); "" when denied because no allow rule matched. The first
  // matching rule in the file's order.
  std::string_view rule;
  // The same in grpc-go's audit spelling, "<policy name>_<rule name>" ("" when rule is).
  std::string_view qualified_rule;
};

// A policy, parsed and compiled into matchers. Immutable: share it between threads freely.
class AuthorizationPolicy {
 public:
  // Policies above this size are refused unread (a policy of thousands of rules is far below).
  static constexpr std::size_t kMaxPolicyBytes = 4 << 20;

  // Parses gRFC A43's JSON. Refuses, with an INVALID_ARGUMENT naming the field, what grpc-go
  // refuses: a missing "name" or empty "allow_rules", a rule without "name", a header without
  // "key" or "values", a header key that is a pseudo-header, "host", "grpc-*" or a hop-by-hop
  // header (connection, keep-alive, proxy-authenticate, proxy-authorization, te, trailer,
  // transfer-encoding, upgrade), an unknown audit_condition, an audit logger without "name" or
  // one options does not know (unless optional), unknown fields and values of the wrong type
  // (field names match case-insensitively, as Go's decoder does). Stricter than grpc-go: a
  // duplicate key in one object, and anything after the policy object, are refused too.
  // Any thread. Allocates (this is load time).
  static absl::StatusOr<std::shared_ptr<const AuthorizationPolicy>> parse(
      std::string_view json, const AuthorizationOptions& options = {});

  // Decides a call: the deny rules in order, then the allow rules; denied when a deny rule
  // matches or no allow rule does. A rule matches when its source and request match: any of its
  // principals (none listed: any peer, authenticated or not), any of its paths (none: any
  // method), and every one of its headers (each: any of its values, against the values of that
  // key joined with ","). A principal matches an authenticated peer (peer non-null) by its URI
  // SANs if it has any, else its DNS SANs if any, else its subject; "*" is any non-empty name,
  // "x*" a prefix, "*x" a suffix, otherwise exact. Any thread; no allocation, no lock. Cost: a
  // few hash lookups (the method, the peer's names) and the rules they find, plus every rule
  // with neither paths nor principals but "*", checked in turn.
  AuthorizationDecision evaluate(std::string_view method, const Metadata& metadata,
                                 const PeerIdentity* peer) const noexcept;

  const std::string& name() const { return name_; }
  AuditCondition audit_condition() const { return audit_condition_; }
  std::size_t deny_rule_count() const;
  std::size_t allow_rule_count() const;

  // Logs decision for the call to the policy's audit loggers if its audit_condition selects it
  // (the interceptor does this; for a caller of evaluate). No-op without loggers.
  void audit(std::string_view method, const PeerIdentity* peer,
             const AuthorizationDecision& decision) const;

  struct Compiled;  // the matchers (src/authz/policy.cc)
  ~AuthorizationPolicy();
  AuthorizationPolicy(const AuthorizationPolicy&) = delete;
  AuthorizationPolicy& operator=(const AuthorizationPolicy&) = delete;

 private:
  friend struct authz_detail::Access;
  AuthorizationPolicy();
  std::string name_;
  AuditCondition audit_condition_ = AuditCondition::kNone;
  std::unique_ptr<Compiled> compiled_;
  std::vector<std::shared_ptr<AuditLogger>> audit_loggers_;
};

// The policy's decision counts and reload outcomes, for metrics.
struct AuthorizationStats {
  std::uint64_t allowed = 0;
  std::uint64_t denied = 0;
  std::uint64_t reloads = 0;          // policies loaded from the file after the first
  std::uint64_t reload_failures = 0;  // reads or parses that failed (the previous policy stayed)
};

// The server interceptor that enforces a policy: put it first in ServerOptions::interceptors,
// so that a denied call reaches no other interceptor's on_start and no handler. A denied call
// ends with PERMISSION_DENIED "authz: unauthorized RPC request rejected" (grpc-go's words)
// before the handler runs: a unary or server-streaming call's request has arrived by then but
// is never parsed or seen; a streaming call's messages are never read. Every call's decision is
// on its ServerContext (ServerContext::authorization()) for the later interceptors, the
// handler and on_finish hooks (metrics). Thread-safe: one instance serves every I/O thread.
class AuthorizationInterceptor : public ServerInterceptor {
 public:
  // A policy fixed for the interceptor's life.
  static absl::StatusOr<std::shared_ptr<AuthorizationInterceptor>> from_policy(
      std::string_view json, const AuthorizationOptions& options = {});
  // A policy read from path now (an error if it cannot be read or parsed), then every
  // refresh_interval on a thread of the interceptor's: a changed file is parsed and takes over
  // for the calls that start after; one that fails to read or parse leaves the previous policy
  // in force and is reported (standard error, reload_failures, last_reload_error(), and
  // on_reload). refresh_interval must be positive. The thread ends with the interceptor.
  // on_reload hears of every reload that read a changed file, OK or not (a bad file once per
  // version): on the interceptor's thread or on reload_now's caller, so it must be thread-safe.
  static absl::StatusOr<std::shared_ptr<AuthorizationInterceptor>> from_file(
      std::string path, std::chrono::milliseconds refresh_interval,
      const AuthorizationOptions& options = {},
      std::function<void(const absl::Status&)> on_reload = nullptr);

  ~AuthorizationInterceptor() override;

  asio::awaitable<absl::Status> on_start(ServerContext& ctx, const CallInfo& call) override;
  // on_start's decision without a coroutine (what the server's chain calls).
  std::optional<absl::Status> start_now(ServerContext& ctx, const CallInfo& call) override;
  bool uses_duration() const override { return false; }

  // The policy in force. Any thread.
  std::shared_ptr<const AuthorizationPolicy> policy() const;
  AuthorizationStats stats() const;
  // Why the last reload failed; OK when it succeeded or none failed yet.
  absl::Status last_reload_error() const;
  // Reads the file now rather than at the next refresh (what the timer does): OK when the
  // policy in force is the file's. For tests and for a SIGHUP handler. Not for from_policy.
  absl::Status reload_now();

  struct Watcher;  // the file and its thread (src/authz/authz.cc)

 private:
  AuthorizationInterceptor();
  void set_policy(std::shared_ptr<const AuthorizationPolicy> policy);

  // The policy in force, swapped under the mutex; version_ names it (a number no other policy
  // of any interceptor had), so that each thread keeps its own reference to it and takes the
  // mutex only when it changed (std::atomic<std::shared_ptr>'s load in GCC 12 unlocks relaxed:
  // a data race with the next store, which ThreadSanitizer reports).
  mutable std::mutex policy_mutex_;
  std::shared_ptr<const AuthorizationPolicy> policy_;
  std::atomic<std::uint64_t> version_{0};
  std::atomic<std::uint64_t> allowed_{0};
  std::atomic<std::uint64_t> denied_{0};
  std::shared_ptr<Watcher> watcher_;  // and its thread's copy
};

}  // namespace ferry
