// HTTP/2 error codes (RFC 9113 section 7), as RST_STREAM and GOAWAY carry them (http2 layer,
// private), plus ferry's own code for a stream that died with its connection.
#pragma once

#include <cstdint>
#include <string_view>

namespace ferry::http2 {

enum class ErrorCode : std::uint32_t {
  kNoError = 0x0,
  kProtocolError = 0x1,
  kInternalError = 0x2,
  kFlowControlError = 0x3,
  kSettingsTimeout = 0x4,
  kStreamClosed = 0x5,
  kFrameSizeError = 0x6,
  kRefusedStream = 0x7,
  kCancel = 0x8,
  kCompressionError = 0x9,
  kConnectError = 0xa,
  kEnhanceYourCalm = 0xb,
  kInadequateSecurity = 0xc,
  kHttp11Required = 0xd,
  // Not an HTTP/2 code: the stream was closed because its connection was (lost or closed).
  kConnectionLost = 0x100,
};

// "CANCEL", "REFUSED_STREAM", ...; "unknown error code" for codes RFC 9113 does not define.
std::string_view error_code_name(ErrorCode code);

}  // namespace ferry::http2
