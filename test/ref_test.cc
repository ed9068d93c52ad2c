// common/ref.h: the handle that holds one of an intrusively counted object's references.
#include "common/ref.h"

#include <gtest/gtest.h>

#include <utility>

namespace ferry::detail::ref_test {
namespace {

// Counts its references; records how the last one went.
struct Counted {
  void ref() { ++refs; }
  void unref() {
    if (--refs == 0) ++deleted;
  }
  void unref_inline() {
    if (--refs == 0) ++deleted_inline;
  }
  int refs = 1;  // the creator's
  int deleted = 0;
  int deleted_inline = 0;
};

TEST(Ref, TakesANewReferenceAndLetsItGoAtScopeEnd) {
  Counted c;
  {
    Ref<Counted> r(&c);
    EXPECT_EQ(c.refs, 2);
    EXPECT_EQ(r.get(), &c);
  }
  EXPECT_EQ(c.refs, 1);
  EXPECT_EQ(c.deleted, 0);
}

TEST(Ref, AdoptTakesOverTheCreatorsReference) {
  Counted c;
  { Ref<Counted> r = Ref<Counted>::adopt(&c); }
  EXPECT_EQ(c.refs, 0);
  EXPECT_EQ(c.deleted, 1);
}

TEST(Ref, CopiesCountAndMovesDoNot) {
  Counted c;
  Ref<Counted> a(&c);
  Ref<Counted> b = a;
  EXPECT_EQ(c.refs, 3);
  Ref<Counted> m = std::move(b);
  EXPECT_EQ(c.refs, 3);
  EXPECT_FALSE(b);  // NOLINT(bugprone-use-after-move): moved-from is empty
  a = m;            // the same object: one released, one taken
  EXPECT_EQ(c.refs, 3);
  a = Ref<Counted>();
  EXPECT_EQ(c.refs, 2);
}

TEST(Ref, ResetInlineAndRelease) {
  Counted c;
  Ref<Counted> r = Ref<Counted>::adopt(&c);
  c.ref();  // a second holder
  Ref<Counted> second = Ref<Counted>::adopt(&c);
  Counted* raw = second.release();  // handed to a holder that counts by hand
  EXPECT_EQ(raw, &c);
  EXPECT_FALSE(second);
  EXPECT_EQ(c.refs, 2);
  r.reset_inline();
  EXPECT_EQ(c.refs, 1);
  raw->unref_inline();
  EXPECT_EQ(c.deleted_inline, 1);
  EXPECT_EQ(c.deleted, 0);
}

}  // namespace
}  // namespace ferry::detail::ref_test
