// splitmix64 (private, any layer): a small, fast random source for draws that need no secrecy
// (weighted picks, runtime fractions) and to seed larger generators. Seeded by the caller (a fixed
// seed in tests); each next() advances the state by the golden-ratio step and mixes it.
#pragma once

#include <cstdint>

namespace ferry::detail {

struct SplitMix64 {
  std::uint64_t state = 0;
  std::uint64_t next() {
    std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, bound), bound > 0 (the modulo's bias is under 2^-31 for bounds within 2^33).
  std::uint64_t below(std::uint64_t bound) { return next() % bound; }
};

}  // namespace ferry::detail
