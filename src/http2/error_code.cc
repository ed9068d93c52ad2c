// Implementation of src/http2/error_code.h.
#include "http2/error_code.h"

namespace ferry::http2 {

std::string_view error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kNoError:
      return "NO_ERROR";
    case ErrorCode::kProtocolError:
      return "PROTOCOL_ERROR";
    case ErrorCode::kInternalError:
      return "INTERNAL_ERROR";
    case ErrorCode::kFlowControlError:
      return "FLOW_CONTROL_ERROR";
    case ErrorCode::kSettingsTimeout:
      return "SETTINGS_TIMEOUT";
    case ErrorCode::kStreamClosed:
      return "STREAM_CLOSED";
    case ErrorCode::kFrameSizeError:
      return "FRAME_SIZE_ERROR";
    case ErrorCode::kRefusedStream:
      return "REFUSED_STREAM";
    case ErrorCode::kCancel:
      return "CANCEL";
    case ErrorCode::kCompressionError:
      return "COMPRESSION_ERROR";
    case ErrorCode::kConnectError:
      return "CONNECT_ERROR";
    case ErrorCode::kEnhanceYourCalm:
      return "ENHANCE_YOUR_CALM";
    case ErrorCode::kInadequateSecurity:
      return "INADEQUATE_SECURITY";
    case ErrorCode::kHttp11Required:
      return "HTTP_1_1_REQUIRED";
    case ErrorCode::kConnectionLost:
      return "connection lost";
  }
  return "unknown error code";
}

}  // namespace ferry::http2
