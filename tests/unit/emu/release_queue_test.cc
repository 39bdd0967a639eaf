#include "transport/emu/release_queue.h"

#include <algorithm>
#include <initializer_list>
#include <vector>

#include "gtest/gtest.h"
#include "transport/base/rng.h"

namespace longhaul::emu {
namespace {

PendingDatagram At(int64_t t, uint32_t slot) {
  PendingDatagram d;
  d.deliver_ns = t;
  d.slot = slot;
  return d;
}

// Pushes each (deliver_ns, slot, in_order) in turn.
struct Pushed {
  int64_t t;
  uint32_t slot;
  bool in_order;
};
void PushAll(ReleaseQueue& q, std::initializer_list<Pushed> datagrams) {
  for (const Pushed& p : datagrams) q.Push(At(p.t, p.slot), p.in_order);
}

TEST(ReleaseQueueTest, EmptyHasNoDeadline) {
  ReleaseQueue q;
  PendingDatagram d;
  EXPECT_EQ(q.NextDeadline(), ReleaseQueue::kNever);
  EXPECT_FALSE(q.PopDue(ReleaseQueue::kNever, &d));
  EXPECT_TRUE(q.empty());
}

TEST(ReleaseQueueTest, ReleasesOnlyWhatIsDueInOrder) {
  ReleaseQueue q;
  PushAll(q, {{100, 1, true}, {200, 2, true}, {300, 3, true}});
  EXPECT_EQ(q.NextDeadline(), 100);
  PendingDatagram d;
  EXPECT_FALSE(q.PopDue(99, &d));
  ASSERT_TRUE(q.PopDue(250, &d));
  EXPECT_EQ(d.slot, 1u);
  ASSERT_TRUE(q.PopDue(250, &d));
  EXPECT_EQ(d.slot, 2u);
  EXPECT_FALSE(q.PopDue(250, &d));
  EXPECT_EQ(q.NextDeadline(), 300);
  EXPECT_EQ(q.size(), 1u);
}

TEST(ReleaseQueueTest, HeldBackDatagramsAreOvertakenAndMergedByTime) {
  ReleaseQueue q;
  PushAll(q, {{100, 1, true},
              {1100, 2, false},  // reordered: held back
              {200, 3, true},
              {250, 4, false},  // a duplicate copy
              {1200, 5, true}});
  EXPECT_EQ(q.fifo_size(), 3u);
  EXPECT_EQ(q.heap_size(), 2u);
  std::vector<uint32_t> order;
  PendingDatagram d;
  while (q.PopDue(ReleaseQueue::kNever, &d)) order.push_back(d.slot);
  EXPECT_EQ(order, (std::vector<uint32_t>{1, 3, 4, 2, 5}));
}

TEST(ReleaseQueueTest, TiesReleaseInPushOrderAcrossFifoAndHeap) {
  ReleaseQueue q;
  PushAll(q, {{100, 1, false}, {100, 2, true}, {100, 3, false}, {100, 4, true}});
  std::vector<uint32_t> order;
  PendingDatagram d;
  while (q.PopDue(100, &d)) order.push_back(d.slot);
  EXPECT_EQ(order, (std::vector<uint32_t>{1, 2, 3, 4}));
}

TEST(ReleaseQueueTest, BrokenInOrderPromiseGoesToTheHeap) {
  ReleaseQueue q;
  PushAll(q, {{500, 1, true},
              {100, 2, true}});  // earlier than the FIFO's tail
  EXPECT_EQ(q.heap_size(), 1u);
  PendingDatagram d;
  ASSERT_TRUE(q.PopDue(1000, &d));
  EXPECT_EQ(d.slot, 2u);
}

TEST(ReleaseQueueTest, RingGrowsAndWrapsWithoutLosingOrder) {
  ReleaseQueue q;
  int64_t t = 0;
  uint32_t next_in = 0, next_out = 0;
  PendingDatagram d;
  // Interleave pushes and pops so the ring wraps many times, then grow it past 1024.
  for (int round = 0; round < 50; ++round) {
    for (int i = 0; i < 700; ++i) q.Push(At(t += 10, next_in++), true);
    for (int i = 0; i < 600; ++i) {
      ASSERT_TRUE(q.PopDue(t, &d));
      ASSERT_EQ(d.slot, next_out++);
    }
  }
  while (q.PopDue(t, &d)) ASSERT_EQ(d.slot, next_out++);
  EXPECT_EQ(next_out, next_in);
}

TEST(ReleaseQueueTest, RandomMixMatchesASortedReference) {
  Rng rng(7);
  ReleaseQueue q;
  std::vector<PendingDatagram> ref;
  int64_t floor = 0;
  for (uint32_t i = 0; i < 5000; ++i) {
    const bool in_order = rng.Uniform() < 0.9;
    PendingDatagram p;
    if (in_order) {
      floor += static_cast<int64_t>(rng.UniformInt(50));
      p = At(floor, i);
    } else {
      p = At(floor + static_cast<int64_t>(rng.UniformInt(2000)), i);
    }
    q.Push(p, in_order);
    p.seq = i;
    ref.push_back(p);
  }
  std::stable_sort(ref.begin(), ref.end(), [](const PendingDatagram& a, const PendingDatagram& b) {
    return a.deliver_ns < b.deliver_ns;
  });
  // Release in steps of time, like a loop waking at intervals.
  size_t k = 0;
  PendingDatagram d;
  for (int64_t now = 0; k < ref.size(); now += 37) {
    while (q.PopDue(now, &d)) {
      ASSERT_LT(k, ref.size());
      EXPECT_LE(d.deliver_ns, now);
      ASSERT_EQ(d.slot, ref[k].slot) << "at " << k;
      ++k;
    }
    ASSERT_LT(now, int64_t{100000000}) << "queue did not drain";
  }
  EXPECT_TRUE(q.empty());
}

TEST(ReleaseQueueTest, DrainReturnsEverythingInOrder) {
  ReleaseQueue q;
  PushAll(q, {{300, 3, true}, {100, 1, false}, {400, 4, true}});
  std::vector<PendingDatagram> out;
  q.Drain(&out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].slot, 1u);
  EXPECT_EQ(out[2].slot, 4u);
  EXPECT_TRUE(q.empty());
}

}  // namespace
}  // namespace longhaul::emu
