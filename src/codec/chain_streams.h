// Private to the codec layer: protobuf zero-copy streams over a SliceChain, so that messages
// larger than a block serialize straight into pooled blocks and parse straight from the slices
// they arrived in.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ferry/slice_chain.h"
#include "google/protobuf/io/zero_copy_stream.h"

namespace ferry::detail {

// Appends to a chain block by block. Bytes become part of the chain at the next Next() or at
// finish(); call finish() (after any CodedOutputStream over it is gone) before reading the chain.
class ChainOutputStream final : public google::protobuf::io::ZeroCopyOutputStream {
 public:
  explicit ChainOutputStream(SliceChain& chain) : chain_(chain) {}
  ~ChainOutputStream() override { finish(); }

  bool Next(void** data, int* size) override;
  void BackUp(int count) override;
  int64_t ByteCount() const override { return byte_count_; }

  void finish();

 private:
  SliceChain& chain_;
  std::size_t pending_ = 0;  // handed out by the last Next(), not yet committed
  int64_t byte_count_ = 0;
};

// Reads a chain's slices in order, without copying.
class ChainInputStream final : public google::protobuf::io::ZeroCopyInputStream {
 public:
  explicit ChainInputStream(const SliceChain& chain) : chain_(chain) {}

  bool Next(const void** data, int* size) override;
  void BackUp(int count) override;
  bool Skip(int count) override;
  int64_t ByteCount() const override { return byte_count_; }

 private:
  const SliceChain& chain_;
  std::size_t index_ = 0;   // next slice to hand out
  std::size_t backed_ = 0;  // bytes of slice index_ - 1 given back by BackUp
  int64_t byte_count_ = 0;
};

}  // namespace ferry::detail
