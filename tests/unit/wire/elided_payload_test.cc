// Elided payload (TransportConfig::elide_payload): DATA frames that carry stamps instead
// of bytes. The writer's accounting, the stamps' placement and the parser's checks.
#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "transport/wire/packet.h"
#include "tests/support/wire_packets.h"

namespace longhaul::wire {
namespace {

using testing::Bytes;
using ::testing::HasSubstr;

TEST(StampBytesTest, OneStampPerIntervalInsideThePiece) {
  EXPECT_EQ(StampBytes(0, 0, 100), 0u);
  EXPECT_EQ(StampBytes(0, 1, 100000), 8u);              // position 0
  EXPECT_EQ(StampBytes(1, 4095, 100000), 0u);           // [1, 4096): none
  EXPECT_EQ(StampBytes(1, 4096, 100000), 8u);           // 4096
  EXPECT_EQ(StampBytes(4000, 8894, 100000), 24u);       // 4096, 8192, 12288
  EXPECT_EQ(StampBytes(0, 3, 3), 3u);                   // a 3-byte message: a 3-byte stamp
  EXPECT_EQ(StampBytes(8192, 5, 8197), 5u);             // the last stamp is cut at the end
  EXPECT_EQ(StampBytes(0, 8197, 8197), 8u + 8u + 5u);   // 0, 4096, 8192 (5 bytes)
}

TEST(StampDigestTest, DependsOnPositionAndContent) {
  const Bytes m = testing::Pattern(20000, 7);
  const uint64_t d = MessageStampDigest(m.data(), m.size());
  Bytes altered = m;
  altered[4096 + 3] ^= 1;  // inside a stamp
  EXPECT_NE(MessageStampDigest(altered.data(), altered.size()), d);
  Bytes between = m;
  between[5000] ^= 1;  // between stamps: not covered
  EXPECT_EQ(MessageStampDigest(between.data(), between.size()), d);
  // The same stamp bytes at another position give another term.
  EXPECT_NE(StampTerm(0, m.data(), 8), StampTerm(4096, m.data(), 8));
  // The digest is the sum of the stamps' terms, in any order.
  uint64_t sum = 0;
  for (uint64_t p : {16384u, 0u, 8192u, 12288u, 4096u}) {
    sum += StampTerm(p, m.data() + p, std::min<uint64_t>(8, m.size() - p));
  }
  EXPECT_EQ(sum, d);
}

TEST(ElidedWriterTest, WritesStampsAndCountsTheElidedBytesAgainstTheCapacity) {
  const Bytes message = testing::Pattern(100000, 3);
  DataFrame f;
  f.message_id = 9;
  f.message_length = message.size();
  f.offset = 4000;
  f.length = 8894;
  f.payload = message.data() + f.offset;
  std::vector<uint8_t> buf(9000);
  PacketWriter w(buf.data(), buf.size());
  w.set_elide_payload(true);
  w.WriteHeader(testing::SampleHeader());
  const size_t before = w.remaining();
  ASSERT_NE(w.WriteData(f), nullptr);
  const size_t header = before - w.remaining() - f.length;  // the frame's header bytes
  EXPECT_EQ(w.elided(), f.length - 24);
  EXPECT_EQ(w.size(), kHeaderSize + header + 24);
  // What remains is what a full frame would have left: a second copy does not fit.
  EXPECT_EQ(w.WriteData(f), nullptr);
  const size_t len = w.Finish();
  EXPECT_EQ(len + w.elided(), kHeaderSize + header + f.length + kChecksumSize);

  // The frames are views into the datagram: keep it alive while they are read.
  const Bytes datagram(buf.begin(), buf.begin() + len);
  absl::StatusOr<std::vector<Frame>> frames = testing::DecodeDatagram(datagram);
  ASSERT_TRUE(frames.ok()) << frames.status();
  ASSERT_EQ(frames->size(), 1u);
  const DataFrame& d = (*frames)[0].data;
  EXPECT_TRUE(d.elided());
  EXPECT_EQ(d.offset, f.offset);
  EXPECT_EQ(d.length, f.length);
  // The stamps are the message's bytes at 4096, 8192 and 12288.
  EXPECT_EQ(std::memcmp(d.payload, message.data() + 4096, 8), 0);
  EXPECT_EQ(std::memcmp(d.payload + 8, message.data() + 8192, 8), 0);
  EXPECT_EQ(std::memcmp(d.payload + 16, message.data() + 12288, 8), 0);
}

TEST(ElidedWriterTest, EmptyPiecesAndRepairRoomAreNotElided) {
  std::vector<uint8_t> buf(200);
  PacketWriter w(buf.data(), buf.size());
  w.set_elide_payload(true);
  w.WriteHeader(testing::SampleHeader());
  DataFrame empty;
  empty.flags = kDataFlagLast;
  ASSERT_NE(w.WriteData(empty), nullptr);
  EXPECT_EQ(w.elided(), 0u);
  const size_t room = w.remaining();
  EXPECT_FALSE(w.AddElided(room + 1));
  EXPECT_TRUE(w.AddElided(room - 10));
  EXPECT_EQ(w.remaining(), 10u);
  EXPECT_EQ(w.elided(), room - 10);
  absl::StatusOr<std::vector<Frame>> frames = testing::DecodeDatagram(
      Bytes(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(w.Finish())));
  ASSERT_TRUE(frames.ok()) << frames.status();
  EXPECT_FALSE((*frames)[0].data.elided());
}

Bytes ElidedFrameBytes(uint64_t msg_len, uint64_t offset, uint64_t length, size_t stamp_bytes) {
  Bytes b = {0x01, kDataFlagElided, 4};  // type, flags, message id 4 (one-byte varints)
  auto var = [&](uint64_t v) {          // values below 2^14 here: two-byte varints
    b.push_back(static_cast<uint8_t>(0x40 | (v >> 8)));
    b.push_back(static_cast<uint8_t>(v));
  };
  var(msg_len);
  var(offset);
  var(0);
  var(length);
  b.insert(b.end(), stamp_bytes, 0x5A);
  return b;
}

TEST(ElidedWriterTest, ADecodedElidedFrameIsWrittenAgainAsItIs) {
  const Bytes frame = ElidedFrameBytes(10000, 4000, 5000, 16);
  const Bytes packet = testing::PacketFromFrameBytes(frame);  // the frames view into it
  absl::StatusOr<std::vector<Frame>> decoded = testing::DecodeDatagram(packet);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  // Without elision switched on: the frame's flag alone says what its payload is.
  const Bytes again = testing::BuildPacket(testing::SampleHeader(), [&](PacketWriter& w) {
    ASSERT_NE(w.WriteData((*decoded)[0].data), nullptr);
    EXPECT_EQ(w.elided(), 5000u - 16u);
  });
  absl::StatusOr<std::vector<Frame>> redecoded = testing::DecodeDatagram(again);
  ASSERT_TRUE(redecoded.ok()) << redecoded.status();
  const DataFrame& a = (*decoded)[0].data;
  const DataFrame& b = (*redecoded)[0].data;
  EXPECT_TRUE(b.elided());
  EXPECT_EQ(b.offset, a.offset);
  EXPECT_EQ(b.length, a.length);
  EXPECT_EQ(b.message_length, a.message_length);
  EXPECT_EQ(std::memcmp(a.payload, b.payload, 16), 0);
  // The encoding is the minimal one: the hand-built frame's two-byte zero shrinks by one.
  EXPECT_EQ(testing::FrameBytes(again).size(), frame.size() - 1);
}

TEST(ElidedParserTest, ChecksTheStampsAgainstThePacket) {
  absl::StatusOr<std::vector<Frame>> ok =
      testing::DecodeDatagram(testing::PacketFromFrameBytes(ElidedFrameBytes(10000, 4000, 5000, 16)));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)[0].data.length, 5000u);
  absl::StatusOr<std::vector<Frame>> short_stamps =
      testing::DecodeDatagram(testing::PacketFromFrameBytes(ElidedFrameBytes(10000, 4000, 5000, 15)));
  ASSERT_FALSE(short_stamps.ok());
  EXPECT_THAT(std::string(short_stamps.status().message()), HasSubstr("past the packet"));
  absl::StatusOr<std::vector<Frame>> empty =
      testing::DecodeDatagram(testing::PacketFromFrameBytes(ElidedFrameBytes(10000, 4000, 0, 0)));
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(std::string(empty.status().message()), HasSubstr("elided flag on an empty piece"));
}

}  // namespace
}  // namespace longhaul::wire
