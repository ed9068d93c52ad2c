// The Echo service of ferry.testing (test support): one method per call kind, driven by the
// knobs in echo.proto. Used by the transport tests and the loopback benchmarks.
#pragma once

#include "ferry/service.h"

namespace ferry::testing {

// A Service named "ferry.testing.Echo" with methods:
//   Echo    (unary)             one response: payload echoed or response_size bytes; echoes
//                               "initial-*" client metadata in the response headers and
//                               "trailing-*" in the trailers; status_code/delay_ms honoured.
//   Collect (client streaming)  counts the requests and their payload bytes.
//   Expand  (server streaming)  response_count responses of response_size bytes, delay_ms apart.
//   Chat    (bidi)              answers each request at once, like Echo.
Service make_echo_service();

}  // namespace ferry::testing
