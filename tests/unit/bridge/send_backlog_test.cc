// The bridge's send backlog (tools/bridge/send_backlog.h): the long backlog while only
// bulk data is read, the short one from a small message that empties its socket until
// kInteractiveHold after the last, the floor at low rates.
#include "tools/bridge/send_backlog.h"

#include <cstdint>

#include "gtest/gtest.h"
#include "tools/bridge/stream_protocol.h"

namespace longhaul::bridge {
namespace {

constexpr Bandwidth kRate = Bandwidth::Gbps(10);
const uint64_t kShort = kRate.BytesIn(Duration::Milliseconds(2));  // 2.5 MB
const uint64_t kLong = kRate.BytesIn(Duration::Milliseconds(20));  // 25 MB

Time At(int64_t ms) { return Time::Zero() + Duration::Milliseconds(1000 + ms); }

TEST(SendBacklogTest, BulkReadsKeepTheLongBacklog) {
  SendBacklog b{SendBacklogOptions{}};
  EXPECT_EQ(b.Limit(At(0), kRate), kLong);
  b.OnRead(At(1), kChunk, kChunk);  // full chunks: the socket had more
  b.OnRead(At(2), 40 * 1024, kChunk);  // emptied the socket, but a bulk-sized read
  b.OnRead(At(3), 100, 100);  // small, but all that was asked (no credit for more)
  EXPECT_FALSE(b.interactive(At(3)));
  EXPECT_EQ(b.Limit(At(3), kRate), kLong);
}

TEST(SendBacklogTest, ASmallMessageKeepsTheShortBacklogForTheHold) {
  SendBacklog b{SendBacklogOptions{}};
  b.OnRead(At(0), 100, kChunk);  // a request: 100 bytes, the socket empty after it
  EXPECT_TRUE(b.interactive(At(0)));
  EXPECT_EQ(b.Limit(At(0), kRate), kShort);
  b.OnRead(At(10), kChunk, kChunk);  // bulk meanwhile does not end the hold
  const int64_t hold_ms = kInteractiveHold.ns() / 1000000;
  EXPECT_EQ(b.Limit(At(hold_ms - 1), kRate), kShort);
  EXPECT_EQ(b.Limit(At(hold_ms), kRate), kLong);
  // Each small message extends it.
  b.OnRead(At(hold_ms + 500), kInteractiveRead, kChunk);
  EXPECT_EQ(b.Limit(At(2 * hold_ms + 499), kRate), kShort);
  EXPECT_EQ(b.Limit(At(2 * hold_ms + 500), kRate), kLong);
}

TEST(SendBacklogTest, FlagsAndTheFloor) {
  SendBacklogOptions o;
  o.interactive = Duration::Milliseconds(1);
  o.bulk = Duration::Milliseconds(8);
  SendBacklog b{o};
  EXPECT_EQ(b.Limit(At(0), kRate), kRate.BytesIn(Duration::Milliseconds(8)));
  // 8 ms at 100 Mbit/s is 100 kB: below the floor.
  EXPECT_EQ(b.Limit(At(0), Bandwidth::Mbps(100)), o.min_bytes);
  EXPECT_EQ(b.Limit(At(0), Bandwidth::Zero()), o.min_bytes);
  b.OnRead(At(0), 1, 2);
  EXPECT_EQ(b.Limit(At(0), kRate), kRate.BytesIn(Duration::Milliseconds(1)));
}

}  // namespace
}  // namespace longhaul::bridge
