// HPACK's Huffman code (RFC 7541 Appendix B) and the decoding state machine built from it at
// compile time (http2 layer, private). See huffman.h.
#include "http2/hpack/huffman.h"

#include <array>

namespace ferry::http2::hpack {
namespace {

struct Code {
  std::uint32_t bits;   // the code, aligned to the least significant bit
  std::uint8_t length;  // in bits, 5 to 30
};

// RFC 7541 Appendix B: the code of each symbol 0..255, then EOS (256).
constexpr std::array<Code, 257> kCodes = {{
    {0x1ff8, 13},     {0x7fffd8, 23},   {0xfffffe2, 28},  {0xfffffe3, 28},  {0xfffffe4, 28},
    {0xfffffe5, 28},  {0xfffffe6, 28},  {0xfffffe7, 28},  {0xfffffe8, 28},  {0xffffea, 24},
    {0x3ffffffc, 30}, {0xfffffe9, 28},  {0xfffffea, 28},  {0x3ffffffd, 30}, {0xfffffeb, 28},
    {0xfffffec, 28},  {0xfffffed, 28},  {0xfffffee, 28},  {0xfffffef, 28},  {0xffffff0, 28},
    {0xffffff1, 28},  {0xffffff2, 28},  {0x3ffffffe, 30}, {0xffffff3, 28},  {0xffffff4, 28},
    {0xffffff5, 28},  {0xffffff6, 28},  {0xffffff7, 28},  {0xffffff8, 28},  {0xffffff9, 28},
    {0xffffffa, 28},  {0xffffffb, 28},  {0x14, 6},        {0x3f8, 10},      {0x3f9, 10},
    {0xffa, 12},      {0x1ff9, 13},     {0x15, 6},        {0xf8, 8},        {0x7fa, 11},
    {0x3fa, 10},      {0x3fb, 10},      {0xf9, 8},        {0x7fb, 11},      {0xfa, 8},
    {0x16, 6},        {0x17, 6},        {0x18, 6},        {0x0, 5},         {0x1, 5},
    {0x2, 5},         {0x19, 6},        {0x1a, 6},        {0x1b, 6},        {0x1c, 6},
    {0x1d, 6},        {0x1e, 6},        {0x1f, 6},        {0x5c, 7},        {0xfb, 8},
    {0x7ffc, 15},     {0x20, 6},        {0xffb, 12},      {0x3fc, 10},      {0x1ffa, 13},
    {0x21, 6},        {0x5d, 7},        {0x5e, 7},        {0x5f, 7},        {0x60, 7},
    {0x61, 7},        {0x62, 7},        {0x63, 7},        {0x64, 7},        {0x65, 7},
    {0x66, 7},        {0x67, 7},        {0x68, 7},        {0x69, 7},        {0x6a, 7},
    {0x6b, 7},        {0x6c, 7},        {0x6d, 7},        {0x6e, 7},        {0x6f, 7},
    {0x70, 7},        {0x71, 7},        {0x72, 7},        {0xfc, 8},        {0x73, 7},
    {0xfd, 8},        {0x1ffb, 13},     {0x7fff0, 19},    {0x1ffc, 13},     {0x3ffc, 14},
    {0x22, 6},        {0x7ffd, 15},     {0x3, 5},         {0x23, 6},        {0x4, 5},
    {0x24, 6},        {0x5, 5},         {0x25, 6},        {0x26, 6},        {0x27, 6},
    {0x6, 5},         {0x74, 7},        {0x75, 7},        {0x28, 6},        {0x29, 6},
    {0x2a, 6},        {0x7, 5},         {0x2b, 6},        {0x76, 7},        {0x2c, 6},
    {0x8, 5},         {0x9, 5},         {0x2d, 6},        {0x77, 7},        {0x78, 7},
    {0x79, 7},        {0x7a, 7},        {0x7b, 7},        {0x7ffe, 15},     {0x7fc, 11},
    {0x3ffd, 14},     {0x1ffd, 13},     {0xffffffc, 28},  {0xfffe6, 20},    {0x3fffd2, 22},
    {0xfffe7, 20},    {0xfffe8, 20},    {0x3fffd3, 22},   {0x3fffd4, 22},   {0x3fffd5, 22},
    {0x7fffd9, 23},   {0x3fffd6, 22},   {0x7fffda, 23},   {0x7fffdb, 23},   {0x7fffdc, 23},
    {0x7fffdd, 23},   {0x7fffde, 23},   {0xffffeb, 24},   {0x7fffdf, 23},   {0xffffec, 24},
    {0xffffed, 24},   {0x3fffd7, 22},   {0x7fffe0, 23},   {0xffffee, 24},   {0x7fffe1, 23},
    {0x7fffe2, 23},   {0x7fffe3, 23},   {0x7fffe4, 23},   {0x1fffdc, 21},   {0x3fffd8, 22},
    {0x7fffe5, 23},   {0x3fffd9, 22},   {0x7fffe6, 23},   {0x7fffe7, 23},   {0xffffef, 24},
    {0x3fffda, 22},   {0x1fffdd, 21},   {0xfffe9, 20},    {0x3fffdb, 22},   {0x3fffdc, 22},
    {0x7fffe8, 23},   {0x7fffe9, 23},   {0x1fffde, 21},   {0x7fffea, 23},   {0x3fffdd, 22},
    {0x3fffde, 22},   {0xfffff0, 24},   {0x1fffdf, 21},   {0x3fffdf, 22},   {0x7fffeb, 23},
    {0x7fffec, 23},   {0x1fffe0, 21},   {0x1fffe1, 21},   {0x3fffe0, 22},   {0x1fffe2, 21},
    {0x7fffed, 23},   {0x3fffe1, 22},   {0x7fffee, 23},   {0x7fffef, 23},   {0xfffea, 20},
    {0x3fffe2, 22},   {0x3fffe3, 22},   {0x3fffe4, 22},   {0x7ffff0, 23},   {0x3fffe5, 22},
    {0x3fffe6, 22},   {0x7ffff1, 23},   {0x3ffffe0, 26},  {0x3ffffe1, 26},  {0xfffeb, 20},
    {0x7fff1, 19},    {0x3fffe7, 22},   {0x7ffff2, 23},   {0x3fffe8, 22},   {0x1ffffec, 25},
    {0x3ffffe2, 26},  {0x3ffffe3, 26},  {0x3ffffe4, 26},  {0x7ffffde, 27},  {0x7ffffdf, 27},
    {0x3ffffe5, 26},  {0xfffff1, 24},   {0x1ffffed, 25},  {0x7fff2, 19},    {0x1fffe3, 21},
    {0x3ffffe6, 26},  {0x7ffffe0, 27},  {0x7ffffe1, 27},  {0x3ffffe7, 26},  {0x7ffffe2, 27},
    {0xfffff2, 24},   {0x1fffe4, 21},   {0x1fffe5, 21},   {0x3ffffe8, 26},  {0x3ffffe9, 26},
    {0xffffffd, 28},  {0x7ffffe3, 27},  {0x7ffffe4, 27},  {0x7ffffe5, 27},  {0xfffec, 20},
    {0xfffff3, 24},   {0xfffed, 20},    {0x1fffe6, 21},   {0x3fffe9, 22},   {0x1fffe7, 21},
    {0x1fffe8, 21},   {0x7ffff3, 23},   {0x3fffea, 22},   {0x3fffeb, 22},   {0x1ffffee, 25},
    {0x1ffffef, 25},  {0xfffff4, 24},   {0xfffff5, 24},   {0x3ffffea, 26},  {0x7ffff4, 23},
    {0x3ffffeb, 26},  {0x7ffffe6, 27},  {0x3ffffec, 26},  {0x3ffffed, 26},  {0x7ffffe7, 27},
    {0x7ffffe8, 27},  {0x7ffffe9, 27},  {0x7ffffea, 27},  {0x7ffffeb, 27},  {0xffffffe, 28},
    {0x7ffffec, 27},  {0x7ffffed, 27},  {0x7ffffee, 27},  {0x7ffffef, 27},  {0x7fffff0, 27},
    {0x3ffffee, 26},  {0x3fffffff, 30},
}};
constexpr int kEos = 256;

// The decoding state machine: a state is an internal node of the code's binary tree (256 of
// them for 257 leaves; 0 is the root); each step consumes 4 bits. Since the shortest code is 5
// bits long, a step completes at most one symbol.
enum : std::uint8_t {
  kEmit = 1,    // the step completed `symbol`
  kFail = 2,    // the step reached EOS (RFC 7541 §5.2: a decoding error)
  kAccept = 4,  // the string may end after this step: since the last symbol, only ones, fewer
                // than 8 (the padding rule of §5.2)
};
struct Step {
  std::uint8_t next;
  std::uint8_t symbol;
  std::uint8_t flags;
};
using StepTable = std::array<std::array<Step, 16>, 256>;

struct Tree {
  // children[node][bit]: an internal node's id, or 256 + symbol for a leaf; -1 for none yet.
  std::array<std::array<int, 2>, 256> children{};
  // How many ones lead from the root to the node, when only ones do; -1 otherwise.
  std::array<int, 256> ones_depth{};
};

constexpr Tree build_tree() {
  Tree tree;
  for (auto& node : tree.children) node = {-1, -1};
  for (auto& depth : tree.ones_depth) depth = -1;
  tree.ones_depth[0] = 0;
  int nodes = 1;
  for (int symbol = 0; symbol <= kEos; ++symbol) {
    const Code code = kCodes[symbol];
    int node = 0;
    for (int i = code.length - 1; i > 0; --i) {
      const int bit = (code.bits >> i) & 1;
      int& child = tree.children[node][bit];
      if (child < 0) {
        child = nodes++;
        if (bit == 1 && tree.ones_depth[node] >= 0) {
          tree.ones_depth[child] = tree.ones_depth[node] + 1;
        }
      }
      node = child;
    }
    tree.children[node][code.bits & 1] = 256 + symbol;
  }
  return tree;
}

constexpr StepTable build_steps() {
  const Tree tree = build_tree();
  StepTable table{};
  for (int state = 0; state < 256; ++state) {
    for (int nibble = 0; nibble < 16; ++nibble) {
      Step step{0, 0, 0};
      int node = state;
      for (int i = 3; i >= 0; --i) {
        const int child = tree.children[node][(nibble >> i) & 1];
        if (child >= 256) {
          if (child - 256 == kEos) {
            step.flags |= kFail;
            break;
          }
          step.flags |= kEmit;
          step.symbol = static_cast<std::uint8_t>(child - 256);
          node = 0;
        } else {
          node = child;
        }
      }
      if (!(step.flags & kFail)) {
        step.next = static_cast<std::uint8_t>(node);
        const int ones = tree.ones_depth[node];
        if (ones >= 0 && ones <= 7) step.flags |= kAccept;
      }
      table[state][nibble] = step;
    }
  }
  return table;
}

constexpr StepTable kSteps = build_steps();
static_assert(kSteps[0][0].flags == 0 && kSteps[0][0].next != 0);  // '0' is 00000: no symbol yet
static_assert(kSteps[0][15].flags == kAccept);                     // four ones: padding so far

constexpr std::array<std::uint8_t, 256> code_lengths() {
  std::array<std::uint8_t, 256> lengths{};
  for (int i = 0; i < 256; ++i) lengths[i] = kCodes[i].length;
  return lengths;
}
constexpr std::array<std::uint8_t, 256> kLengths = code_lengths();

template <bool kWrite>
HuffmanDecoded decode(const std::uint8_t* in, std::size_t size, char* out, std::size_t room) {
  std::size_t written = 0;
  std::uint8_t state = 0;
  std::uint8_t flags = kAccept;
  if (!kWrite || room > size * 8 / 5) {
    // Room for more than the longest possible output (5-bit codes): no check per symbol, and no
    // branch either: a step's symbol is stored whether it completed one or not (the next one
    // overwrites it), and a failed step is noted and judged at the end.
    std::uint8_t seen = 0;
    for (std::size_t i = 0; i < size; ++i) {
      const std::uint8_t byte = in[i];
      Step step = kSteps[state][byte >> 4];
      if constexpr (kWrite) out[written] = static_cast<char>(step.symbol);
      written += step.flags & kEmit;
      seen |= step.flags;
      step = kSteps[step.next][byte & 0xf];
      if constexpr (kWrite) out[written] = static_cast<char>(step.symbol);
      written += step.flags & kEmit;
      seen |= step.flags;
      state = step.next;
      flags = step.flags;
    }
    if ((seen & kFail) || !(flags & kAccept)) return {HuffmanResult::kInvalid, 0};
    return {HuffmanResult::kOk, written};
  }
  for (std::size_t i = 0; i < size; ++i) {
    const std::uint8_t byte = in[i];
    for (const std::uint8_t nibble :
         {static_cast<std::uint8_t>(byte >> 4), static_cast<std::uint8_t>(byte & 0xf)}) {
      const Step step = kSteps[state][nibble];
      if (step.flags & kFail) return {HuffmanResult::kInvalid, 0};
      if (step.flags & kEmit) {
        if (written == room) return {HuffmanResult::kTooLong, 0};
        out[written] = static_cast<char>(step.symbol);
        ++written;
      }
      state = step.next;
      flags = step.flags;
    }
  }
  if (!(flags & kAccept)) return {HuffmanResult::kInvalid, 0};
  return {HuffmanResult::kOk, written};
}

}  // namespace

std::size_t huffman_encoded_size(std::string_view text) {
  std::size_t bits = 0;
  for (const char c : text) bits += kLengths[static_cast<std::uint8_t>(c)];
  return (bits + 7) / 8;
}

std::uint8_t* huffman_encode(std::string_view text, std::uint8_t* out) {
  std::uint64_t pending = 0;  // fewer than 8 bits left over between symbols, then up to 30 more
  int pending_bits = 0;
  for (const char c : text) {
    const Code code = kCodes[static_cast<std::uint8_t>(c)];
    pending = (pending << code.length) | code.bits;
    pending_bits += code.length;
    while (pending_bits >= 8) {
      pending_bits -= 8;
      *out++ = static_cast<std::uint8_t>(pending >> pending_bits);
    }
  }
  if (pending_bits > 0) {
    // RFC 7541 §5.2: padded with the most significant bits of EOS, all ones.
    *out++ = static_cast<std::uint8_t>((pending << (8 - pending_bits)) | (0xffu >> pending_bits));
  }
  return out;
}

HuffmanDecoded huffman_decode(const std::uint8_t* encoded, std::size_t size, char* out,
                              std::size_t room) {
  return decode<true>(encoded, size, out, room);
}

HuffmanDecoded huffman_validate(const std::uint8_t* encoded, std::size_t size) {
  return decode<false>(encoded, size, nullptr, 0);
}

}  // namespace ferry::http2::hpack
