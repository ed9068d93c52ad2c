// ferry::tracing's spans as OTLP (src/otlp/trace_encoding.h).
#include "otlp/trace_encoding.h"

#include <type_traits>

namespace ferry::otlp_detail {
namespace {

namespace pb = opentelemetry::proto;

// OTLP's SpanFlags: the parent's remoteness is known (bit 8) and true (bit 9).
constexpr std::uint32_t kContextHasIsRemote = 0x100;
constexpr std::uint32_t kContextIsRemote = 0x200;

template <std::size_t N>
std::string bytes_of(const std::array<std::uint8_t, N>& id) {
  return std::string(reinterpret_cast<const char*>(id.data()), N);
}

template <std::size_t N>
bool all_zero(const std::array<std::uint8_t, N>& id) {
  for (std::uint8_t b : id) {
    if (b != 0) return false;
  }
  return true;
}

void add_attributes(const std::vector<SpanAttribute>& attributes,
                    google::protobuf::RepeatedPtrField<pb::common::v1::KeyValue>& out) {
  out.Reserve(static_cast<int>(attributes.size()));
  for (const SpanAttribute& attribute : attributes) {
    pb::common::v1::KeyValue& kv = *out.Add();
    kv.set_key(attribute.key);
    std::visit(
        [&](const auto& value) {
          using T = std::decay_t<decltype(value)>;
          if constexpr (std::is_same_v<T, std::int64_t>) {
            kv.mutable_value()->set_int_value(value);
          } else if constexpr (std::is_same_v<T, bool>) {
            kv.mutable_value()->set_bool_value(value);
          } else {
            kv.mutable_value()->set_string_value(value);
          }
        },
        attribute.value);
  }
}

}  // namespace

void encode_spans(const std::vector<SpanData>& batch,
                  const std::vector<std::pair<std::string, std::string>>& resource,
                  pb::collector::trace::v1::ExportTraceServiceRequest& request) {
  pb::trace::v1::ResourceSpans& resource_spans = *request.add_resource_spans();
  for (const auto& [key, value] : resource) {
    pb::common::v1::KeyValue& kv = *resource_spans.mutable_resource()->add_attributes();
    kv.set_key(key);
    kv.mutable_value()->set_string_value(value);
  }
  pb::trace::v1::ScopeSpans& scope = *resource_spans.add_scope_spans();
  scope.mutable_scope()->set_name("ferry");
  scope.mutable_scope()->set_version("0.1");
  scope.mutable_spans()->Reserve(static_cast<int>(batch.size()));
  for (const SpanData& data : batch) {
    pb::trace::v1::Span& span = *scope.add_spans();
    span.set_trace_id(bytes_of(data.trace_id));
    span.set_span_id(bytes_of(data.span_id));
    if (!all_zero(data.parent_span_id)) span.set_parent_span_id(bytes_of(data.parent_span_id));
    span.set_trace_state(data.tracestate);
    span.set_flags(data.flags | kContextHasIsRemote |
                   (data.parent_is_remote ? kContextIsRemote : 0));
    span.set_name(data.name);
    span.set_kind(static_cast<pb::trace::v1::Span::SpanKind>(data.kind));
    span.set_start_time_unix_nano(static_cast<std::uint64_t>(data.start_unix_ns));
    span.set_end_time_unix_nano(static_cast<std::uint64_t>(data.end_unix_ns));
    add_attributes(data.attributes, *span.mutable_attributes());
    span.mutable_events()->Reserve(static_cast<int>(data.events.size()));
    for (const SpanEvent& event : data.events) {
      pb::trace::v1::Span::Event& out = *span.add_events();
      out.set_time_unix_nano(static_cast<std::uint64_t>(event.time_unix_ns));
      out.set_name(event.name);
      add_attributes(event.attributes, *out.mutable_attributes());
    }
    switch (data.status) {
      case SpanStatusCode::kUnset:
        break;
      case SpanStatusCode::kOk:
        span.mutable_status()->set_code(pb::trace::v1::Status::STATUS_CODE_OK);
        break;
      case SpanStatusCode::kError:
        span.mutable_status()->set_code(pb::trace::v1::Status::STATUS_CODE_ERROR);
        span.mutable_status()->set_message(data.status_message);
        break;
    }
  }
}

}  // namespace ferry::otlp_detail
