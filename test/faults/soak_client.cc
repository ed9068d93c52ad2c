// The soak's load (bench/soak.sh, issue #26): ferry's Channel making mixed calls without end
// against a ferry.testing.Echo server (fault_server, usually behind toxiproxy), each with a
// deadline, and a line of counts every report period. Not a test: soak.sh runs it for an hour.
//   soak_client --target=HOST:PORT [--seconds=3600] [--in-flight=16] [--report=60]
// Each of the in-flight workers makes one call after another, picked at random: unary Echo
// (2 s deadline), Collect (client streaming), Expand (server streaming) and Chat (bidi) (5 s
// each). A reply that is not what was sent is DATA_LOSS. Nothing is retried beyond what ferry
// itself does. Every report period it prints one line, counts since the start:
//   t=60s calls=N ok=N fail=N [CODE=N ...] rss_kib=N fds=N hung=N
// and "soak_client: HUNG ..." for a call still running 5 s past its deadline. Exits 0 once the
// last calls have ended, after a "total ..." line in the same form; 1 if any call hung.
#include <dirent.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "asio/co_spawn.hpp"
#include "asio/detached.hpp"
#include "asio/io_context.hpp"
#include "asio/this_coro.hpp"
#include "asio/use_awaitable.hpp"
#include "ferry/channel.h"
#include "ferry/client_stream.h"
#include "ferry/testing/echo.ferry.h"

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
using ferry::testing::EchoRequest;
using ferry::testing::EchoResponse;

constexpr auto kUnaryDeadline = 2s;
constexpr auto kStreamDeadline = 5s;
// How long past its deadline a call may still run before it counts as hung.
constexpr auto kHangSlack = 5s;
constexpr int kStreamMessages = 16;
constexpr std::array<std::size_t, 3> kSizes = {16, 1024, 32 * 1024};

enum class Kind { kUnary, kCollect, kExpand, kChat };
const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::kUnary:
      return "unary";
    case Kind::kCollect:
      return "collect";
    case Kind::kExpand:
      return "expand";
    case Kind::kChat:
      return "chat";
  }
  return "?";
}

struct Counts {
  long calls = 0;
  long ok = 0;
  std::map<absl::StatusCode, long> failed;
};

// One worker's call in progress, for the hang check.
struct Slot {
  bool busy = false;
  Kind kind = Kind::kUnary;
  Clock::time_point start;
  Clock::time_point deadline;
  bool reported_hung = false;
};

struct Soak {
  ferry::Channel* channel = nullptr;
  Clock::time_point stop_at;
  Counts counts;
  int running = 0;
  long hung = 0;
  std::mt19937 rng{std::random_device{}()};
};

// A message of `size` bytes that differs with its index; the few the calls send are made once.
const std::string& pattern(int index, std::size_t size) {
  static std::map<std::pair<int, std::size_t>, std::string> made;
  std::string& bytes = made[{index, size}];
  if (bytes.size() != size) {
    bytes.resize(size);
    for (std::size_t j = 0; j < size; ++j) {
      bytes[j] = static_cast<char>((static_cast<std::size_t>(index) * 131 + j * 7) % 251);
    }
  }
  return bytes;
}

// The payload is one of a few fixed strings: fault_server's ledger keeps a count per payload,
// so distinct ones would grow its memory with the number of calls.
asio::awaitable<absl::Status> unary(Soak& soak, std::size_t size) {
  ferry::ClientContext ctx;
  ctx.set_timeout(kUnaryDeadline);
  EchoRequest request;
  request.set_payload(pattern(0, size));
  request.set_delay_ms(static_cast<int>(soak.rng() % 5));
  EchoResponse response;
  absl::Status status =
      co_await soak.channel->call(ferry::testing::Echo::kEchoPath, ctx, request, response);
  if (status.ok() && response.payload() != request.payload()) {
    co_return absl::DataLossError("unary echo differs");
  }
  co_return status;
}

asio::awaitable<absl::Status> collect(Soak& soak, std::size_t size) {
  ferry::ClientContext ctx;
  ctx.set_timeout(kStreamDeadline);
  ferry::ClientStream stream = co_await soak.channel->open(ferry::testing::Echo::kCollectPath,
                                                           ferry::RpcKind::kClientStreaming, ctx);
  EchoRequest request;
  request.set_payload(pattern(1, size));
  absl::Status written;
  for (int i = 0; i < kStreamMessages && written.ok(); ++i) {
    // An if, not `?:`: GCC 12 miscompiles co_await inside a conditional expression.
    if (i + 1 < kStreamMessages) {
      written = co_await stream.write(request);
    } else {
      written = co_await stream.write_last(request);
    }
  }
  EchoResponse response;
  const bool got = co_await stream.read(response);
  absl::Status status = co_await stream.finish();
  if (!status.ok()) co_return status;
  if (!written.ok()) co_return written;
  if (!got || response.received_messages() != kStreamMessages ||
      response.received_bytes() != static_cast<long>(kStreamMessages * size)) {
    co_return absl::DataLossError("collect counted other messages");
  }
  co_return status;
}

asio::awaitable<absl::Status> expand(Soak& soak, std::size_t size) {
  ferry::ClientContext ctx;
  ctx.set_timeout(kStreamDeadline);
  EchoRequest request;
  request.set_response_count(kStreamMessages);
  request.set_response_size(static_cast<int>(size));
  request.set_delay_ms(static_cast<int>(soak.rng() % 3));
  ferry::ClientStream stream =
      co_await soak.channel->open(ferry::testing::Echo::kExpandPath, ctx, request);
  EchoResponse response;
  int received = 0;
  bool in_order = true;
  while (co_await stream.read(response)) {
    if (response.index() != received || response.payload().size() != size) in_order = false;
    ++received;
  }
  absl::Status status = co_await stream.finish();
  if (status.ok() && (!in_order || received != kStreamMessages)) {
    co_return absl::DataLossError("expand's responses out of order or missing");
  }
  co_return status;
}

// Write one, read its echo, kStreamMessages times: one operation of each kind at a time.
asio::awaitable<absl::Status> chat(Soak& soak, std::size_t size) {
  ferry::ClientContext ctx;
  ctx.set_timeout(kStreamDeadline);
  ferry::ClientStream stream = co_await soak.channel->open(ferry::testing::Echo::kChatPath, ctx);
  EchoRequest request;
  EchoResponse response;
  bool intact = true;
  int received = 0;
  for (int i = 0; i < kStreamMessages; ++i) {
    request.set_payload(pattern(i, size));
    if (!(co_await stream.write(request)).ok()) break;
    if (!co_await stream.read(response)) break;
    if (response.payload() != request.payload()) intact = false;
    ++received;
  }
  co_await stream.writes_done();
  while (co_await stream.read(response)) intact = false;  // nothing more was asked for
  absl::Status status = co_await stream.finish();
  if (status.ok() && (!intact || received != kStreamMessages)) {
    co_return absl::DataLossError("chat's echoes differ or are missing");
  }
  co_return status;
}

asio::awaitable<void> worker(Soak& soak, Slot& slot) {
  while (Clock::now() < soak.stop_at) {
    const Kind kind = static_cast<Kind>(soak.rng() % 4);
    const std::size_t size = kSizes[soak.rng() % kSizes.size()];
    slot.busy = true;
    slot.kind = kind;
    slot.start = Clock::now();
    slot.deadline = slot.start + (kind == Kind::kUnary ? kUnaryDeadline : kStreamDeadline);
    slot.reported_hung = false;
    absl::Status status;
    switch (kind) {
      case Kind::kUnary:
        status = co_await unary(soak, size);
        break;
      case Kind::kCollect:
        status = co_await collect(soak, size);
        break;
      case Kind::kExpand:
        status = co_await expand(soak, size);
        break;
      case Kind::kChat:
        status = co_await chat(soak, size);
        break;
    }
    slot.busy = false;
    ++soak.counts.calls;
    if (status.ok()) {
      ++soak.counts.ok;
    } else {
      ++soak.counts.failed[status.code()];
    }
    // No yield here: a call that fails fast (UNAVAILABLE while the channel is in
    // TRANSIENT_FAILURE) gives the thread a turn itself (ChannelCore::start_call), so these
    // workers looping on the channel's thread no longer starve its back-off timer, as they did
    // before (no report for minutes after a server restart). The soak checks that it holds.
  }
  --soak.running;
}

long rss_kib() {
  long pages = 0;
  long resident = 0;
  if (FILE* f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return resident * (::sysconf(_SC_PAGESIZE) / 1024);
}

long open_fds() {
  long n = 0;
  if (DIR* dir = ::opendir("/proc/self/fd")) {
    while (dirent* entry = ::readdir(dir)) {
      if (entry->d_name[0] != '.') ++n;
    }
    ::closedir(dir);
  }
  return n - 1;  // the directory's own descriptor
}

void print_counts(const char* prefix, const Soak& soak) {
  long failed = 0;
  std::string codes;
  for (const auto& [code, n] : soak.counts.failed) {
    failed += n;
    absl::StrAppend(&codes, " ", absl::StatusCodeToString(code), "=", n);
  }
  std::printf("%s calls=%ld ok=%ld fail=%ld%s rss_kib=%ld fds=%ld hung=%ld\n", prefix,
              soak.counts.calls, soak.counts.ok, failed, codes.c_str(), rss_kib(), open_fds(),
              soak.hung);
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  std::string target;
  long seconds = 3600;
  int in_flight = 16;
  long report = 60;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--target=", 9) == 0) {
      target = argv[i] + 9;
    } else if (std::strncmp(argv[i], "--seconds=", 10) == 0) {
      seconds = std::atol(argv[i] + 10);
    } else if (std::strncmp(argv[i], "--in-flight=", 12) == 0) {
      in_flight = std::atoi(argv[i] + 12);
    } else if (std::strncmp(argv[i], "--report=", 9) == 0) {
      report = std::atol(argv[i] + 9);
    } else {
      target.clear();
      break;
    }
  }
  if (target.empty() || in_flight < 1 || report < 1) {
    std::fprintf(stderr,
                 "usage: soak_client --target=HOST:PORT [--seconds=3600] [--in-flight=16] "
                 "[--report=60]\n");
    return 2;
  }

  asio::io_context io(1);
  // The fault suite's settings: a black hole is noticed by keepalive within about 3 s, and a
  // restarted server is found again within half a second of its coming back.
  ferry::ChannelOptions options;
  options.keepalive.time = 1000ms;
  options.keepalive.timeout = 1000ms;
  options.connect_timeout = 1000ms;
  options.backoff.initial = 100ms;
  options.backoff.max = 500ms;
  long hung = 0;
  {
    ferry::Channel channel(io, target, options);
    const auto start = Clock::now();
    Soak soak;
    soak.channel = &channel;
    soak.stop_at = start + std::chrono::seconds(seconds);
    std::vector<Slot> slots(static_cast<std::size_t>(in_flight));
    soak.running = in_flight;
    for (Slot& slot : slots) asio::co_spawn(io, worker(soak, slot), asio::detached);
    auto next_report = start + std::chrono::seconds(report);
    // run_for() would not return while handlers keep coming: one handler at a time, and the
    // checks at most every 100 ms.
    auto next_check = start;
    while (soak.running > 0) {
      io.run_one_for(100ms);
      const auto now = Clock::now();
      if (now < next_check) continue;
      next_check = now + 100ms;
      for (Slot& slot : slots) {
        if (slot.busy && !slot.reported_hung && now > slot.deadline + kHangSlack) {
          slot.reported_hung = true;
          ++soak.hung;
          std::printf("soak_client: HUNG %s call, %.1f s past its deadline\n", kind_name(slot.kind),
                      std::chrono::duration<double>(now - slot.deadline).count());
          std::fflush(stdout);
        }
      }
      if (now >= next_report) {
        const long t = std::chrono::duration_cast<std::chrono::seconds>(now - start).count();
        print_counts(absl::StrCat("t=", t, "s").c_str(), soak);
        next_report += std::chrono::seconds(report);
      }
    }
    print_counts("total", soak);
    hung = soak.hung;
  }
  // The closed connections' last handlers, which release them.
  io.restart();
  io.run_for(5s);
  return hung > 0 ? 1 : 0;
}
