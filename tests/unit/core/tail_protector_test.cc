// TailProtector over a synthetic sent-packet table and send stream: newest first, each
// packet at most once, only recent and still unacknowledged ones.
#include "transport/core/send/tail_protector.h"

#include <vector>

#include "gtest/gtest.h"
#include "transport/core/send/send_stream.h"
#include "transport/core/send/sent_packet_table.h"

namespace longhaul {
namespace {

const Time kT0 = Time::Zero() + Duration::Seconds(1);
constexpr Duration kSrtt = Duration::Milliseconds(10);
constexpr uint64_t kUnits = 100;  // stream units per packet

class Fixture {
 public:
  Fixture() {
    static const std::vector<uint8_t> data(100000);
    stream_.Push(data.data(), data.size(), nullptr, 0);
  }
  // Sends a data packet of kUnits new units at `at`.
  PacketNumber Send(Time at) {
    uint64_t start = 0, units = 0;
    EXPECT_TRUE(stream_.TakeUnsent(kUnits, ~uint64_t{0}, &start, &units));
    const PacketNumber pn = sent_.next_packet_number();
    SentPacket& p = sent_.Add();
    p.sent_time = at;
    p.stream_start = start;
    p.stream_units = static_cast<uint32_t>(units);
    tail_.OnDataPacketSent(at, pn, kSrtt, &sent_);
    return pn;
  }
  // The copies NextCopy hands out at `now`, by first unit / kUnits (= packet number).
  std::vector<uint64_t> Copies(Time now) {
    std::vector<uint64_t> got;
    uint64_t start = 0, units = 0;
    while (tail_.NextCopy(now, kSrtt, stream_, &sent_, &start, &units)) {
      EXPECT_EQ(units, kUnits);
      got.push_back(start / kUnits);
    }
    return got;
  }

  SendStream stream_;
  SentPacketTable sent_;
  TailProtector tail_;
};

TEST(TailProtectorTest, NewestFirstAndEachOnce) {
  Fixture f;
  for (int i = 0; i < 4; ++i) f.Send(kT0 + Duration::Milliseconds(i));
  EXPECT_EQ(f.Copies(kT0 + Duration::Milliseconds(5)), (std::vector<uint64_t>{3, 2, 1, 0}));
  EXPECT_TRUE(f.sent_.Get(2).tail_copied);
  EXPECT_FALSE(f.tail_.has_candidates());
  EXPECT_TRUE(f.Copies(kT0 + Duration::Milliseconds(5)).empty());
}

TEST(TailProtectorTest, OnlyPacketsSentWithinTheLastRtt) {
  Fixture f;
  for (int i = 0; i < 6; ++i) f.Send(kT0 + Duration::Milliseconds(2 * i));  // 0, 2, .. 10 ms
  // At 14 ms the packets sent at 4 ms and later are within 10 ms; the scan stops at the
  // first older one and drops the rest.
  EXPECT_EQ(f.Copies(kT0 + Duration::Milliseconds(14)), (std::vector<uint64_t>{5, 4, 3, 2}));
  EXPECT_FALSE(f.tail_.has_candidates());
  EXPECT_FALSE(f.sent_.Get(1).tail_copied);
}

TEST(TailProtectorTest, SkipsFinishedCopiedAndAcknowledgedPackets) {
  Fixture f;
  for (int i = 0; i < 5; ++i) f.Send(kT0);
  f.sent_.Finish(4);                  // acknowledged or lost: no copy
  f.sent_.Get(3).tail_copied = true;  // already copied
  f.stream_.Ack(2 * kUnits, kUnits);  // its units were acknowledged in another packet
  EXPECT_EQ(f.Copies(kT0), (std::vector<uint64_t>{1, 0}));
}

TEST(TailProtectorTest, PartlyAcknowledgedPacketsAreStillCopied) {
  Fixture f;
  f.Send(kT0);
  f.stream_.Ack(0, kUnits / 2);
  EXPECT_EQ(f.Copies(kT0), (std::vector<uint64_t>{0}));
}

TEST(TailProtectorTest, SendingTrimsOldAndReleasedCandidates) {
  Fixture f;
  for (int i = 0; i < 3; ++i) f.Send(kT0);
  EXPECT_EQ(f.tail_.candidates(), 3u);
  // 20 ms later the three are older than an RTT: the next send drops them.
  f.Send(kT0 + Duration::Milliseconds(20));
  EXPECT_EQ(f.tail_.candidates(), 1u);
  // A candidate released from the table (acknowledged and forgotten) is skipped.
  for (PacketNumber pn = 0; pn < 4; ++pn) f.sent_.Finish(pn);
  f.sent_.ReleaseFront([](const SentPacket& p) { return p.finished; });
  EXPECT_TRUE(f.Copies(kT0 + Duration::Milliseconds(20)).empty());
}

}  // namespace
}  // namespace longhaul
