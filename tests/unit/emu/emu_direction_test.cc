#include "transport/emu/emu_direction.h"

#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/link_spec.h"
#include "transport/emu/ip_packet.h"

namespace longhaul::emu {
namespace {

using ::longhaul::testing::ParseTestLinkSpec;

constexpr int64_t kUs = 1000;
constexpr uint32_t kDatagram = 972;  // 1000 wire bytes: 8 us at 1 Gbit/s

// Puts `len` bytes of a recognisable pattern into a fresh slot.
uint32_t Fill(PacketPool& pool, uint32_t len, uint8_t seed) {
  uint32_t s = pool.Acquire();
  EXPECT_NE(s, PacketPool::kNoSlot);
  for (uint32_t i = 0; i < len && i < pool.slot_bytes(); ++i) {
    pool.Data(s)[i] = static_cast<uint8_t>(seed + i * 7);
  }
  return s;
}

TEST(EmuDirectionTest, ReleasesAtTheModelledTime) {
  PacketPool pool(9000, 1 << 24);
  EmuDirection dir(ParseTestLinkSpec("rate=1gbit,rtt=10ms"), 1, PayloadKind::kUdpPayload, &pool);
  sim::Verdict v = dir.Ingest(0, Fill(pool, kDatagram, 1), kDatagram, 3, 4, 0);
  ASSERT_FALSE(v.dropped());
  EXPECT_EQ(dir.NextDeadline(), 8 * kUs + 5000 * kUs);
  PendingDatagram d;
  EXPECT_FALSE(dir.PopDue(5007 * kUs, &d));
  ASSERT_TRUE(dir.PopDue(5008 * kUs, &d));
  EXPECT_EQ(d.bytes, kDatagram);
  EXPECT_EQ(d.flow, 3u);
  EXPECT_EQ(d.flow_gen, 4u);
  EXPECT_EQ(pool.Data(d.slot)[1], static_cast<uint8_t>(1 + 7));
  pool.Release(d.slot);
  EXPECT_EQ(pool.in_use(), 0u);
}

TEST(EmuDirectionTest, BackToBackDatagramsArePacedExactlyAtTheRate) {
  PacketPool pool(9000, size_t{1} << 28);
  EmuDirection dir(ParseTestLinkSpec("rate=1gbit,rtt=0,queue=1GB"), 1, PayloadKind::kUdpPayload,
                   &pool);
  PendingDatagram d;
  int64_t last = 0;
  // Offered all at once; released one every 8 us with no accumulated error.
  for (int i = 0; i < 10000; ++i) {
    dir.Ingest(0, Fill(pool, kDatagram, 0), kDatagram);
    while (dir.PopDue(0, &d)) pool.Release(d.slot);
  }
  int n = 0;
  while (dir.PopDue(ReleaseQueue::kNever, &d)) {
    ++n;
    EXPECT_EQ(d.deliver_ns, int64_t{n} * 8 * kUs);
    last = d.deliver_ns;
    pool.Release(d.slot);
  }
  EXPECT_EQ(n, 10000);
  EXPECT_EQ(last, 80000 * kUs);
}

TEST(EmuDirectionTest, ModelDropsReturnTheBuffer) {
  PacketPool pool(9000, 1 << 24);
  EmuDirection lossy(ParseTestLinkSpec("rate=1gbit,loss=1"), 1, PayloadKind::kUdpPayload, &pool);
  EXPECT_EQ(lossy.Ingest(0, Fill(pool, 100, 0), 100).drop, sim::DropReason::kLoss);
  EXPECT_EQ(pool.in_use(), 0u);
  EXPECT_EQ(lossy.pending(), 0u);
  EXPECT_EQ(lossy.ModelCounters(0).dropped_loss, 1u);
  EXPECT_EQ(lossy.counters().OwnDrops(), 0u);  // modelled loss is not the emulator's own

  EmuDirection small(ParseTestLinkSpec("rate=1gbit,mtu=1500"), 1, PayloadKind::kUdpPayload, &pool);
  // 1473 + 28 > 1500: too big (the relay offers a truncated datagram with its real size).
  EXPECT_EQ(small.Ingest(0, Fill(pool, 1473, 0), 1473).drop, sim::DropReason::kTooBig);
  EXPECT_FALSE(small.Ingest(0, Fill(pool, 1472, 0), 1472).dropped());
  EXPECT_EQ(pool.in_use(), 1u);
}

TEST(EmuDirectionTest, DuplicateIsAnIntactCopyAndCorruptionFlipsOneBitOfTheFirst) {
  PacketPool pool(9000, 1 << 24);
  EmuDirection dir(ParseTestLinkSpec("rate=1gbit,rtt=2ms,dup=1,corrupt=1"), 5,
                   PayloadKind::kUdpPayload, &pool);
  std::vector<uint8_t> original(kDatagram);
  const uint32_t slot = Fill(pool, kDatagram, 9);
  std::memcpy(original.data(), pool.Data(slot), kDatagram);
  sim::Verdict v = dir.Ingest(0, slot, kDatagram);
  ASSERT_TRUE(v.duplicate);
  ASSERT_GE(v.corrupt_bit, 0);
  EXPECT_EQ(dir.pending(), 2u);
  EXPECT_EQ(pool.in_use(), 2u);
  PendingDatagram first, second;
  ASSERT_TRUE(dir.PopDue(ReleaseQueue::kNever, &first));
  ASSERT_TRUE(dir.PopDue(ReleaseQueue::kNever, &second));
  EXPECT_LT(first.deliver_ns, second.deliver_ns);
  EXPECT_NE(first.slot, second.slot);
  int flipped = 0;
  for (uint32_t i = 0; i < kDatagram; ++i) {
    flipped += __builtin_popcount(pool.Data(first.slot)[i] ^ original[i]);
  }
  EXPECT_EQ(flipped, 1);
  EXPECT_EQ(pool.Data(first.slot)[v.corrupt_bit / 8] ^ original[v.corrupt_bit / 8],
            1 << (v.corrupt_bit % 8));
  EXPECT_EQ(std::memcmp(pool.Data(second.slot), original.data(), kDatagram), 0);
}

TEST(EmuDirectionTest, DuplicateWithoutABufferIsCountedAsTheEmulatorsOwnDrop) {
  PacketPool pool(64, 64 * PacketPool::kSlotsPerChunk);  // 256 slots
  EmuDirection dir(ParseTestLinkSpec("rate=1gbit,dup=1"), 1, PayloadKind::kUdpPayload, &pool);
  std::vector<uint32_t> held;
  while (pool.in_use() + 1 < pool.max_slots()) held.push_back(pool.Acquire());
  EXPECT_FALSE(dir.Ingest(0, pool.Acquire(), 10).dropped());
  EXPECT_EQ(dir.counters().dup_lost, 1u);
  EXPECT_EQ(dir.pending(), 1u);
  for (uint32_t s : held) pool.Release(s);
}

TEST(EmuDirectionTest, DatagramLongerThanItsBufferIsCountedAsTruncated) {
  PacketPool pool(64, 1);
  EmuDirection dir(ParseTestLinkSpec("rate=1gbit"), 1, PayloadKind::kUdpPayload, &pool);
  EXPECT_FALSE(dir.Ingest(0, pool.Acquire(), 1000).dropped());
  EXPECT_EQ(dir.counters().truncated, 1u);
  EXPECT_EQ(dir.pending(), 0u);
  EXPECT_EQ(pool.in_use(), 0u);
}

TEST(EmuDirectionTest, CeMarksOnlyEcnCapableDatagramsInTheirTos) {
  PacketPool pool(9000, 1 << 24);
  EmuDirection dir(ParseTestLinkSpec("rate=1gbit,rtt=1ms,ecn=1"), 1, PayloadKind::kUdpPayload,
                   &pool);
  dir.Ingest(0, Fill(pool, 100, 0), 100, 0, 0, 0x02);  // empty queue: not marked
  dir.Ingest(0, Fill(pool, 100, 0), 100, 0, 0, 0x02);  // ECT(0) behind it: CE
  dir.Ingest(0, Fill(pool, 100, 0), 100, 0, 0, 0xb8);  // DSCP EF, Not-ECT: untouched
  dir.Ingest(0, Fill(pool, 100, 0), 100, 0, 0, 0xb9);  // DSCP EF + ECT(1): CE, DSCP kept
  std::vector<uint8_t> tos;
  PendingDatagram d;
  while (dir.PopDue(ReleaseQueue::kNever, &d)) {
    tos.push_back(d.tos);
    pool.Release(d.slot);
  }
  EXPECT_EQ(tos, (std::vector<uint8_t>{0x02, 0x03, 0xb8, 0xbb}));
  EXPECT_EQ(dir.ModelCounters(0).ce_marked, 2u);
}

// A 60-byte IPv4/UDP packet with a valid header checksum.
std::vector<uint8_t> Ipv4Packet(uint8_t tos, size_t len = 60) {
  std::vector<uint8_t> p(len, 0);
  p[0] = 0x45;
  p[1] = tos;
  p[2] = static_cast<uint8_t>(len >> 8);
  p[3] = static_cast<uint8_t>(len);
  p[8] = 64;
  p[9] = 17;
  const uint8_t src[4] = {198, 18, 0, 1}, dst[4] = {198, 18, 0, 2};
  std::memcpy(&p[12], src, 4);
  std::memcpy(&p[16], dst, 4);
  const uint16_t c = InternetChecksum(p.data(), 20);
  p[10] = static_cast<uint8_t>(c >> 8);
  p[11] = static_cast<uint8_t>(c);
  return p;
}

TEST(EmuDirectionTest, IpPacketModeMarksCeInTheHeaderWithAValidChecksum) {
  PacketPool pool(9000, 1 << 24);
  EmuDirection dir(ParseTestLinkSpec("rate=1gbit,rtt=1ms,ecn=1"), 1, PayloadKind::kIpPacket, &pool);
  for (int i = 0; i < 3; ++i) {
    std::vector<uint8_t> p = Ipv4Packet(i == 2 ? 0x00 : 0x02);
    uint32_t s = pool.Acquire();
    std::memcpy(pool.Data(s), p.data(), p.size());
    dir.Ingest(0, s, static_cast<uint32_t>(p.size()));
  }
  PendingDatagram d;
  std::vector<uint8_t> ecn;
  while (dir.PopDue(ReleaseQueue::kNever, &d)) {
    ecn.push_back(IpPacketEcn(pool.Data(d.slot), d.bytes));
    EXPECT_EQ(InternetChecksum(pool.Data(d.slot), 20), 0) << "header checksum broken";
    pool.Release(d.slot);
  }
  EXPECT_EQ(ecn, (std::vector<uint8_t>{kEcnEct0, kEcnCe, kEcnNotEct}));
}

TEST(EmuDirectionTest, IpPacketModeCountsTheIpPacketAgainstTheMtu) {
  sim::LinkSpec s =
      EmuDirection::ModelSpec(ParseTestLinkSpec("rate=1gbit,mtu=1500"), PayloadKind::kIpPacket);
  EXPECT_EQ(s.overhead, 0u);
  EXPECT_EQ(s.mtu, 1500u);
  sim::LinkSpec e = EmuDirection::ModelSpec(ParseTestLinkSpec("rate=1gbit,mtu=1500,overhead=66"),
                                            PayloadKind::kIpPacket);
  EXPECT_EQ(e.overhead, 38u);  // Ethernet framing beyond the IP + UDP headers
  EXPECT_EQ(e.mtu, 1538u);
  PacketPool pool(1500, 1 << 24);
  EmuDirection dir(ParseTestLinkSpec("rate=1gbit,mtu=1500"), 1, PayloadKind::kIpPacket, &pool);
  EXPECT_FALSE(dir.Ingest(0, pool.Acquire(), 1500).dropped());
  EXPECT_EQ(dir.Ingest(0, pool.Acquire(), 1501).drop, sim::DropReason::kTooBig);
}

TEST(EmuDirectionTest, TimeGoingBackIsClampedNotFatal) {
  PacketPool pool(9000, 1 << 24);
  EmuDirection dir(ParseTestLinkSpec("rate=1gbit,rtt=2ms"), 1, PayloadKind::kUdpPayload, &pool);
  dir.Ingest(1000 * kUs, Fill(pool, kDatagram, 0), kDatagram);
  sim::Verdict v = dir.Ingest(500 * kUs, Fill(pool, kDatagram, 0), kDatagram);
  EXPECT_GE(v.deliver_at.ns(), 1000 * kUs + 1000 * kUs);
}

TEST(EmuDirectionTest, ReconfigureChangesTheRateForLaterDatagrams) {
  PacketPool pool(9000, 1 << 24);
  EmuDirection dir(ParseTestLinkSpec("rate=1gbit,queue=1GB"), 1, PayloadKind::kUdpPayload, &pool);
  PendingDatagram d;
  dir.Ingest(0, pool.Acquire(), kDatagram);  // 8 us at 1 Gbit/s
  dir.Reconfigure(ParseTestLinkSpec("rate=500mbit,queue=1GB"), 0);
  dir.Ingest(0, pool.Acquire(), kDatagram);  // 16 us at 500 Mbit/s, after the first
  ASSERT_TRUE(dir.PopDue(ReleaseQueue::kNever, &d));
  EXPECT_EQ(d.deliver_ns, 8 * kUs);
  pool.Release(d.slot);
  ASSERT_TRUE(dir.PopDue(ReleaseQueue::kNever, &d));
  EXPECT_EQ(d.deliver_ns, 24 * kUs);
  pool.Release(d.slot);
}

TEST(EmuDirectionTest, SameSeedSameFate) {
  PacketPool pool(9000, 1 << 26);
  EmuDirection a(ParseTestLinkSpec("rate=10gbit,loss=0.3,dup=0.1,reorder=0.1"), 42,
                 PayloadKind::kUdpPayload, &pool);
  EmuDirection b(ParseTestLinkSpec("rate=10gbit,loss=0.3,dup=0.1,reorder=0.1"), 42,
                 PayloadKind::kUdpPayload, &pool);
  EmuDirection c(ParseTestLinkSpec("rate=10gbit,loss=0.3,dup=0.1,reorder=0.1"), 43,
                 PayloadKind::kUdpPayload, &pool);
  int differ = 0;
  for (int i = 0; i < 2000; ++i) {
    sim::Verdict va = a.Ingest(i * kUs, pool.Acquire(), 500);
    sim::Verdict vb = b.Ingest(i * kUs, pool.Acquire(), 500);
    sim::Verdict vc = c.Ingest(i * kUs, pool.Acquire(), 500);
    ASSERT_EQ(va.drop, vb.drop);
    ASSERT_EQ(va.duplicate, vb.duplicate);
    ASSERT_EQ(va.deliver_at, vb.deliver_at);
    differ += va.drop != vc.drop;
    PendingDatagram d;
    for (EmuDirection* x : {&a, &b, &c}) {
      while (x->PopDue(ReleaseQueue::kNever, &d)) pool.Release(d.slot);
    }
  }
  EXPECT_GT(differ, 100);
}

TEST(EmuDirectionTest, DropPendingReturnsAllBuffers) {
  PacketPool pool(9000, 1 << 24);
  EmuDirection dir(ParseTestLinkSpec("rate=1gbit,rtt=1s,dup=0.5,reorder=0.5"), 1,
                   PayloadKind::kUdpPayload, &pool);
  for (int i = 0; i < 100; ++i) dir.Ingest(i, Fill(pool, 100, 0), 100);
  EXPECT_GT(pool.in_use(), 100u);
  EXPECT_EQ(dir.DropPending(), pool.peak_in_use());
  EXPECT_EQ(pool.in_use(), 0u);
}

}  // namespace
}  // namespace longhaul::emu
