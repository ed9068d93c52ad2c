// Implementation of src/http1/message_parts.h.
#include "http1/message_parts.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ferry::http1 {

bool WriteQueue::take_body(SliceChain& body, bool chunked) {
  const std::size_t ahead = unwritten();
  if (ahead >= kWriteAhead || body.empty()) return false;
  const std::size_t n = std::min(body.size(), kWriteAhead - ahead);
  if (chunked) append(absl::StrCat(absl::Hex(n), "\r\n"));
  out_.append(body.split_front(n));
  if (chunked) append("\r\n");
  return true;
}

void WriteQueue::flush(http2::ByteStream& stream, std::shared_ptr<http2::ByteStreamClient> client) {
  if (writing_now_ || out_.empty()) return;
  writing_ = std::move(out_);
  out_ = SliceChain();
  iov_.clear();
  writing_.append_buffers(iov_);
  writing_now_ = true;
  stream.async_write(iov_, std::move(client));
}

}  // namespace ferry::http1
