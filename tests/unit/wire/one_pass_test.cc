// One pass over the payload: a PacketWriter that defers DATA payloads writes the same
// datagram as one that copies them (checksummed while copying), or lists them for the
// sealer; FindDataPayload finds a DATA payload from a decrypted prefix of the frames.
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "transport/wire/crc32c.h"
#include "transport/wire/packet.h"

namespace longhaul::wire {
namespace {

std::vector<uint8_t> Message(size_t n) {
  std::vector<uint8_t> m(n);
  for (size_t i = 0; i < n; ++i) m[i] = static_cast<uint8_t>(i * 31 + i / 97);
  return m;
}

DataFrame Data(uint64_t id, const std::vector<uint8_t>& m, uint64_t off, uint64_t len) {
  DataFrame f;
  f.message_id = id;
  f.message_length = m.size();
  f.offset = off;
  f.length = len;
  f.payload = m.data() + off;
  f.flags = off + len == m.size() ? kDataFlagLast : 0;
  return f;
}

// Writes a header, an ACK and DATA pieces (a long one, a short one, a long one); with
// `by_reference`, the first two name memory region 5 and the writer sends by reference.
size_t Build(uint8_t* buf, size_t cap, Integrity integrity, bool defer,
             const std::vector<uint8_t>& m, std::vector<DeferredPayload>* deferred = nullptr,
             bool by_reference = false) {
  PacketWriter w(buf, cap, integrity);
  w.set_defer_payload(defer);
  w.set_payload_by_reference(by_reference);
  PacketHeader h;
  h.connection_id = 77;
  h.packet_number = 1234;
  w.WriteHeader(h);
  AckFrame ack;
  ack.largest = 99;
  const AckRange r{90, 99};
  EXPECT_EQ(w.WriteAck(ack, std::span<const AckRange>(&r, 1), 1), 1u);
  DataFrame first = Data(3, m, 0, 3000), shorter = Data(3, m, 3000, 100);
  if (by_reference) first.region = shorter.region = 5;
  EXPECT_NE(w.WriteData(first), nullptr);
  EXPECT_NE(w.WriteData(shorter), nullptr);  // short: copied at once
  EXPECT_NE(w.WriteData(Data(3, m, 3100, m.size() - 3100)), nullptr);  // no region
  const size_t n = w.Finish();
  if (deferred != nullptr) deferred->assign(w.deferred().begin(), w.deferred().end());
  return n;
}

// One message built both ways with `integrity`: copied into `a`, and with its payloads
// deferred into `b` (which starts as 0xAB bytes), the deferred payloads in `d`.
struct BothWays {
  std::vector<uint8_t> a = std::vector<uint8_t>(9000, 0), b = std::vector<uint8_t>(9000, 0xAB);
  size_t na = 0, nb = 0;
  std::vector<DeferredPayload> d;
};
BothWays BuildBothWays(const std::vector<uint8_t>& m, Integrity integrity) {
  BothWays r;
  r.na = Build(r.a.data(), r.a.size(), integrity, false, m);
  r.nb = Build(r.b.data(), r.b.size(), integrity, true, m, &r.d);
  return r;
}

TEST(OnePassTest, DeferredPayloadsAreChecksummedWhileCopied) {
  const std::vector<uint8_t> m = Message(8000);
  const BothWays w = BuildBothWays(m, Integrity::kCrc32c);
  ASSERT_EQ(w.na, w.nb);
  EXPECT_EQ(0, std::memcmp(w.a.data(), w.b.data(), w.na));
  EXPECT_TRUE(w.d.empty()) << "Finish fills every deferred payload in checksum mode";
  EXPECT_TRUE(ParsePacket(std::span<const uint8_t>(w.b.data(), w.nb)).ok());
}

TEST(OnePassTest, SealedPacketsListTheirDeferredPayloads) {
  const std::vector<uint8_t> m = Message(8000);
  BothWays w = BuildBothWays(m, Integrity::kSealed);
  ASSERT_EQ(w.na, w.nb);
  ASSERT_EQ(w.d.size(), 2u);  // the 100-byte piece was copied
  EXPECT_EQ(w.d[0].source, m.data());
  EXPECT_EQ(w.d[0].length, 3000u);
  EXPECT_EQ(w.d[1].source, m.data() + 3100);
  EXPECT_EQ(w.d[1].length, 4900u);
  EXPECT_LT(w.d[0].offset + w.d[0].length, w.d[1].offset);
  // Filled in, the datagram is the copying writer's (bytes outside them are written).
  for (const DeferredPayload& p : w.d) std::memcpy(w.b.data() + p.offset, p.source, p.length);
  EXPECT_EQ(0, std::memcmp(w.a.data(), w.b.data(), w.na - kSealTagSize));
}

// Zero copy: payloads whose frame names a memory region stay in the message; the
// checksum covers them as if copied, and the datagram is whole once they are filled in.
TEST(OnePassTest, RegionPayloadsByReferenceAreChecksummedInPlace) {
  const std::vector<uint8_t> m = Message(8000);
  std::vector<uint8_t> a(9000, 0);
  const size_t na = Build(a.data(), a.size(), Integrity::kCrc32c, false, m);
  std::vector<uint8_t> b(9000, 0xAB);
  std::vector<DeferredPayload> left;
  const size_t nb = Build(b.data(), b.size(), Integrity::kCrc32c, true, m, &left, true);
  ASSERT_EQ(na, nb);
  ASSERT_EQ(left.size(), 1u);  // the 100-byte piece was copied, the last has no region
  const DeferredPayload d = left[0];
  EXPECT_EQ(d.source, m.data());
  EXPECT_EQ(d.length, 3000u);
  EXPECT_EQ(d.region, 5u);
  // Nothing was copied there: the datagram fails its checksum until the caller fills it.
  EXPECT_EQ(b[d.offset], 0xAB);
  EXPECT_FALSE(ParsePacket(std::span<const uint8_t>(b.data(), nb)).ok());
  std::memcpy(b.data() + d.offset, d.source, d.length);
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), na));
  EXPECT_TRUE(ParsePacket(std::span<const uint8_t>(b.data(), nb)).ok());
}

// Without by-reference a region changes nothing: the payload is copied while checksummed.
TEST(OnePassTest, RegionPayloadsAreCopiedUnlessByReference) {
  const std::vector<uint8_t> m = Message(8000);
  std::vector<uint8_t> b(9000, 0xAB);
  PacketWriter w(b.data(), b.size(), Integrity::kCrc32c);
  w.set_defer_payload(true);
  w.WriteHeader(PacketHeader{});
  DataFrame f = Data(0, m, 0, 4000);
  f.region = 9;
  ASSERT_NE(w.WriteData(f), nullptr);
  const size_t n = w.Finish();
  EXPECT_TRUE(w.deferred().empty());
  EXPECT_TRUE(ParsePacket(std::span<const uint8_t>(b.data(), n)).ok());
}

// A repair shard is copied at once even while deferring: the FEC sender may free it as
// soon as the frame is written.
TEST(OnePassTest, RepairShardsAreNeverDeferred) {
  const std::vector<uint8_t> shard = Message(4000);
  std::vector<uint8_t> buf(9000, 0);
  PacketWriter w(buf.data(), buf.size(), Integrity::kSealed);
  w.set_defer_payload(true);
  w.WriteHeader(PacketHeader{});
  FecRepairFrame f;
  f.block_id = 9;
  f.k = 4;
  f.m = 2;
  f.length = shard.size();
  f.payload = shard.data();
  uint8_t* at = w.WriteFecRepair(f);
  ASSERT_NE(at, nullptr);
  w.Finish();
  EXPECT_TRUE(w.deferred().empty());
  EXPECT_EQ(0, std::memcmp(at, shard.data(), shard.size()));
}

TEST(OnePassTest, FindDataPayloadNeedsOnlyTheFramesInFront) {
  const std::vector<uint8_t> m = Message(8000);
  std::vector<uint8_t> buf(9000);
  const size_t n = Build(buf.data(), buf.size(), Integrity::kSealed, false, m);
  const uint8_t* begin = buf.data() + kHeaderSize;
  const uint8_t* end = buf.data() + n - kSealTagSize;
  DataFrame f;
  ASSERT_TRUE(FindDataPayload(begin, begin + 128, end, &f));
  EXPECT_EQ(f.message_id, 3u);
  EXPECT_EQ(f.offset, 0u);
  EXPECT_EQ(f.length, 3000u);
  EXPECT_EQ(0, std::memcmp(f.payload, m.data(), 3000));
  EXPECT_LE(f.payload, begin + 128);
  // Too little decrypted for the DATA header (or the ACK in front of it): nothing.
  EXPECT_FALSE(FindDataPayload(begin, begin + 8, end, &f));
  EXPECT_FALSE(FindDataPayload(begin, begin, end, &f));
  // Garbage after the known prefix does not matter; garbage in it does.
  std::vector<uint8_t> g = buf;
  std::fill(g.begin() + kHeaderSize + 128, g.end(), 0x5A);
  EXPECT_TRUE(FindDataPayload(g.data() + kHeaderSize, g.data() + kHeaderSize + 128,
                              g.data() + n - kSealTagSize, &f));
  g[kHeaderSize] = 0x7F;  // no such frame type
  EXPECT_FALSE(FindDataPayload(g.data() + kHeaderSize, g.data() + kHeaderSize + 128,
                               g.data() + n - kSealTagSize, &f));
  // An FEC source tag in front: the decoder reads the shard from the packet.
  std::vector<uint8_t> fec(9000);
  PacketWriter w(fec.data(), fec.size(), Integrity::kSealed);
  w.WriteHeader(PacketHeader{});
  ASSERT_TRUE(w.WriteFecSource(FecSourceFrame{1, 0, 4, 1}));
  ASSERT_NE(w.WriteData(Data(0, m, 0, 4000)), nullptr);
  const size_t fn = w.Finish();
  EXPECT_FALSE(FindDataPayload(fec.data() + kHeaderSize, fec.data() + kHeaderSize + 128,
                               fec.data() + fn - kSealTagSize, &f));
}

TEST(OnePassTest, Crc32cInPiecesAndWhileCopyingIsTheCrc) {
  const std::vector<uint8_t> m = Message(10000);
  std::vector<uint8_t> copy(m.size());
  uint32_t s = Crc32cUpdate(kCrc32cStart, m.data(), 17);
  s = Crc32cCopy(s, copy.data() + 17, m.data() + 17, 7000);
  s = Crc32cUpdate(s, m.data() + 7017, m.size() - 7017);
  EXPECT_EQ(Crc32cFinish(s), Crc32c(m.data(), m.size()));
  EXPECT_EQ(0, std::memcmp(copy.data() + 17, m.data() + 17, 7000));
}

}  // namespace
}  // namespace longhaul::wire
