// ferry::authz's interceptor (ferry/authz.h): the policy in force for each call and the file it is
// reloaded from.
#include "ferry/authz.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "authz/policy_internal.h"
#include "common/strings.h"
#include "ferry/call_info.h"
#include "ferry/tls.h"

namespace ferry {

namespace {

constexpr absl::string_view kDenied = "authz: unauthorized RPC request rejected";  // grpc-go's

}  // namespace

// ---- the file watcher -------------------------------------------------------------------------

struct AuthorizationInterceptor::Watcher {
  std::string path;
  std::chrono::milliseconds interval{};
  AuthorizationOptions options;
  std::function<void(const absl::Status&)> on_reload;

  std::mutex reload_mutex;  // one reload at a time: the thread's and reload_now's
  std::string loaded;       // the text of the policy in force
  std::string failed;       // the last text that failed, reported once
  std::atomic<std::uint64_t> reloads{0};
  std::atomic<std::uint64_t> failures{0};
  mutable std::mutex error_mutex;
  absl::Status last_error;

  std::mutex stop_mutex;
  std::condition_variable stop_cv;
  bool stopping = false;
  std::thread thread;

  absl::StatusOr<std::string> read() const {
    // Not blocking: a FIFO or a device named as the policy would hang the first load, or the
    // reload thread for ever; only a regular file is read.
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      return absl::NotFoundError(
          absl::StrCat("authorization policy file ", path, ": ", std::strerror(errno)));
    }
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      return absl::InvalidArgumentError(
          absl::StrCat("authorization policy file ", path, " is not a regular file"));
    }
    // One open file read to its end: a file replaced (renamed over) meanwhile is read whole
    // from the old inode; one rewritten in place may read partly written, fail to parse and
    // be read again at the next refresh.
    std::string text;
    char buf[16384];
    while (true) {
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        const int err = errno;
        ::close(fd);
        return absl::UnavailableError(
            absl::StrCat("authorization policy file ", path, ": ", std::strerror(err)));
      }
      if (n == 0) break;
      if (text.size() + static_cast<std::size_t>(n) > AuthorizationPolicy::kMaxPolicyBytes) {
        ::close(fd);
        return absl::InvalidArgumentError(
            absl::StrCat("authorization policy file ", path, " is over the limit of ",
                         AuthorizationPolicy::kMaxPolicyBytes, " bytes"));
      }
      text.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    return text;
  }
};

AuthorizationInterceptor::AuthorizationInterceptor() = default;

AuthorizationInterceptor::~AuthorizationInterceptor() {
  if (watcher_ == nullptr || !watcher_->thread.joinable()) return;
  {
    std::lock_guard lock(watcher_->stop_mutex);
    watcher_->stopping = true;
  }
  watcher_->stop_cv.notify_all();
  if (watcher_->thread.get_id() == std::this_thread::get_id()) {
    // Dropped by its own on_reload, on the thread: it sees stopping once the callback returns
    // and ends without touching the interceptor; its copy of the watcher goes with it.
    watcher_->thread.detach();
    return;
  }
  watcher_->thread.join();
}

namespace {

// Every policy an interceptor puts in force gets a number none had before, in any interceptor:
// a thread's cached reference names its interceptor and that number, so an interceptor made
// where a destroyed one lived never finds the other's policy in a cache.
std::atomic<std::uint64_t> policy_versions{0};

struct PolicyCache {
  const void* owner = nullptr;
  std::uint64_t version = 0;
  std::shared_ptr<const AuthorizationPolicy> policy;
};
// One entry per thread (an I/O thread serves one server, usually with one policy); a thread that
// alternates between interceptors takes their mutexes instead.
thread_local PolicyCache policy_cache;

}  // namespace

void AuthorizationInterceptor::set_policy(std::shared_ptr<const AuthorizationPolicy> policy) {
  std::lock_guard lock(policy_mutex_);
  policy_.swap(policy);  // the previous one is released after the lock
  version_.store(policy_versions.fetch_add(1, std::memory_order_relaxed) + 1,
                 std::memory_order_release);
}

std::shared_ptr<const AuthorizationPolicy> AuthorizationInterceptor::policy() const {
  PolicyCache& cache = policy_cache;
  if (cache.owner == this && cache.version == version_.load(std::memory_order_acquire)) {
    return cache.policy;
  }
  std::lock_guard lock(policy_mutex_);
  cache.owner = this;
  cache.version = version_.load(std::memory_order_relaxed);  // policy_'s, under the lock
  cache.policy = policy_;
  return cache.policy;
}

AuthorizationStats AuthorizationInterceptor::stats() const {
  AuthorizationStats s;
  s.allowed = allowed_.load(std::memory_order_relaxed);
  s.denied = denied_.load(std::memory_order_relaxed);
  if (watcher_ != nullptr) {
    s.reloads = watcher_->reloads.load(std::memory_order_relaxed);
    s.reload_failures = watcher_->failures.load(std::memory_order_relaxed);
  }
  return s;
}

absl::Status AuthorizationInterceptor::last_reload_error() const {
  if (watcher_ == nullptr) return absl::OkStatus();
  std::lock_guard lock(watcher_->error_mutex);
  return watcher_->last_error;
}

absl::Status AuthorizationInterceptor::reload_now() {
  if (watcher_ == nullptr) {
    return absl::FailedPreconditionError("the authorization policy was not read from a file");
  }
  Watcher& w = *watcher_;
  std::unique_lock lock(w.reload_mutex);
  absl::StatusOr<std::string> text = w.read();
  absl::Status status;
  bool changed = false;
  if (!text.ok()) {
    status = text.status();
  } else if (*text == w.loaded) {
    return absl::OkStatus();
  } else {
    absl::StatusOr<std::shared_ptr<const AuthorizationPolicy>> parsed =
        AuthorizationPolicy::parse(*text, w.options);
    if (parsed.ok()) {
      set_policy(*std::move(parsed));
      w.loaded = *std::move(text);
      w.failed.clear();
      w.reloads.fetch_add(1, std::memory_order_relaxed);
      changed = true;
    } else {
      status = absl::Status(
          parsed.status().code(),
          absl::StrCat("authorization policy file ", w.path, ": ", parsed.status().message()));
      // The same bad text is reported once, not at every refresh.
      if (*text == w.failed) return status;
      w.failed = *std::move(text);
    }
  }
  if (!status.ok()) w.failures.fetch_add(1, std::memory_order_relaxed);
  {
    std::lock_guard error_lock(w.error_mutex);
    w.last_error = status;
  }
  if (!status.ok()) {
    std::fprintf(stderr,
                 "ferry: authorization policy not reloaded, the previous one stays in "
                 "force: %s\n",
                 std::string(status.message()).c_str());
  } else if (changed) {
    std::fprintf(stderr, "ferry: authorization policy \"%s\" reloaded from %s\n",
                 policy()->name().c_str(), w.path.c_str());
  }
  std::function<void(const absl::Status&)> on_reload = w.on_reload;
  lock.unlock();
  if (on_reload) on_reload(status);
  return status;
}

absl::StatusOr<std::shared_ptr<AuthorizationInterceptor>> AuthorizationInterceptor::from_policy(
    std::string_view json, const AuthorizationOptions& options) {
  absl::StatusOr<std::shared_ptr<const AuthorizationPolicy>> policy =
      AuthorizationPolicy::parse(json, options);
  if (!policy.ok()) return policy.status();
  std::shared_ptr<AuthorizationInterceptor> interceptor(new AuthorizationInterceptor());
  interceptor->set_policy(*std::move(policy));
  return interceptor;
}

absl::StatusOr<std::shared_ptr<AuthorizationInterceptor>> AuthorizationInterceptor::from_file(
    std::string path, std::chrono::milliseconds refresh_interval,
    const AuthorizationOptions& options, std::function<void(const absl::Status&)> on_reload) {
  if (path.empty()) {
    return absl::InvalidArgumentError("authorization policy file path is empty");
  }
  if (refresh_interval <= std::chrono::milliseconds::zero()) {
    return absl::InvalidArgumentError(
        absl::StrCat("authorization policy refresh interval must be positive, not ",
                     refresh_interval.count(), " ms"));
  }
  std::shared_ptr<AuthorizationInterceptor> interceptor(new AuthorizationInterceptor());
  auto watcher = std::make_shared<Watcher>();
  watcher->path = std::move(path);
  watcher->interval = refresh_interval;
  watcher->options = options;
  absl::StatusOr<std::string> text = watcher->read();
  if (!text.ok()) return text.status();
  absl::StatusOr<std::shared_ptr<const AuthorizationPolicy>> policy =
      AuthorizationPolicy::parse(*text, options);
  if (!policy.ok()) {
    return absl::Status(
        policy.status().code(),
        absl::StrCat("authorization policy file ", watcher->path, ": ", policy.status().message()));
  }
  interceptor->set_policy(*std::move(policy));
  watcher->loaded = *std::move(text);
  watcher->on_reload = std::move(on_reload);
  interceptor->watcher_ = std::move(watcher);
  // The thread holds the interceptor by a raw pointer: the destructor stops and joins it first.
  AuthorizationInterceptor* self = interceptor.get();
  std::shared_ptr<Watcher> w = interceptor->watcher_;
  w->thread = std::thread([self, w] {
    while (true) {
      {
        std::unique_lock lock(w->stop_mutex);
        if (w->stop_cv.wait_for(lock, w->interval, [w] { return w->stopping; })) break;
      }
      (void)self->reload_now();
    }
  });
  return interceptor;
}

asio::awaitable<absl::Status> AuthorizationInterceptor::on_start(ServerContext& ctx,
                                                                 const CallInfo& call) {
  return ready_status(*start_now(ctx, call));
}

std::optional<absl::Status> AuthorizationInterceptor::start_now(ServerContext& ctx,
                                                                const CallInfo& call) {
  std::shared_ptr<const AuthorizationPolicy> policy = this->policy();
  const AuthorizationDecision decision =
      policy->evaluate(call.method, ctx.client_metadata(), ctx.peer_identity());
  policy->audit(call.method, ctx.peer_identity(), decision);
  const CallAuthorization result{decision.allowed ? CallAuthorization::Decision::kAllowed
                                                  : CallAuthorization::Decision::kDenied,
                                 policy->name(), decision.rule};
  ctx.set_authorization(result, std::move(policy));
  if (decision.allowed) {
    allowed_.fetch_add(1, std::memory_order_relaxed);
    return absl::OkStatus();
  }
  denied_.fetch_add(1, std::memory_order_relaxed);
  return absl::PermissionDeniedError(kDenied);
}

}  // namespace ferry
