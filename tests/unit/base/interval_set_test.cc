// IntervalSet against a brute-force model: adds, removes, overlaps, EraseBelow.
#include "transport/base/interval_set.h"

#include <set>

#include "transport/base/rng.h"
#include "gtest/gtest.h"

namespace longhaul {
namespace {

TEST(IntervalSetTest, MatchesABruteForceModel) {
  Rng r(1);
  IntervalSet s;
  std::set<uint64_t> model;
  for (int i = 0; i < 3000; ++i) {
    uint64_t a = r.UniformInt(500), b = a + r.UniformInt(20);
    if (r.Bernoulli(0.7)) {
      uint64_t fresh = 0;
      for (uint64_t v = a; v < b; ++v)
        fresh += model.insert(v).second;
      EXPECT_EQ(s.Add(a, b), fresh);
    } else {
      s.Remove(a, b);
      for (uint64_t v = a; v < b; ++v)
        model.erase(v);
    }
    ASSERT_EQ(s.total(), model.size());
  }
  for (uint64_t v = 0; v < 530; ++v)
    EXPECT_EQ(s.Contains(v), model.count(v) == 1) << v;
  // Intervals are disjoint and not adjacent.
  uint64_t prev_end = 0;
  bool first = true;
  for (auto [a, b] : s.intervals()) {
    EXPECT_LT(a, b);
    if (!first) {
      EXPECT_GT(a, prev_end);
    }
    prev_end = b;
    first = false;
  }
  s.EraseBelow(250);
  for (uint64_t v = 0; v < 250; ++v)
    EXPECT_FALSE(s.Contains(v));
}

TEST(IntervalSetTest, OverlapsMatchesABruteForceModel) {
  Rng r(3);
  IntervalSet s;
  std::set<uint64_t> model;
  for (int i = 0; i < 40; ++i) {
    const uint64_t a = r.UniformInt(300), b = a + r.UniformInt(15);
    s.Add(a, b);
    for (uint64_t v = a; v < b; ++v)
      model.insert(v);
  }
  for (uint64_t a = 0; a < 320; ++a) {
    for (uint64_t b = a; b < a + 20; ++b) {
      bool any = false;
      for (uint64_t v = a; v < b; ++v)
        any = any || model.count(v) == 1;
      ASSERT_EQ(s.Overlaps(a, b), any) << a << " " << b;
    }
  }
}

} // namespace
} // namespace longhaul
