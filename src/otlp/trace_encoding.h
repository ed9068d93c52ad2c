// The OTLP encoding of ferry::tracing's spans (ferry::otlp_tracing, private): a batch of
// SpanData turned into an ExportTraceServiceRequest, as the OpenTelemetry SDKs write it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ferry/tracing.h"
#include "opentelemetry/proto/collector/trace/v1/trace_service.pb.h"

namespace ferry::otlp_detail {

// Fills request with one ResourceSpans (resource: the attributes, in order), one ScopeSpans
// (scope "ferry") and a Span per SpanData, copied (the processor keeps the records' storage for
// the calls to record new spans into, ferry/tracing.h): ids as bytes, the parent's id (none for
// a root), trace_state, flags (the W3C trace flags, and whether the parent is remote, bits 8
// and 9), name, kind, times, attributes (int, bool, string values), events, and the status
// (its message only with ERROR, as OTLP says).
void encode_spans(const std::vector<SpanData>& batch,
                  const std::vector<std::pair<std::string, std::string>>& resource,
                  opentelemetry::proto::collector::trace::v1::ExportTraceServiceRequest& request);

}  // namespace ferry::otlp_detail
