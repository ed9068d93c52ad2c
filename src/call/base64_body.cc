// Implementation of src/call/base64_body.h.
#include "call/base64_body.h"

#include "absl/strings/escaping.h"
#include "common/strings.h"

namespace ferry::detail {

bool Base64BodyDecoder::flush_run(std::string_view run, FrameDecoder& out) {
  if (run.empty()) return true;
  if (!absl::Base64Unescape(to_absl(run), &decoded_)) return false;
  out.push_copy(decoded_.data(), decoded_.size());
  return true;
}

bool Base64BodyDecoder::decode(std::string_view text, FrameDecoder& out) {
  pending_.append(text.data(), text.size());
  const std::size_t whole = pending_.size() / 4 * 4;
  // A group with padding ends a piece: decode up to and including it on its own, then go on.
  std::size_t run_start = 0;
  for (std::size_t group = 0; group < whole; group += 4) {
    if (pending_[group + 3] != '=') continue;
    if (!flush_run(std::string_view(pending_).substr(run_start, group + 4 - run_start), out)) {
      return false;
    }
    run_start = group + 4;
  }
  if (!flush_run(std::string_view(pending_).substr(run_start, whole - run_start), out)) {
    return false;
  }
  pending_.erase(0, whole);
  return true;
}

void append_base64(const SliceChain& bytes, SliceChain& out) {
  const std::string text = absl::Base64Escape(to_absl(bytes.to_string()));
  out.append_copy(text.data(), text.size());
}

}  // namespace ferry::detail
