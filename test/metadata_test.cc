// Metadata: entries in arrival order, repeated keys, binary values, and storage that stays correct
// past its in-place capacity and across copies and moves.
#include "ferry/metadata.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace ferry::metadata_test {
namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

Pairs pairs_of(const Metadata& md) {
  Pairs out;
  for (const auto& [key, value] : md) out.emplace_back(key, value);
  return out;
}

TEST(Metadata, KeepsEntriesInArrivalOrderWithRepeatedKeys) {
  Metadata md;
  EXPECT_TRUE(md.empty());
  md.add("x-a", "1");
  md.add("x-b", "");
  md.add("x-a", "2");
  EXPECT_EQ(md.size(), 3u);
  EXPECT_EQ(pairs_of(md), (Pairs{{"x-a", "1"}, {"x-b", ""}, {"x-a", "2"}}));
  EXPECT_EQ(md.get("x-a"), "1");
  EXPECT_EQ(md.get("x-b"), "");
  EXPECT_EQ(md.get("x-c"), std::nullopt);
  EXPECT_EQ(md.get_all("x-a"), (std::vector<std::string_view>{"1", "2"}));
  md.clear();
  EXPECT_TRUE(md.empty());
  EXPECT_EQ(md.begin(), md.end());
}

TEST(Metadata, HoldsBinaryValuesWithNulBytes) {
  Metadata md;
  const std::string raw("\0\xff\x01 x", 5);
  md.add("trace-bin", raw);
  EXPECT_EQ(md.get("trace-bin"), std::string_view(raw));
}

TEST(Metadata, StaysIntactPastItsInPlaceCapacityAndAcrossCopiesAndMoves) {
  Metadata md;
  Pairs expected;
  for (int i = 0; i < 50; ++i) {  // far past the in-place bytes and entries
    std::string key = "key-" + std::to_string(i);
    std::string value(static_cast<std::size_t>(i * 7), static_cast<char>('a' + i % 26));
    md.add(key, value);
    expected.emplace_back(key, value);
  }
  EXPECT_EQ(pairs_of(md), expected);
  const Metadata copy = md;
  Metadata moved = std::move(md);
  EXPECT_EQ(pairs_of(copy), expected);
  EXPECT_EQ(pairs_of(moved), expected);
  moved.add("last", "entry");
  EXPECT_EQ(moved.get("last"), "entry");
  EXPECT_EQ(moved.get("key-49"), expected[49].second);
}

}  // namespace
}  // namespace ferry::metadata_test
