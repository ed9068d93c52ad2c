// ferry::tracing's interceptors (ferry/tracing.h): gRFC A72's spans around server and client
// calls, their sampling, and the attempt headers. A call that is not sampled records nothing and
// allocates nothing: its context is a few bytes in its ServerContext or ClientContext, and a
// client call's tracer is the interceptor's shared non-recording one.
#include "ferry/tracing.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "absl/status/status.h"
#include "ferry/interceptor.h"

namespace ferry {
namespace {

// ---- ids ----------------------------------------------------------------------------------
// A per-thread xoshiro256** generator, seeded from the system's entropy and the thread: ids
// need to be unique, not secret (W3C §3.2.2.3 asks for randomness, and the sampler reads the
// trace id's bits as uniform).
class IdGenerator {
 public:
  IdGenerator() {
    std::random_device device;
    std::uint64_t seed =
        (static_cast<std::uint64_t>(device()) << 32) ^ device() ^
        static_cast<std::uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()) ^
        std::hash<std::thread::id>{}(std::this_thread::get_id());
    for (auto& word : state_) word = splitmix(seed);
  }
  std::uint64_t next() {
    const std::uint64_t result = rotl(state_[1] * 5, 7) * 9;
    const std::uint64_t t = state_[1] << 17;
    state_[2] ^= state_[0];
    state_[3] ^= state_[1];
    state_[1] ^= state_[2];
    state_[0] ^= state_[3];
    state_[2] ^= t;
    state_[3] = rotl(state_[3], 45);
    return result;
  }

 private:
  static std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  static std::uint64_t splitmix(std::uint64_t& x) {
    std::uint64_t z = (x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  std::uint64_t state_[4];
};

IdGenerator& ids() {
  thread_local IdGenerator generator;
  return generator;
}

template <std::size_t N>
void fill_random(std::array<std::uint8_t, N>& out) {
  bool nonzero = false;
  while (!nonzero) {  // an all-zero id is invalid (W3C)
    for (std::size_t i = 0; i < N; i += 8) {
      std::uint64_t word = ids().next();
      for (std::size_t j = 0; j < 8 && i + j < N; ++j) {
        out[i + j] = static_cast<std::uint8_t>(word >> (8 * j));
        nonzero = nonzero || out[i + j] != 0;
      }
    }
  }
}

std::array<std::uint8_t, 8> new_span_id() {
  std::array<std::uint8_t, 8> id;
  fill_random(id);
  return id;
}

std::int64_t now_unix_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// ---- names and status -----------------------------------------------------------------------

// gRFC A72: "<prefix>.<service>.<method>" from "/<service>/<method>", into name (its storage
// reused).
void write_span_name(std::string& name, std::string_view prefix, std::string_view method) {
  if (!method.empty() && method.front() == '/') method.remove_prefix(1);
  name.assign(prefix.data(), prefix.size());
  name += '.';
  const std::size_t at = name.size();
  name.append(method.data(), method.size());
  for (std::size_t i = at; i < name.size(); ++i) {
    if (name[i] == '/') name[i] = '.';
  }
}

// gRFC A72: OK is status OK; any other code is ERROR, described by its code's name and the
// message ("UNAVAILABLE, unable to resolve host").
void set_status(SpanData& span, const absl::Status& status) {
  if (status.ok()) {
    span.status = SpanStatusCode::kOk;
    return;
  }
  span.status = SpanStatusCode::kError;
  span.status_message.assign(absl::StatusCodeToString(status.code()));
  if (!status.message().empty()) {
    span.status_message += ", ";
    span.status_message.append(status.message().data(), status.message().size());
  }
}

// A span being recorded into a record the processor had exported (BatchSpanProcessor's spares):
// its strings and vectors are written in place, their elements reused, so that a sampled call
// allocates nothing for its spans once warm. The first `events` of data.events and the first
// `attributes` of data.attributes are this span's; the rest are the earlier span's, to be
// overwritten or cut off as the span ends.
struct SpanRecord {
  SpanData data;
  std::size_t events = 0;
  std::size_t attributes = 0;

  // The ended span: the earlier span's leftover elements cut off.
  SpanData take() {
    data.events.resize(events);
    data.attributes.resize(attributes);
    return std::move(data);
  }
};

// The next element of v, of which `used` are written: a leftover one, else a new one.
template <class T>
T& next_element(std::vector<T>& v, std::size_t& used) {
  if (used == v.size()) v.emplace_back();
  return v[used++];
}

template <class Value>
void set_attribute(std::vector<SpanAttribute>& attributes, std::size_t& used, std::string_view key,
                   Value value) {
  SpanAttribute& attribute = next_element(attributes, used);
  attribute.key.assign(key.data(), key.size());
  attribute.value.template emplace<Value>(value);
}

// gRFC A72's message events: one event per message, with its sequence number on the span
// (counted from 0 in each direction), its size, and its compressed size when it was compressed
// (grpc-go's form: one event carrying both sizes).
void add_message_event(SpanRecord& span, const char* name, std::int64_t sequence, std::size_t size,
                       std::size_t compressed_size) {
  SpanEvent& event = next_element(span.data.events, span.events);
  event.name.assign(name);
  event.time_unix_ns = now_unix_ns();
  std::size_t attributes = 0;
  set_attribute(event.attributes, attributes, "sequence-number", sequence);
  set_attribute(event.attributes, attributes, "message-size", static_cast<std::int64_t>(size));
  if (compressed_size != 0) {
    set_attribute(event.attributes, attributes, "message-size-compressed",
                  static_cast<std::int64_t>(compressed_size));
  }
  event.attributes.resize(attributes);
}

// Blocks for the spans' shared tracers (RecvSpan, ClientSpans: one per sampled call), recycled
// per thread: std::allocate_shared with it costs no allocation once warm. A block freed on
// another thread joins that thread's list; a list keeps kMaxBlocks at most.
template <class T>
class RecyclingAllocator {
 public:
  using value_type = T;
  RecyclingAllocator() = default;
  template <class U>
  RecyclingAllocator(const RecyclingAllocator<U>&) {}  // NOLINT(google-explicit-constructor)

  T* allocate(std::size_t n) {
    if (n == 1 && !list_gone()) {
      std::vector<void*>& list = free_list();
      if (!list.empty()) {
        void* block = list.back();
        list.pop_back();
        return static_cast<T*>(block);
      }
    }
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  void deallocate(T* block, std::size_t n) noexcept {
    if (n == 1 && !list_gone()) {
      std::vector<void*>& list = free_list();
      if (list.size() < kMaxBlocks) {
        list.push_back(block);
        return;
      }
    }
    ::operator delete(block);
  }
  template <class U>
  bool operator==(const RecyclingAllocator<U>&) const {
    return true;
  }

 private:
  static constexpr std::size_t kMaxBlocks = 256;
  struct FreeList {
    FreeList() { blocks.reserve(kMaxBlocks); }
    ~FreeList() {
      for (void* block : blocks) ::operator delete(block);
      list_gone() = true;  // a tracer another thread_local drops later is freed at once
    }
    std::vector<void*> blocks;
  };
  // Trivially destructible, so valid all through the thread's exit.
  static bool& list_gone() {
    thread_local bool gone = false;
    return gone;
  }
  static std::vector<void*>& free_list() {
    thread_local FreeList list;
    return list.blocks;
  }
};

// ---- propagation -----------------------------------------------------------------------------

bool has(TracePropagation set, TracePropagation format) {
  return (static_cast<int>(set) & static_cast<int>(format)) != 0;
}

// -bin values travel in base64 (unpadded, as gRPC sends them).
std::size_t base64_unpadded(const std::uint8_t* in, std::size_t size, char* out) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::size_t at = 0;
  std::size_t i = 0;
  for (; i + 3 <= size; i += 3) {
    const std::uint32_t v = in[i] << 16 | in[i + 1] << 8 | in[i + 2];
    out[at++] = kAlphabet[(v >> 18) & 63];
    out[at++] = kAlphabet[(v >> 12) & 63];
    out[at++] = kAlphabet[(v >> 6) & 63];
    out[at++] = kAlphabet[v & 63];
  }
  if (size - i == 1) {
    const std::uint32_t v = in[i] << 16;
    out[at++] = kAlphabet[(v >> 18) & 63];
    out[at++] = kAlphabet[(v >> 12) & 63];
  } else if (size - i == 2) {
    const std::uint32_t v = in[i] << 16 | in[i + 1] << 8;
    out[at++] = kAlphabet[(v >> 18) & 63];
    out[at++] = kAlphabet[(v >> 12) & 63];
    out[at++] = kAlphabet[(v >> 6) & 63];
  }
  return at;
}

// The headers of an attempt whose span is `attempt` (tracestate: the call's, which outlives
// the headers' submission).
void write_attempt_headers(TracePropagation propagation, const TraceContext& attempt,
                           const std::string& tracestate, TraceHeaders& out) {
  if (has(propagation, TracePropagation::kW3C)) {
    std::array<char, kTraceparentSize> traceparent;
    write_traceparent(attempt, traceparent);
    out.add_copy("traceparent", std::string_view(traceparent.data(), traceparent.size()));
    if (!tracestate.empty()) out.add_view("tracestate", tracestate);
  }
  if (has(propagation, TracePropagation::kGrpcTraceBin)) {
    std::array<std::uint8_t, kGrpcTraceBinSize> bin;
    write_grpc_trace_bin(attempt, bin);
    char encoded[40];
    const std::size_t n = base64_unpadded(bin.data(), bin.size(), encoded);
    out.add_copy("grpc-trace-bin", std::string_view(encoded, n));
  }
}

// The context of a new span under parent (invalid: a new trace), sampled as the options say.
TraceContext child_of(const TraceContext& parent, const TracingOptions& options) {
  TraceContext span;
  bool sampled;
  if (parent.valid()) {
    span.trace_id = parent.trace_id;
    span.tracestate = parent.tracestate;
    sampled = options.parent_based ? parent.sampled()
                                   : trace_id_ratio_sampled(span.trace_id, options.sample_ratio);
  } else {
    fill_random(span.trace_id);
    sampled = trace_id_ratio_sampled(span.trace_id, options.sample_ratio);
  }
  span.span_id = new_span_id();
  span.flags = sampled ? TraceContext::kSampled : 0;
  return span;
}

// Whether the sampled flag a traceparent value carries may be set: W3C §3.2.2.5's trace-flags
// are the two hex digits at 53-54 (after optional whitespace), bit 0 sampled. False also means
// the value is malformed (parse_traceparent then fails), never that it is sampled.
bool traceparent_may_be_sampled(std::string_view value) {
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  if (value.size() < kTraceparentSize) return false;
  const char flags = value[54];
  if (flags >= '0' && flags <= '9') return ((flags - '0') & 1) != 0;
  if (flags >= 'a' && flags <= 'f') return ((flags - 'a' + 10) & 1) != 0;
  return false;
}

// The same for grpc-trace-bin, walking its fields as parse_grpc_trace_bin does: a missing
// options field reads as 0.
bool trace_bin_may_be_sampled(std::string_view bytes) {
  if (bytes.empty() || bytes[0] != 0) return false;
  std::size_t at = 1;
  auto byte = [&](std::size_t i) { return static_cast<std::uint8_t>(bytes[i]); };
  if (at < bytes.size() && byte(at) == 0) at += 17;
  if (at < bytes.size() && byte(at) == 1) at += 9;
  return at + 1 < bytes.size() && byte(at) == 2 && (byte(at + 1) & TraceContext::kSampled) != 0;
}

// Whether the server span of a call with this metadata is surely not sampled, without parsing its
// trace headers: no new trace is sampled (ratio 0) and no parent the headers may carry has its
// sampled flag set. extract_trace_context reads traceparent first and grpc-trace-bin when that
// is missing or malformed; both are checked, so the answer holds whichever it takes. False when
// unsure: the caller then works the context out at once.
bool surely_unsampled(const Metadata& metadata, const TracingOptions& options) {
  if (options.sample_ratio > 0) return false;  // a new trace might be sampled
  if (!options.parent_based) return true;      // the ratio alone decides: never
  const bool w3c = has(options.propagation, TracePropagation::kW3C);
  const bool bin = has(options.propagation, TracePropagation::kGrpcTraceBin);
  for (const auto& [key, value] : metadata) {
    if (w3c && key == "traceparent" && traceparent_may_be_sampled(value)) return false;
    if (bin && key == "grpc-trace-bin" && trace_bin_may_be_sampled(value)) return false;
  }
  return true;
}

}  // namespace

// The tracing interceptors' access to a processor's spare records (ferry/tracing.h).
struct detail::SpanRecords {
  static SpanData take(BatchSpanProcessor& processor, SpanKind kind) {
    return processor.take_spare(kind);
  }
};

namespace {

// A span of `prefix` for method, recorded into a spare record of processor's.
SpanRecord open_span(BatchSpanProcessor& processor, std::string_view prefix,
                     std::string_view method, SpanKind kind, const TraceContext& span,
                     const TraceContext& parent, bool parent_remote) {
  SpanRecord record{detail::SpanRecords::take(processor, kind)};
  SpanData& data = record.data;
  data.trace_id = span.trace_id;
  data.span_id = span.span_id;
  data.parent_span_id = parent.valid() ? parent.span_id : std::array<std::uint8_t, 8>{};
  data.parent_is_remote = parent.valid() && parent_remote;
  data.flags = span.flags;
  data.tracestate.assign(span.tracestate);
  write_span_name(data.name, prefix, method);
  data.kind = kind;
  data.start_unix_ns = now_unix_ns();
  data.end_unix_ns = 0;
  data.status = SpanStatusCode::kUnset;
  data.status_message.clear();
  return record;
}

// ---- the server ------------------------------------------------------------------------------

// A sampled server call's Recv span, told of its messages by the call's thread.
class RecvSpan final : public CallTracer {
 public:
  RecvSpan(const void* owner, SpanRecord record) : owner_(owner), data_(std::move(record)) {}
  bool records_messages() const override { return true; }
  void on_outbound_message(std::size_t size, std::size_t compressed_size) override {
    std::lock_guard<std::mutex> lock(mutex_);
    add_message_event(data_, "Outbound message", sent_++, size, compressed_size);
  }
  void on_inbound_message(std::size_t size, std::size_t compressed_size) override {
    std::lock_guard<std::mutex> lock(mutex_);
    add_message_event(data_, "Inbound message", received_++, size, compressed_size);
  }
  SpanData end(const absl::Status& status) {
    std::lock_guard<std::mutex> lock(mutex_);
    set_status(data_.data, status);
    data_.data.end_unix_ns = now_unix_ns();
    return data_.take();
  }
  const void* owner() const { return owner_; }

 private:
  const void* const owner_;  // the interceptor that made it
  std::mutex mutex_;
  SpanRecord data_;
  std::int64_t sent_ = 0;
  std::int64_t received_ = 0;
};

class ServerTracing final : public ServerInterceptor {
 public:
  explicit ServerTracing(TracingOptions options) : options_(std::move(options)) {}

  asio::awaitable<absl::Status> on_start(ServerContext& ctx, const CallInfo& call) override {
    return ready_status(*start_now(ctx, call));
  }
  // What the server's chain calls: no coroutine.
  std::optional<absl::Status> start_now(ServerContext& ctx, const CallInfo& call) override {
    // A call that records nothing needs its context only if the handler asks for it (or makes a
    // child call): the headers are parsed and the span id drawn then, if ever.
    if (options_.processor == nullptr || surely_unsampled(ctx.client_metadata(), options_)) {
      ctx.defer_trace_context(&ServerTracing::resolve_context, this);
      return absl::OkStatus();
    }
    // A malformed or missing context is no context: a new trace (W3C §3.2.2), never an error.
    const TraceContext parent = extract_trace_context(ctx.client_metadata(), options_.propagation);
    TraceContext span = child_of(parent, options_);
    if (span.sampled() && options_.processor != nullptr) {
      ctx.set_call_tracer(std::allocate_shared<RecvSpan>(
          RecyclingAllocator<RecvSpan>(), this,
          open_span(*options_.processor, "Recv", call.method, SpanKind::kServer, span, parent,
                    /*parent_remote=*/true)));
    }
    ctx.set_trace_context(span);
    return absl::OkStatus();
  }
  // Spans take their times from the system clock: the chain need not time the call.
  bool uses_duration() const override { return false; }

  void on_finish(ServerContext& ctx, const CallInfo&, const CallOutcome& outcome) override {
    auto* span = dynamic_cast<RecvSpan*>(ctx.call_tracer());
    if (span == nullptr || span->owner() != this) return;
    options_.processor->on_end(span->end(outcome.status));
  }

 private:
  // ServerContext::TraceContextResolver: the deferred context, as start_now would have made it
  // (not sampled when surely_unsampled held; recorded by nobody when there is no processor).
  static void resolve_context(const void* self, const Metadata& metadata, TraceContext& out) {
    const TracingOptions& options = static_cast<const ServerTracing*>(self)->options_;
    out = child_of(extract_trace_context(metadata, options.propagation), options);
  }

  const TracingOptions options_;
};

// ---- the client ------------------------------------------------------------------------------

// An unsampled client call's tracer, shared by all of them: writes each attempt's headers with
// a fresh span id under the call's context (W3C: a context that is not sampled is still
// propagated), records nothing. Thread-safe (no state).
class PropagatingTracer final : public CallTracer {
 public:
  explicit PropagatingTracer(TracePropagation propagation) : propagation_(propagation) {}
  void add_attempt_headers(const TraceContext& call, TraceHeaders& out) override {
    TraceContext attempt;
    attempt.trace_id = call.trace_id;
    attempt.span_id = new_span_id();
    attempt.flags = call.flags;
    write_attempt_headers(propagation_, attempt, call.tracestate, out);
  }

 private:
  const TracePropagation propagation_;
};

constexpr std::string_view kSentPrefix = "Sent";

// A sampled client call's spans: Sent for the call, Attempt for the attempt under way. The
// attempt's headers are written as its stream is created, before its on_attempt_start hook:
// the span id chosen for them is the one the attempt's span then takes.
class ClientSpans final : public CallTracer {
 public:
  ClientSpans(const void* owner, BatchSpanProcessor& processor, TracePropagation propagation,
              SpanRecord sent)
      : owner_(owner), processor_(processor), propagation_(propagation), sent_(std::move(sent)) {}

  bool records_messages() const override { return true; }

  void add_attempt_headers(const TraceContext& call, TraceHeaders& out) override {
    TraceContext attempt;
    attempt.trace_id = call.trace_id;
    attempt.flags = call.flags;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (attempt_ && !attempt_headers_) {
        attempt.span_id = attempt_->data.span_id;  // the attempt started first (a Connect GET)
        attempt_headers_ = true;
      } else {
        pending_span_id_ = new_span_id();
        attempt.span_id = *pending_span_id_;
      }
    }
    write_attempt_headers(propagation_, attempt, call.tracestate, out);
  }

  void on_outbound_message(std::size_t size, std::size_t compressed_size) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (attempt_)
      add_message_event(*attempt_, "Outbound message", sent_messages_++, size, compressed_size);
  }
  void on_inbound_message(std::size_t size, std::size_t compressed_size) override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (attempt_)
      add_message_event(*attempt_, "Inbound message", received_messages_++, size, compressed_size);
  }

  void attempt_start(int previous_attempts, bool transparent) {
    std::lock_guard<std::mutex> lock(mutex_);
    TraceContext span;
    span.trace_id = sent_.data.trace_id;
    span.flags = sent_.data.flags;
    attempt_headers_ = pending_span_id_.has_value();
    span.span_id = pending_span_id_ ? *pending_span_id_ : new_span_id();
    pending_span_id_.reset();
    TraceContext parent;
    parent.trace_id = sent_.data.trace_id;
    parent.span_id = sent_.data.span_id;
    // The attempt's name is the call's with "Attempt" for "Sent" (no copy of the method kept).
    const std::string_view sent_name = sent_.data.name;
    attempt_ = open_span(processor_, "Attempt", {}, SpanKind::kInternal, span, parent,
                         /*parent_remote=*/false);
    attempt_->data.name.assign("Attempt");
    attempt_->data.name.append(sent_name.substr(std::min(sent_name.size(), kSentPrefix.size())));
    attempt_->data.tracestate.assign(sent_.data.tracestate);
    // gRFC A72: set as the attempt's span is created.
    set_attribute(attempt_->data.attributes, attempt_->attributes, "previous-rpc-attempts",
                  std::int64_t{previous_attempts});
    set_attribute(attempt_->data.attributes, attempt_->attributes, "transparent-retry",
                  transparent);
    sent_messages_ = 0;
    received_messages_ = 0;
  }

  std::optional<SpanData> attempt_end(const absl::Status& status) {
    std::lock_guard<std::mutex> lock(mutex_);
    return end_attempt_locked(status);
  }

  // The call is over: its open attempt (if any) and the Sent span.
  std::pair<std::optional<SpanData>, SpanData> finish(const absl::Status& status) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::optional<SpanData> attempt = end_attempt_locked(status);
    set_status(sent_.data, status);
    sent_.data.end_unix_ns = now_unix_ns();
    return {std::move(attempt), sent_.take()};
  }

  const void* owner() const { return owner_; }

 private:
  std::optional<SpanData> end_attempt_locked(const absl::Status& status) {
    if (!attempt_) return std::nullopt;
    set_status(attempt_->data, status);
    attempt_->data.end_unix_ns = now_unix_ns();
    std::optional<SpanData> ended = attempt_->take();
    attempt_.reset();
    return ended;
  }

  const void* const owner_;
  BatchSpanProcessor& processor_;  // where its records come from (TracingOptions::processor)
  const TracePropagation propagation_;
  std::mutex mutex_;  // the call's thread (messages, headers) and the hooks' may differ
  SpanRecord sent_;   // named kSentPrefix + ".<service>.<method>"
  std::optional<SpanRecord> attempt_;
  bool attempt_headers_ = false;  // attempt_'s id went out in its headers
  std::optional<std::array<std::uint8_t, 8>> pending_span_id_;  // headers written, not started
  std::int64_t sent_messages_ = 0;
  std::int64_t received_messages_ = 0;
};

class ClientTracing final : public ClientInterceptor {
 public:
  explicit ClientTracing(TracingOptions options)
      : options_(std::move(options)),
        propagating_(std::make_shared<PropagatingTracer>(options_.propagation)) {}

  asio::awaitable<absl::Status> on_start(ClientContext& ctx, const CallInfo& call) override {
    return ready_status(*start_now(ctx, call));
  }
  // What the channel's chain calls: no coroutine.
  std::optional<absl::Status> start_now(ClientContext& ctx, const CallInfo& call) override {
    const TraceContext& parent = ctx.trace_parent();
    TraceContext span = child_of(parent, options_);
    if (span.sampled() && options_.processor != nullptr) {
      ctx.set_call_tracer(std::allocate_shared<ClientSpans>(
          RecyclingAllocator<ClientSpans>(), this, *options_.processor, options_.propagation,
          open_span(*options_.processor, kSentPrefix, call.method, SpanKind::kClient, span, parent,
                    /*parent_remote=*/false)));
    } else {
      ctx.set_call_tracer(propagating_);
    }
    ctx.set_trace_context(span);
    return absl::OkStatus();
  }
  bool uses_duration() const override { return false; }

  void on_attempt_start(ClientContext& ctx, const CallInfo& call) override {
    if (ClientSpans* spans = ours(ctx)) {
      spans->attempt_start(call.previous_attempts, call.transparent_retry);
    }
  }

  void on_attempt_end(ClientContext& ctx, const CallInfo&, const CallOutcome& attempt) override {
    if (ClientSpans* spans = ours(ctx)) {
      if (auto ended = spans->attempt_end(attempt.status))
        options_.processor->on_end(std::move(*ended));
    }
  }

  void on_finish(ClientContext& ctx, const CallInfo&, const CallOutcome& outcome) override {
    if (ClientSpans* spans = ours(ctx)) {
      auto [attempt, sent] = spans->finish(outcome.status);
      if (attempt) options_.processor->on_end(std::move(*attempt));
      options_.processor->on_end(std::move(sent));
    }
  }

 private:
  ClientSpans* ours(ClientContext& ctx) const {
    CallTracer* tracer = ctx.call_tracer();
    if (tracer == nullptr || tracer == propagating_.get()) return nullptr;
    auto* spans = dynamic_cast<ClientSpans*>(tracer);
    return spans != nullptr && spans->owner() == this ? spans : nullptr;
  }

  const TracingOptions options_;
  const std::shared_ptr<PropagatingTracer> propagating_;
};

}  // namespace

bool trace_id_ratio_sampled(const std::array<std::uint8_t, 16>& trace_id, double ratio) {
  if (!(ratio > 0)) return false;  // 0, negative or NaN: never
  if (ratio >= 1) return true;
  std::uint64_t low = 0;
  for (std::size_t i = 8; i < 16; ++i) low = low << 8 | trace_id[i];
  const auto bound = static_cast<std::uint64_t>(ratio * 9223372036854775808.0);  // ratio x 2^63
  return (low >> 1) < bound;
}

std::shared_ptr<ServerInterceptor> make_server_tracing(TracingOptions options) {
  return std::make_shared<ServerTracing>(std::move(options));
}

std::shared_ptr<ClientInterceptor> make_client_tracing(TracingOptions options) {
  return std::make_shared<ClientTracing>(std::move(options));
}

void tracing_sampler_from_environment(TracingOptions& options, std::string* warning) {
  std::string warned;
  const char* sampler_env = std::getenv("OTEL_TRACES_SAMPLER");
  const char* arg_env = std::getenv("OTEL_TRACES_SAMPLER_ARG");
  std::string sampler = sampler_env == nullptr ? "" : sampler_env;
  for (char& c : sampler) {  // the specification reads enum values case-insensitively
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  // OTEL_TRACES_SAMPLER_ARG for the ratio samplers: a number in [0, 1], else 1 (unset).
  auto ratio_arg = [&]() -> double {
    if (arg_env == nullptr || *arg_env == '\0') return 1.0;
    char* end = nullptr;
    const double value = std::strtod(arg_env, &end);
    if (end == arg_env || *end != '\0' || !(value >= 0.0 && value <= 1.0)) {
      warned = "OTEL_TRACES_SAMPLER_ARG=\"" + std::string(arg_env).substr(0, 64) +
               "\" is not a ratio in [0, 1]: using 1";
      return 1.0;
    }
    return value;
  };
  auto set = [&](double ratio, bool parent_based) {
    options.sample_ratio = ratio;
    options.parent_based = parent_based;
  };
  if (sampler.empty()) {
    // Unset: options as the code set them (TracingOptions' defaults are parentbased_always_on).
  } else if (sampler == "parentbased_always_on") {
    set(1.0, true);
  } else if (sampler == "parentbased_always_off") {
    set(0.0, true);
  } else if (sampler == "parentbased_traceidratio") {
    set(ratio_arg(), true);
  } else if (sampler == "always_on") {
    set(1.0, false);
  } else if (sampler == "always_off") {
    set(0.0, false);
  } else if (sampler == "traceidratio") {
    set(ratio_arg(), false);
  } else {
    // Specification (SDK environment variables): an unrecognized value is logged and ignored,
    // as if the variable were unset.
    warned = "OTEL_TRACES_SAMPLER=\"" + sampler.substr(0, 64) +
             "\" is not a sampler ferry knows: ignored";
  }
  if (warning != nullptr) *warning = std::move(warned);
}

}  // namespace ferry
