// Encode/decode round trips of the packet header and every frame type, plus the
// writer's fit rules (a frame that does not fit writes nothing).
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/wire_packets.h"
#include "transport/wire/crc32c.h"
#include "transport/wire/packet.h"
#include "transport/wire/varint.h"

namespace longhaul::wire {
namespace {

using ::longhaul::testing::BuildPacket;
using ::longhaul::testing::Bytes;
using ::longhaul::testing::DecodeDatagram;
using ::longhaul::testing::Pattern;
using ::longhaul::testing::Ranges;
using ::longhaul::testing::SampleHeader;

void ExpectHeaderEq(const PacketHeader& a, const PacketHeader& b) {
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.flow, b.flow);
  EXPECT_EQ(a.connection_id, b.connection_id);
  EXPECT_EQ(a.packet_number, b.packet_number);
}

// Decodes a datagram expected to hold exactly one frame and returns it.
Frame OnlyFrame(const Bytes& d) {
  absl::StatusOr<std::vector<Frame>> frames = DecodeDatagram(d);
  EXPECT_TRUE(frames.ok()) << frames.status();
  if (!frames.ok() || frames->size() != 1) {
    ADD_FAILURE() << "expected exactly one frame";
    return Frame{};
  }
  return (*frames)[0];
}

// ---------------------------------------------------------------- header

TEST(PacketHeaderTest, LayoutIsBigEndianAtDocumentedOffsets) {
  Bytes d =
      BuildPacket(SampleHeader(PacketType::kHandshake), [](PacketWriter& w) { w.WritePing(); });
  ASSERT_EQ(d.size(), kHeaderSize + 1 + kChecksumSize);
  EXPECT_EQ(d[0], kVersion);
  EXPECT_EQ(d[1], 3);
  EXPECT_EQ(d[2], 0xA1);
  EXPECT_EQ(d[3], 0xB2);
  const uint8_t cid[] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF};
  const uint8_t pn[] = {0xFE, 0xDC, 0xBA, 0x98, 0x76, 0x54, 0x32, 0x10};
  EXPECT_EQ(std::memcmp(d.data() + 4, cid, 8), 0);
  EXPECT_EQ(std::memcmp(d.data() + 12, pn, 8), 0);
  EXPECT_EQ(d[20], static_cast<uint8_t>(FrameType::kPing));
  const uint32_t crc = Crc32c(d.data(), 21);
  EXPECT_EQ(d[21], static_cast<uint8_t>(crc >> 24));
  EXPECT_EQ(d[22], static_cast<uint8_t>(crc >> 16));
  EXPECT_EQ(d[23], static_cast<uint8_t>(crc >> 8));
  EXPECT_EQ(d[24], static_cast<uint8_t>(crc));
}

TEST(PacketHeaderTest, RoundTripEveryTypeAndExtremeValues) {
  const PacketType types[] = {PacketType::kOneRtt, PacketType::kInitial, PacketType::kRetry,
                              PacketType::kHandshake};
  const uint64_t values[] = {0, 1, 0x7FFFFFFFFFFFFFFFULL, ~0ULL};
  for (PacketType t : types) {
    for (uint64_t v : values) {
      PacketHeader h;
      h.type = t;
      h.flow = static_cast<uint16_t>(v);
      h.connection_id = v;
      h.packet_number = ~v;
      Bytes d = BuildPacket(h, [](PacketWriter& w) { w.WritePing(); });
      absl::StatusOr<PacketView> view = ParsePacket(d);
      ASSERT_TRUE(view.ok()) << view.status();
      ExpectHeaderEq(view->header, h);
      EXPECT_EQ(view->frames, d.data() + kHeaderSize);
      EXPECT_EQ(view->frames_end, d.data() + d.size() - kChecksumSize);
      absl::StatusOr<PacketHeader> peek = PeekHeader(d);
      ASSERT_TRUE(peek.ok()) << peek.status();
      ExpectHeaderEq(*peek, h);
    }
  }
}

TEST(PacketHeaderTest, PeekHeaderDoesNotVerifyTheChecksum) {
  Bytes d = BuildPacket(SampleHeader(), [](PacketWriter& w) { w.WritePing(); });
  d.back() ^= 0xFF;
  EXPECT_EQ(ParsePacket(d).status().code(), absl::StatusCode::kDataLoss);
  absl::StatusOr<PacketHeader> peek = PeekHeader(d);
  ASSERT_TRUE(peek.ok()) << peek.status();
  ExpectHeaderEq(*peek, SampleHeader());
}

TEST(PacketWriterTest, SizeAndRemainingAccounting) {
  Bytes buf(100);
  PacketWriter w(buf.data(), buf.size());
  EXPECT_EQ(w.size(), 0u);
  w.WriteHeader(SampleHeader());
  EXPECT_EQ(w.size(), kHeaderSize);
  EXPECT_EQ(w.remaining(), 100 - kHeaderSize - kChecksumSize);
  EXPECT_EQ(w.cursor(), buf.data() + kHeaderSize);
  ASSERT_TRUE(w.WritePing());
  EXPECT_EQ(w.size(), kHeaderSize + 1);
  EXPECT_EQ(w.Finish(), kHeaderSize + 1 + kChecksumSize);
}

TEST(PacketWriterTest, EmptyPacketParsesWithNoFrames) {
  // The writer can finish a packet with no frames; such a datagram is one byte shorter
  // than the minimum and is rejected.
  Bytes d = BuildPacket(SampleHeader(), [](PacketWriter&) {});
  ASSERT_EQ(d.size(), kPacketOverhead);
  EXPECT_EQ(ParsePacket(d).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(PacketWriterDeathTest, RejectsImpossibleCapacities) {
  Bytes small(kMinDatagramSize - 1), big(kMaxDatagramSize + 1);
  EXPECT_DEATH(PacketWriter(small.data(), small.size()), "");
  EXPECT_DEATH(PacketWriter(big.data(), big.size()), "");
}

// ---------------------------------------------------------------- PADDING / PING

TEST(PaddingTest, PaddingIsSkippedAndFillsExactly) {
  Bytes d = BuildPacket(
      SampleHeader(),
      [](PacketWriter& w) {
        ASSERT_TRUE(w.WritePadding(10));
        ASSERT_TRUE(w.WritePing());
        ASSERT_TRUE(w.WritePadding(w.remaining()));
        EXPECT_EQ(w.remaining(), 0u);
        EXPECT_FALSE(w.WritePadding(1));
        EXPECT_TRUE(w.WritePadding(0));
      },
      200);
  EXPECT_EQ(d.size(), 200u);
  absl::StatusOr<std::vector<Frame>> frames = DecodeDatagram(d);
  ASSERT_TRUE(frames.ok()) << frames.status();
  ASSERT_EQ(frames->size(), 1u);
  EXPECT_EQ((*frames)[0].type, FrameType::kPing);
}

TEST(PingTest, RoundTrip) {
  Bytes d = BuildPacket(SampleHeader(), [](PacketWriter& w) { ASSERT_TRUE(w.WritePing()); });
  EXPECT_EQ(OnlyFrame(d).type, FrameType::kPing);
}

// ---------------------------------------------------------------- DATA

void ExpectDataRoundTrip(const DataFrame& in, const Bytes& payload) {
  Bytes d = BuildPacket(SampleHeader(), [&](PacketWriter& w) {
    size_t before = w.size();
    uint8_t* p = w.WriteData(in);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(w.size() - before, DataFrameHeaderSize(in) + in.length);
    EXPECT_LE(DataFrameHeaderSize(in), kMaxDataFrameHeaderSize);
    EXPECT_EQ(p, w.cursor() - in.length);
  });
  Frame f = OnlyFrame(d);
  ASSERT_EQ(f.type, FrameType::kData);
  EXPECT_EQ(f.data.flags, in.flags);
  EXPECT_EQ(f.data.last(), in.last());
  EXPECT_EQ(f.data.message_id, in.message_id);
  EXPECT_EQ(f.data.message_length, in.message_length);
  EXPECT_EQ(f.data.offset, in.offset);
  EXPECT_EQ(f.data.stream_base, in.stream_base);
  ASSERT_EQ(f.data.length, in.length);
  EXPECT_TRUE(f.data.payload >= d.data() && f.data.payload + f.data.length <= d.data() + d.size());
  EXPECT_EQ(Bytes(f.data.payload, f.data.payload + f.data.length), payload);
}

TEST(DataFrameTest, RoundTripVariousSizes) {
  Bytes payload = Pattern(1000, 3);
  DataFrame f;
  f.message_id = 5;
  f.message_length = 5000;
  f.offset = 1000;
  f.stream_base = 123456;
  f.length = payload.size();
  f.payload = payload.data();
  ExpectDataRoundTrip(f, payload);

  f.flags = kDataFlagLast;
  f.offset = 4000;
  ExpectDataRoundTrip(f, payload);
}

TEST(DataFrameTest, RoundTripEveryVarintWidth) {
  const uint64_t ids[] = {0, 63, 64, 16383, 16384, (1ULL << 30) - 1, 1ULL << 30, kMaxVarint};
  Bytes payload = Pattern(17, 9);
  for (uint64_t id : ids) {
    DataFrame f;
    f.message_id = id;
    f.message_length = id < payload.size() ? payload.size() : id;
    f.offset = f.message_length - payload.size();
    f.stream_base = kMaxVarint - f.message_length;  // the largest allowed
    f.length = payload.size();
    f.payload = payload.data();
    f.flags = kDataFlagLast;
    ExpectDataRoundTrip(f, payload);
  }
}

TEST(DataFrameTest, EmptyMessage) {
  DataFrame f;
  f.flags = kDataFlagLast;
  f.message_id = 9;
  ExpectDataRoundTrip(f, Bytes{});
}

TEST(DataFrameTest, NullPayloadLeavesSpaceForTheCaller) {
  Bytes payload = Pattern(64, 1);
  Bytes d = BuildPacket(SampleHeader(), [&](PacketWriter& w) {
    DataFrame f;
    f.message_length = 64;
    f.length = 64;
    f.flags = kDataFlagLast;
    uint8_t* p = w.WriteData(f);
    ASSERT_NE(p, nullptr);
    std::memcpy(p, payload.data(), payload.size());
  });
  Frame f = OnlyFrame(d);
  ASSERT_EQ(f.type, FrameType::kData);
  EXPECT_EQ(Bytes(f.data.payload, f.data.payload + f.data.length), payload);
}

TEST(DataFrameTest, WritesNothingWhenItDoesNotFit) {
  Bytes payload = Pattern(100, 1);
  DataFrame f;
  f.message_length = 100;
  f.length = 100;
  f.payload = payload.data();
  const size_t need = DataFrameHeaderSize(f) + f.length;
  // Exactly fits.
  {
    Bytes buf(kPacketOverhead + need);
    PacketWriter w(buf.data(), buf.size());
    w.WriteHeader(SampleHeader());
    ASSERT_EQ(w.remaining(), need);
    EXPECT_NE(w.WriteData(f), nullptr);
    EXPECT_EQ(w.remaining(), 0u);
  }
  // One byte short.
  {
    Bytes buf(kPacketOverhead + need - 1);
    PacketWriter w(buf.data(), buf.size());
    w.WriteHeader(SampleHeader());
    EXPECT_EQ(w.WriteData(f), nullptr);
    EXPECT_EQ(w.size(), kHeaderSize);
  }
}

// ---------------------------------------------------------------- ACK

// Descending, disjoint ranges with at least one missing packet between neighbours.
std::vector<AckRange> MakeRanges(PacketNumber largest, size_t count, uint64_t seed) {
  std::vector<AckRange> out;
  PacketNumber high = largest;
  uint64_t s = seed;
  for (size_t i = 0; i < count; ++i) {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    uint64_t len = (s >> 33) % 50;
    uint64_t gap = (s >> 13) % 300;
    if (high < len) break;
    AckRange r{high - len, high};
    out.push_back(r);
    if (r.low < gap + 2) break;
    high = r.low - gap - 2;
  }
  return out;
}

AckFrame SampleAck(PacketNumber largest) {
  AckFrame a;
  a.largest = largest;
  a.ack_delay_us = 250;
  a.max_stream = 1ULL << 40;
  a.ecn_ect0 = 77;
  a.ecn_ce = 3;
  return a;
}

void ExpectAckFieldsEq(const AckFrame& got, const AckFrame& want) {
  EXPECT_EQ(got.largest, want.largest);
  EXPECT_EQ(got.ack_delay_us, want.ack_delay_us);
  EXPECT_EQ(got.max_stream, want.max_stream);
  EXPECT_EQ(got.ecn_ect0, want.ecn_ect0);
  EXPECT_EQ(got.ecn_ce, want.ecn_ce);
}

void ExpectRangesEq(const std::vector<AckRange>& got, const std::vector<AckRange>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].low, want[i].low) << "range " << i;
    EXPECT_EQ(got[i].high, want[i].high) << "range " << i;
  }
}

TEST(AckFrameTest, SingleRange) {
  AckFrame a = SampleAck(1000);
  std::vector<AckRange> ranges = {{990, 1000}};
  Bytes d = BuildPacket(SampleHeader(),
                        [&](PacketWriter& w) { EXPECT_EQ(w.WriteAck(a, ranges, 128), 1u); });
  Frame f = OnlyFrame(d);
  ASSERT_EQ(f.type, FrameType::kAck);
  ExpectAckFieldsEq(f.ack, a);
  EXPECT_EQ(f.ack.range_count, 0u);
  EXPECT_EQ(f.ack.first_range, 10u);
  ExpectRangesEq(Ranges(f.ack), ranges);
}

TEST(AckFrameTest, SinglePacketAndRangeDownToZero) {
  for (std::vector<AckRange> ranges :
       {std::vector<AckRange>{{0, 0}}, std::vector<AckRange>{{7, 7}, {0, 5}},
        std::vector<AckRange>{{10, 12}, {2, 8}, {0, 0}}}) {
    AckFrame a = SampleAck(ranges[0].high);
    Bytes d = BuildPacket(SampleHeader(), [&](PacketWriter& w) {
      EXPECT_EQ(w.WriteAck(a, ranges, 16), ranges.size());
    });
    Frame f = OnlyFrame(d);
    ASSERT_EQ(f.type, FrameType::kAck);
    ExpectRangesEq(Ranges(f.ack), ranges);
  }
}

TEST(AckFrameTest, ManyRangesRoundTrip) {
  const PacketNumber largest = 50'000'000'000ULL;
  std::vector<AckRange> ranges = MakeRanges(largest, 500, 1);
  ASSERT_EQ(ranges.size(), 500u);
  AckFrame a = SampleAck(largest);
  Bytes d = BuildPacket(SampleHeader(),
                        [&](PacketWriter& w) { EXPECT_EQ(w.WriteAck(a, ranges, 1000), 500u); });
  Frame f = OnlyFrame(d);
  ASSERT_EQ(f.type, FrameType::kAck);
  ExpectAckFieldsEq(f.ack, a);
  EXPECT_EQ(f.ack.range_count, 499u);
  ExpectRangesEq(Ranges(f.ack), ranges);
}

TEST(AckFrameTest, MaxRangesTruncatesToTheNewest) {
  const PacketNumber largest = 1'000'000;
  std::vector<AckRange> ranges = MakeRanges(largest, 300, 2);
  ASSERT_EQ(ranges.size(), 300u);
  for (size_t max_ranges : {size_t{1}, size_t{2}, size_t{128}, size_t{299}}) {
    AckFrame a = SampleAck(largest);
    Bytes d = BuildPacket(SampleHeader(), [&](PacketWriter& w) {
      EXPECT_EQ(w.WriteAck(a, ranges, max_ranges), max_ranges);
    });
    Frame f = OnlyFrame(d);
    ASSERT_EQ(f.type, FrameType::kAck);
    ExpectRangesEq(Ranges(f.ack),
                   std::vector<AckRange>(ranges.begin(), ranges.begin() + max_ranges));
  }
}

TEST(AckFrameTest, ZeroMaxRangesOrNoRangesWritesNothing) {
  AckFrame a = SampleAck(10);
  std::vector<AckRange> ranges = {{0, 10}};
  Bytes buf(200);
  PacketWriter w(buf.data(), buf.size());
  w.WriteHeader(SampleHeader());
  EXPECT_EQ(w.WriteAck(a, ranges, 0), 0u);
  EXPECT_EQ(w.WriteAck(a, {}, 10), 0u);
  EXPECT_EQ(w.size(), kHeaderSize);
}

TEST(AckFrameTest, RangesThatDoNotFitAreDroppedOldestFirst) {
  const PacketNumber largest = 1ULL << 40;
  std::vector<AckRange> ranges = MakeRanges(largest, 400, 3);
  ASSERT_EQ(ranges.size(), 400u);
  AckFrame a = SampleAck(largest);
  for (size_t capacity : {size_t{60}, size_t{100}, size_t{257}, size_t{700}}) {
    size_t written = 0;
    Bytes d = BuildPacket(
        SampleHeader(),
        [&](PacketWriter& w) {
          written = w.WriteAck(a, ranges, 4096);
          EXPECT_GE(written, 1u);
          EXPECT_LT(written, ranges.size());
          // The writer stops at the first pair that does not fit; these pairs take at most
          // three bytes (gap < 300, length < 50), so fewer than three bytes remain.
          EXPECT_LT(w.remaining(), 3u);
        },
        capacity);
    EXPECT_LE(d.size(), capacity);
    Frame f = OnlyFrame(d);
    ASSERT_EQ(f.type, FrameType::kAck);
    ExpectRangesEq(Ranges(f.ack), std::vector<AckRange>(ranges.begin(), ranges.begin() + written));
  }
}

TEST(AckFrameTest, FixedPartThatDoesNotFitWritesNothing) {
  AckFrame a = SampleAck(kMaxVarint);
  std::vector<AckRange> ranges = {{kMaxVarint - 5, kMaxVarint}};
  // Fixed part: type 1 + largest 8 + delay 2 + max_stream 8 + ect0 2 + ce 1 + count 2 +
  // first range 1 = 25 bytes.
  Bytes buf(kPacketOverhead + 24);
  PacketWriter w(buf.data(), buf.size());
  w.WriteHeader(SampleHeader());
  EXPECT_EQ(w.WriteAck(a, ranges, 8), 0u);
  EXPECT_EQ(w.size(), kHeaderSize);

  Bytes buf2(kPacketOverhead + 25);
  PacketWriter w2(buf2.data(), buf2.size());
  w2.WriteHeader(SampleHeader());
  EXPECT_EQ(w2.WriteAck(a, ranges, 8), 1u);
  EXPECT_EQ(w2.remaining(), 0u);
}

TEST(AckFrameTest, RangeCountIsCappedAt16K) {
  // 20000 ranges of single packets separated by single gaps: every pair takes two bytes,
  // so more than 16384 would fit in the largest datagram; the writer caps the count at
  // 2^14 so it fits its two-byte field.
  const PacketNumber largest = 100000;
  std::vector<AckRange> ranges;
  for (size_t i = 0; i < 20000; ++i) ranges.push_back({largest - 2 * i, largest - 2 * i});
  AckFrame a = SampleAck(largest);
  Bytes d = BuildPacket(SampleHeader(), [&](PacketWriter& w) {
    EXPECT_EQ(w.WriteAck(a, ranges, 1u << 20), size_t{1} << 14);
  });
  Frame f = OnlyFrame(d);
  ASSERT_EQ(f.type, FrameType::kAck);
  EXPECT_EQ(f.ack.range_count, (1u << 14) - 1);
  ExpectRangesEq(Ranges(f.ack), std::vector<AckRange>(ranges.begin(), ranges.begin() + (1 << 14)));
}

TEST(AckRangeIteratorTest, StopsAfterRangeCount) {
  AckFrame a = SampleAck(100);
  std::vector<AckRange> ranges = {{90, 100}, {50, 60}, {10, 20}};
  Bytes d = BuildPacket(SampleHeader(), [&](PacketWriter& w) { w.WriteAck(a, ranges, 8); });
  Frame f = OnlyFrame(d);
  AckRangeIterator it(f.ack);
  AckRange r;
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(it.Next(&r));
  EXPECT_FALSE(it.Next(&r));
  EXPECT_FALSE(it.Next(&r));
}

TEST(AckRangeIteratorTest, HandBuiltFrameWithMissingRangeBytesStops) {
  // range_count claims pairs that are not there: the iterator yields the first range and
  // stops rather than reading past ranges_end.
  AckFrame a = SampleAck(100);
  a.first_range = 4;
  a.range_count = 3;
  const uint8_t one_gap[] = {0x01};  // a gap without its length
  a.ranges = one_gap;
  a.ranges_end = one_gap + 1;
  std::vector<AckRange> got = Ranges(a);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].low, 96u);
  EXPECT_EQ(got[0].high, 100u);
}

// ---------------------------------------------------------------- CLOSE

TEST(CloseFrameTest, RoundTrip) {
  for (std::string reason : {std::string(), std::string("idle timeout"), std::string(1024, 'x')}) {
    Bytes d = BuildPacket(SampleHeader(),
                          [&](PacketWriter& w) { ASSERT_TRUE(w.WriteClose(0x1234, reason)); });
    Frame f = OnlyFrame(d);
    ASSERT_EQ(f.type, FrameType::kClose);
    EXPECT_EQ(f.close.error_code, 0x1234u);
    EXPECT_EQ(f.close.reason, reason);
  }
}

TEST(CloseFrameTest, LongReasonIsTruncatedTo1024Bytes) {
  std::string reason(3000, 'r');
  Bytes d = BuildPacket(SampleHeader(),
                        [&](PacketWriter& w) { ASSERT_TRUE(w.WriteClose(kMaxVarint, reason)); });
  Frame f = OnlyFrame(d);
  ASSERT_EQ(f.type, FrameType::kClose);
  EXPECT_EQ(f.close.error_code, kMaxVarint);
  EXPECT_EQ(f.close.reason, std::string(1024, 'r'));
}

TEST(CloseFrameTest, WritesNothingWhenItDoesNotFit) {
  Bytes buf(kPacketOverhead + 10);
  PacketWriter w(buf.data(), buf.size());
  w.WriteHeader(SampleHeader());
  EXPECT_FALSE(w.WriteClose(1, "eight ch"));  // 1 + 1 + 1 + 8 = 11 bytes
  EXPECT_EQ(w.size(), kHeaderSize);
  EXPECT_TRUE(w.WriteClose(1, "seven c"));
  EXPECT_EQ(w.remaining(), 0u);
}

// ---------------------------------------------------------------- FEC

TEST(FecRepairFrameTest, RoundTrip) {
  Bytes shard = Pattern(1234, 5);
  FecRepairFrame in;
  in.block_id = 1ULL << 33;
  in.index = 3;
  in.k = 32;
  in.m = 8;
  in.length = shard.size();
  in.payload = shard.data();
  Bytes d = BuildPacket(SampleHeader(), [&](PacketWriter& w) {
    size_t before = w.size();
    uint8_t* p = w.WriteFecRepair(in);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(w.size() - before, FecRepairFrameHeaderSize(in) + in.length);
  });
  Frame f = OnlyFrame(d);
  ASSERT_EQ(f.type, FrameType::kFecRepair);
  EXPECT_EQ(f.fec_repair.block_id, in.block_id);
  EXPECT_EQ(f.fec_repair.index, in.index);
  EXPECT_EQ(f.fec_repair.k, in.k);
  EXPECT_EQ(f.fec_repair.m, in.m);
  ASSERT_EQ(f.fec_repair.length, in.length);
  EXPECT_EQ(Bytes(f.fec_repair.payload, f.fec_repair.payload + f.fec_repair.length), shard);
}

TEST(FecRepairFrameTest, BoundaryParameters) {
  // k + m == 255 and index == m - 1 are the largest accepted values.
  FecRepairFrame in;
  in.k = 200;
  in.m = 55;
  in.index = 54;
  in.block_id = kMaxVarint;
  Bytes d = BuildPacket(SampleHeader(),
                        [&](PacketWriter& w) { ASSERT_NE(w.WriteFecRepair(in), nullptr); });
  Frame f = OnlyFrame(d);
  ASSERT_EQ(f.type, FrameType::kFecRepair);
  EXPECT_EQ(f.fec_repair.block_id, kMaxVarint);
  EXPECT_EQ(f.fec_repair.index, 54);
  EXPECT_EQ(f.fec_repair.length, 0u);
}

TEST(FecRepairFrameTest, WritesNothingWhenItDoesNotFit) {
  FecRepairFrame in;
  in.k = 4;
  in.m = 2;
  in.length = 50;
  const size_t need = FecRepairFrameHeaderSize(in) + in.length;
  Bytes buf(kPacketOverhead + need - 1);
  PacketWriter w(buf.data(), buf.size());
  w.WriteHeader(SampleHeader());
  EXPECT_EQ(w.WriteFecRepair(in), nullptr);
  EXPECT_EQ(w.size(), kHeaderSize);
}

TEST(FecSourceFrameTest, RoundTripAndSize) {
  FecSourceFrame in;
  in.block_id = 0x0102030405060708ULL;  // fixed 8-byte field: any 64-bit value
  in.index = 31;
  in.k = 32;
  in.m = 8;
  Bytes d = BuildPacket(SampleHeader(), [&](PacketWriter& w) {
    size_t before = w.size();
    ASSERT_TRUE(w.WriteFecSource(in));
    EXPECT_EQ(w.size() - before, kFecSourceFrameSize);
  });
  Frame f = OnlyFrame(d);
  ASSERT_EQ(f.type, FrameType::kFecSource);
  EXPECT_EQ(f.fec_source.block_id, in.block_id);
  EXPECT_EQ(f.fec_source.index, in.index);
  EXPECT_EQ(f.fec_source.k, in.k);
  EXPECT_EQ(f.fec_source.m, in.m);
}

TEST(FecSourceFrameTest, WritesNothingWhenItDoesNotFit) {
  Bytes buf(kPacketOverhead + kFecSourceFrameSize - 1);
  PacketWriter w(buf.data(), buf.size());
  w.WriteHeader(SampleHeader());
  FecSourceFrame in;
  in.k = 1;
  EXPECT_FALSE(w.WriteFecSource(in));
  EXPECT_EQ(w.size(), kHeaderSize);
}

// ---------------------------------------------------------------- LOSS_REPORT, HANDSHAKE

TEST(LossReportFrameTest, RoundTrip) {
  LossReportFrame in;
  in.packets_received = 1ULL << 50;
  in.packets_missing = 12345;
  in.loss_bursts = 0;
  Bytes d =
      BuildPacket(SampleHeader(), [&](PacketWriter& w) { ASSERT_TRUE(w.WriteLossReport(in)); });
  Frame f = OnlyFrame(d);
  ASSERT_EQ(f.type, FrameType::kLossReport);
  EXPECT_EQ(f.loss_report.packets_received, in.packets_received);
  EXPECT_EQ(f.loss_report.packets_missing, in.packets_missing);
  EXPECT_EQ(f.loss_report.loss_bursts, in.loss_bursts);
}

TEST(HandshakeFrameTest, RoundTrip) {
  for (size_t n : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{1200}}) {
    Bytes body = Pattern(n, 11);
    Bytes d = BuildPacket(SampleHeader(PacketType::kInitial),
                          [&](PacketWriter& w) { ASSERT_TRUE(w.WriteHandshake(body)); });
    Frame f = OnlyFrame(d);
    ASSERT_EQ(f.type, FrameType::kHandshake);
    EXPECT_EQ(Bytes(f.handshake.body.begin(), f.handshake.body.end()), body);
  }
}

TEST(HandshakeFrameTest, WritesNothingWhenItDoesNotFit) {
  Bytes body = Pattern(30, 1);
  Bytes buf(kPacketOverhead + 31);  // needs 1 + 1 + 30 = 32
  PacketWriter w(buf.data(), buf.size());
  w.WriteHeader(SampleHeader());
  EXPECT_FALSE(w.WriteHandshake(body));
  EXPECT_EQ(w.size(), kHeaderSize);
}

TEST(DriverStateFrameTest, RoundTrip) {
  for (uint64_t seq : {uint64_t{1}, uint64_t{64}, uint64_t{1} << 40}) {
    for (size_t n : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, kMaxDriverState}) {
      Bytes state = Pattern(n, 13);
      Bytes d = BuildPacket(SampleHeader(),
                            [&](PacketWriter& w) { ASSERT_TRUE(w.WriteDriverState(seq, state)); });
      EXPECT_EQ(d.size(), kPacketOverhead + DriverStateFrameSize(seq, n));
      Frame f = OnlyFrame(d);
      ASSERT_EQ(f.type, FrameType::kDriverState);
      EXPECT_EQ(f.driver_state.sequence, seq);
      EXPECT_EQ(Bytes(f.driver_state.bytes.begin(), f.driver_state.bytes.end()), state);
    }
  }
}

TEST(DriverStateFrameTest, WritesNothingWhenItDoesNotFit) {
  Bytes state = Pattern(30, 1);
  const size_t need = DriverStateFrameSize(5, state.size());  // 1 + 1 + 1 + 30
  ASSERT_EQ(need, 33u);
  Bytes buf(kPacketOverhead + need - 1);
  PacketWriter w(buf.data(), buf.size());
  w.WriteHeader(SampleHeader());
  EXPECT_FALSE(w.WriteDriverState(5, state));
  EXPECT_EQ(w.size(), kHeaderSize);
  Bytes buf2(kPacketOverhead + need);
  PacketWriter w2(buf2.data(), buf2.size());
  w2.WriteHeader(SampleHeader());
  EXPECT_TRUE(w2.WriteDriverState(5, state));
  EXPECT_EQ(w2.remaining(), 0u);
}

TEST(LossReportFrameTest, WritesNothingWhenItDoesNotFit) {
  const LossReportFrame big{1ULL << 40, 1ULL << 40, 1ULL << 40};  // 1 + 3 * 8 = 25 bytes
  Bytes buf(kPacketOverhead + 24);
  PacketWriter w(buf.data(), buf.size());
  w.WriteHeader(SampleHeader());
  EXPECT_FALSE(w.WriteLossReport(big));
  EXPECT_EQ(w.size(), kHeaderSize);
  Bytes buf2(kPacketOverhead + 25);
  PacketWriter w2(buf2.data(), buf2.size());
  w2.WriteHeader(SampleHeader());
  EXPECT_TRUE(w2.WriteLossReport(big));
  EXPECT_EQ(w2.remaining(), 0u);
}

// ---------------------------------------------------------------- mixed

TEST(MixedPacketTest, EveryFrameTypeInOnePacket) {
  Bytes payload = Pattern(300, 2), shard = Pattern(200, 4), body = Pattern(40, 6);
  AckFrame ack = SampleAck(5000);
  std::vector<AckRange> ranges = {{4990, 5000}, {4000, 4500}, {10, 20}};
  Bytes d = BuildPacket(SampleHeader(), [&](PacketWriter& w) {
    FecSourceFrame src;
    src.block_id = 77;
    src.index = 1;
    src.k = 4;
    src.m = 2;
    ASSERT_TRUE(w.WriteFecSource(src));
    DataFrame data;
    data.message_id = 3;
    data.message_length = 300;
    data.length = 300;
    data.flags = kDataFlagLast;
    data.payload = payload.data();
    ASSERT_NE(w.WriteData(data), nullptr);
    ASSERT_EQ(w.WriteAck(ack, ranges, 8), 3u);
    ASSERT_TRUE(w.WritePadding(3));
    ASSERT_TRUE(w.WritePing());
    FecRepairFrame rep;
    rep.block_id = 76;
    rep.k = 4;
    rep.m = 2;
    rep.index = 1;
    rep.length = shard.size();
    rep.payload = shard.data();
    ASSERT_NE(w.WriteFecRepair(rep), nullptr);
    ASSERT_TRUE(w.WriteLossReport(LossReportFrame{100, 2, 1}));
    ASSERT_TRUE(w.WriteHandshake(body));
    ASSERT_TRUE(w.WriteDriverState(3, shard));
    ASSERT_TRUE(w.WriteClose(9, "bye"));
  });
  absl::StatusOr<std::vector<Frame>> frames = DecodeDatagram(d);
  ASSERT_TRUE(frames.ok()) << frames.status();
  std::vector<FrameType> types;
  for (const Frame& f : *frames) types.push_back(f.type);
  EXPECT_THAT(
      types, ::testing::ElementsAre(FrameType::kFecSource, FrameType::kData, FrameType::kAck,
                                    FrameType::kPing, FrameType::kFecRepair, FrameType::kLossReport,
                                    FrameType::kHandshake, FrameType::kDriverState,
                                    FrameType::kClose));
  const std::vector<Frame>& fs = *frames;
  EXPECT_EQ(fs[0].fec_source.block_id, 77u);
  EXPECT_EQ(Bytes(fs[1].data.payload, fs[1].data.payload + fs[1].data.length), payload);
  ExpectRangesEq(Ranges(fs[2].ack), ranges);
  EXPECT_EQ(Bytes(fs[4].fec_repair.payload, fs[4].fec_repair.payload + fs[4].fec_repair.length),
            shard);
  EXPECT_EQ(fs[5].loss_report.packets_received, 100u);
  EXPECT_EQ(Bytes(fs[6].handshake.body.begin(), fs[6].handshake.body.end()), body);
  EXPECT_EQ(fs[7].driver_state.sequence, 3u);
  EXPECT_EQ(Bytes(fs[7].driver_state.bytes.begin(), fs[7].driver_state.bytes.end()), shard);
  EXPECT_EQ(fs[8].close.reason, "bye");
}

TEST(MixedPacketTest, LargestDatagramWithFullSegment) {
  // A 64 KiB-class segment plus every per-packet header still fits kMaxDatagramSize.
  Bytes payload = Pattern(
      kMaxDatagramSize - kPacketOverhead - kMaxDataFrameHeaderSize - kFecSourceFrameSize, 8);
  Bytes d = BuildPacket(SampleHeader(), [&](PacketWriter& w) {
    FecSourceFrame src;
    src.k = 1;
    ASSERT_TRUE(w.WriteFecSource(src));
    DataFrame data;
    data.message_id = kMaxVarint;
    data.message_length = kMaxVarint / 2;
    data.offset = kMaxVarint / 4;
    data.stream_base = kMaxVarint / 2;
    data.length = payload.size();
    data.payload = payload.data();
    ASSERT_NE(w.WriteData(data), nullptr);
  });
  EXPECT_LE(d.size(), kMaxDatagramSize);
  absl::StatusOr<std::vector<Frame>> frames = DecodeDatagram(d);
  ASSERT_TRUE(frames.ok()) << frames.status();
  ASSERT_EQ(frames->size(), 2u);
  EXPECT_EQ((*frames)[1].data.length, payload.size());
}

}  // namespace
}  // namespace longhaul::wire
