// Whether this build runs under AddressSanitizer (scripts/test.sh's second phase builds the whole
// tree with -fsanitize=address,undefined). Tests scale their loads down under it (it is ~10x
// slower) and skip resident-memory bounds: its quarantine and its own allocator hold freed memory
// by design, so RSS says nothing about ferry there.
#pragma once

namespace ferry::testing {

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace ferry::testing
