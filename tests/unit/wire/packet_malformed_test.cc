// Decoding hostile input: truncation at every byte, garbage, corrupted checksums, bad
// versions and types, and frames that are well-formed bytes but violate the rules.
#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/wire_packets.h"
#include "transport/base/rng.h"
#include "transport/wire/packet.h"
#include "transport/wire/varint.h"

namespace longhaul::wire {
namespace {

using ::longhaul::testing::BuildPacket;
using ::longhaul::testing::Bytes;
using ::longhaul::testing::DecodeDatagram;
using ::longhaul::testing::FrameBytes;
using ::longhaul::testing::PacketFromFrameBytes;
using ::longhaul::testing::Pattern;
using ::longhaul::testing::ReadAllFrames;
using ::longhaul::testing::Reseal;
using ::longhaul::testing::SampleHeader;
using ::testing::HasSubstr;

// ---------------------------------------------------------------- sample packets

struct Sample {
  std::string name;
  Bytes datagram;
  std::vector<size_t> frame_ends;  // offsets within the frame bytes where frames end
};

// One packet per frame type plus a mixed one; records where each frame ends.
std::vector<Sample> SamplePackets() {
  std::vector<Sample> out;
  auto add = [&](std::string name,
                 const std::function<void(PacketWriter&, std::vector<size_t>&)>& fn) {
    Sample s;
    s.name = std::move(name);
    s.datagram = BuildPacket(SampleHeader(), [&](PacketWriter& w) { fn(w, s.frame_ends); });
    out.push_back(std::move(s));
  };
  auto mark = [](PacketWriter& w, std::vector<size_t>& ends) {
    ends.push_back(w.size() - kHeaderSize);
  };
  static const Bytes payload = Pattern(100, 1);
  static const Bytes body = Pattern(20, 2);
  auto data = [&](PacketWriter& w, std::vector<size_t>& e) {
    DataFrame f;
    f.message_id = 70000;
    f.message_length = 1ULL << 33;
    f.offset = (1ULL << 33) - 100;
    f.stream_base = 1ULL << 40;
    f.length = 100;
    f.flags = kDataFlagLast;
    f.payload = payload.data();
    w.WriteData(f);
    mark(w, e);
  };
  auto ack = [&](PacketWriter& w, std::vector<size_t>& e) {
    AckFrame a;
    a.largest = 1ULL << 35;
    a.ack_delay_us = 1000;
    a.max_stream = 1ULL << 31;
    a.ecn_ect0 = 5;
    a.ecn_ce = 70;
    std::vector<AckRange> r = {{a.largest - 3, a.largest},
                               {a.largest - 100, a.largest - 50},
                               {a.largest - 20000, a.largest - 1000}};
    w.WriteAck(a, r, 8);
    mark(w, e);
  };
  auto close = [&](PacketWriter& w, std::vector<size_t>& e) {
    w.WriteClose(300, "protocol violation");
    mark(w, e);
  };
  auto ping = [&](PacketWriter& w, std::vector<size_t>& e) {
    w.WritePing();
    mark(w, e);
  };
  auto repair = [&](PacketWriter& w, std::vector<size_t>& e) {
    FecRepairFrame f;
    f.block_id = 99;
    f.k = 32;
    f.m = 8;
    f.index = 7;
    f.length = payload.size();
    f.payload = payload.data();
    w.WriteFecRepair(f);
    mark(w, e);
  };
  auto source = [&](PacketWriter& w, std::vector<size_t>& e) {
    w.WriteFecSource(FecSourceFrame{12, 3, 32, 8});
    mark(w, e);
  };
  auto loss = [&](PacketWriter& w, std::vector<size_t>& e) {
    w.WriteLossReport(LossReportFrame{1ULL << 40, 300, 20});
    mark(w, e);
  };
  auto handshake = [&](PacketWriter& w, std::vector<size_t>& e) {
    w.WriteHandshake(body);
    mark(w, e);
  };
  auto driver_state = [&](PacketWriter& w, std::vector<size_t>& e) {
    w.WriteDriverState(1ULL << 20, body);
    mark(w, e);
  };
  add("data", data);
  add("ack", ack);
  add("close", close);
  add("ping", ping);
  add("fec_repair", repair);
  add("fec_source", source);
  add("loss_report", loss);
  add("handshake", handshake);
  add("driver_state", driver_state);
  add("mixed", [&](PacketWriter& w, std::vector<size_t>& e) {
    source(w, e);
    data(w, e);
    ack(w, e);
    ping(w, e);
    repair(w, e);
    loss(w, e);
    handshake(w, e);
    driver_state(w, e);
    close(w, e);
  });
  return out;
}

TEST(SamplePacketsTest, AllDecode) {
  for (const Sample& s : SamplePackets()) {
    absl::StatusOr<std::vector<Frame>> frames = DecodeDatagram(s.datagram);
    ASSERT_TRUE(frames.ok()) << s.name << ": " << frames.status();
    EXPECT_EQ(frames->size(), s.frame_ends.size()) << s.name;
  }
}

// ---------------------------------------------------------------- truncation

TEST(TruncationTest, EveryPrefixOfTheDatagramIsRejected) {
  for (const Sample& s : SamplePackets()) {
    for (size_t len = 0; len < s.datagram.size(); ++len) {
      // A fresh, exactly sized heap copy: any read past `len` is an ASan error.
      Bytes cut(s.datagram.begin(), s.datagram.begin() + len);
      absl::StatusOr<PacketView> v = ParsePacket(cut);
      ASSERT_FALSE(v.ok()) << s.name << " accepted at length " << len;
      if (len < kMinDatagramSize) {
        EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument) << s.name << " " << len;
        EXPECT_FALSE(PeekHeader(cut).ok());
      } else {
        EXPECT_EQ(v.status().code(), absl::StatusCode::kDataLoss) << s.name << " " << len;
      }
    }
  }
}

// Truncates the frame bytes at every position, then either decodes them straight from an
// exactly sized buffer or reseals them into a datagram with a valid checksum, so the
// frame parser itself sees the truncation.
TEST(TruncationTest, FramesCutAtEveryByteErrorUnlessCutOnABoundary) {
  for (const Sample& s : SamplePackets()) {
    const Bytes frames = FrameBytes(s.datagram);
    for (size_t cut = 0; cut < frames.size(); ++cut) {
      const bool boundary = cut == 0 || std::find(s.frame_ends.begin(), s.frame_ends.end(), cut) !=
                                            s.frame_ends.end();
      size_t whole_frames = 0;
      while (whole_frames < s.frame_ends.size() && s.frame_ends[whole_frames] <= cut)
        ++whole_frames;

      Bytes exact(frames.begin(), frames.begin() + cut);
      absl::StatusOr<std::vector<Frame>> direct = ReadAllFrames(exact.data(), exact.size());
      if (boundary) {
        ASSERT_TRUE(direct.ok()) << s.name << " cut at " << cut << ": " << direct.status();
        EXPECT_EQ(direct->size(), whole_frames) << s.name << " cut at " << cut;
      } else {
        ASSERT_FALSE(direct.ok()) << s.name << " cut at " << cut << " was accepted";
        EXPECT_EQ(direct.status().code(), absl::StatusCode::kInvalidArgument);
        EXPECT_THAT(std::string(direct.status().message()),
                    ::testing::AnyOf(HasSubstr("truncated"), HasSubstr("past the packet")))
            << s.name << " cut at " << cut;
      }

      if (cut == 0) continue;  // an empty frame area is below the minimum datagram size
      Bytes resealed = PacketFromFrameBytes(exact);
      absl::StatusOr<std::vector<Frame>> via_packet = DecodeDatagram(resealed);
      EXPECT_EQ(via_packet.ok(), boundary) << s.name << " cut at " << cut;
    }
  }
}

// ---------------------------------------------------------------- garbage

TEST(GarbageTest, RandomDatagramsAreRejectedWithoutCrashing) {
  Rng rng(20240601);
  for (int i = 0; i < 20000; ++i) {
    Bytes d(rng.UniformInt(1600));
    for (auto& b : d) b = static_cast<uint8_t>(rng.Next());
    // Half of them get a plausible version byte so more reach the checksum.
    if (!d.empty() && (i & 1)) d[0] = kVersion;
    absl::StatusOr<PacketView> v = ParsePacket(d);
    // A random 32-bit checksum matches with probability 2^-32; with this fixed seed none do.
    ASSERT_FALSE(v.ok()) << "iteration " << i;
    EXPECT_THAT(v.status().code(),
                ::testing::AnyOf(absl::StatusCode::kInvalidArgument, absl::StatusCode::kDataLoss));
  }
}

TEST(GarbageTest, RandomFramesWithValidChecksumNeverOverrun) {
  Rng rng(77);
  int accepted = 0, rejected = 0;
  for (int i = 0; i < 20000; ++i) {
    Bytes frames(1 + rng.UniformInt(400));
    for (auto& b : frames) b = static_cast<uint8_t>(rng.Next());
    // Bias the first byte towards known frame types so every decoder path is exercised.
    if (i % 4 != 0) frames[0] = static_cast<uint8_t>(rng.UniformInt(10));
    Bytes exact = frames;
    absl::StatusOr<std::vector<Frame>> direct = ReadAllFrames(exact.data(), exact.size());
    if (direct.ok()) {
      ++accepted;
    } else {
      ++rejected;
      ASSERT_EQ(direct.status().code(), absl::StatusCode::kInvalidArgument) << direct.status();
    }
    absl::StatusOr<std::vector<Frame>> via_packet = DecodeDatagram(PacketFromFrameBytes(frames));
    ASSERT_EQ(via_packet.ok(), direct.ok()) << "iteration " << i;
  }
  EXPECT_GT(rejected, 0);
  EXPECT_GT(accepted, 0);  // PING, padding and short LOSS_REPORTs are easy to hit
}

// ---------------------------------------------------------------- checksum, version, type

TEST(ChecksumTest, EveryBitFlipIsDetected) {
  const Sample s = SamplePackets().back();  // mixed
  Bytes d = s.datagram;
  for (size_t i = 0; i < d.size(); ++i) {
    for (int b = 0; b < 8; ++b) {
      d[i] ^= static_cast<uint8_t>(1 << b);
      absl::StatusOr<PacketView> v = ParsePacket(d);
      ASSERT_FALSE(v.ok()) << "flip at byte " << i << " bit " << b;
      if (i >= 2) {
        EXPECT_EQ(v.status().code(), absl::StatusCode::kDataLoss) << i << ":" << b;
        EXPECT_THAT(std::string(v.status().message()), HasSubstr("checksum"));
      }
      d[i] ^= static_cast<uint8_t>(1 << b);
    }
  }
  EXPECT_TRUE(ParsePacket(d).ok());
}

TEST(ChecksumTest, ChecksumOverTheFramesOnlyIsWrong) {
  Bytes d = SamplePackets()[0].datagram;
  d[kHeaderSize + 1] ^= 1;
  EXPECT_EQ(ParsePacket(d).status().code(), absl::StatusCode::kDataLoss);
  Reseal(d);
  EXPECT_TRUE(ParsePacket(d).ok());
}

TEST(HeaderValidationTest, WrongVersionIsRejectedEvenWithAValidChecksum) {
  for (int version : {0, 2, 0x80, 0xFF}) {
    Bytes d = SamplePackets()[0].datagram;
    d[0] = static_cast<uint8_t>(version);
    Reseal(d);
    absl::StatusOr<PacketView> v = ParsePacket(d);
    ASSERT_FALSE(v.ok());
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(v.status().message()), HasSubstr("version"));
    EXPECT_FALSE(PeekHeader(d).ok());
  }
}

TEST(HeaderValidationTest, SealedPacketsRouteButAreNotParsedAsChecksummed) {
  for (int type : {0x04, 0x84}) {
    Bytes d = SamplePackets()[0].datagram;
    d[1] = static_cast<uint8_t>(type);
    Reseal(d);
    absl::StatusOr<PacketHeader> h = PeekHeader(d);
    ASSERT_TRUE(h.ok()) << h.status();
    EXPECT_EQ(h->type, PacketType::kSealed);
    absl::StatusOr<PacketView> v = ParsePacket(d);
    ASSERT_FALSE(v.ok());
    EXPECT_THAT(std::string(v.status().message()), HasSubstr("sealed"));
  }
}

TEST(HeaderValidationTest, UnknownPacketTypeIsRejected) {
  for (int type : {5, 0x44, 0x7F, 0x83, 0xFF}) {
    Bytes d = SamplePackets()[0].datagram;
    d[1] = static_cast<uint8_t>(type);
    Reseal(d);
    absl::StatusOr<PacketView> v = ParsePacket(d);
    ASSERT_FALSE(v.ok());
    EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(v.status().message()), HasSubstr("packet type"));
    EXPECT_FALSE(PeekHeader(d).ok());
  }
}

TEST(HeaderValidationTest, LengthLimits) {
  for (size_t n : {size_t{0}, size_t{1}, kHeaderSize, kPacketOverhead}) {
    Bytes d(n, 0);
    if (n > 0) d[0] = kVersion;
    EXPECT_EQ(ParsePacket(d).status().code(), absl::StatusCode::kInvalidArgument) << n;
  }
  // One byte over the maximum, otherwise valid.
  Bytes big(kMaxDatagramSize + 1, 0);
  big[0] = kVersion;
  Reseal(big);
  absl::StatusOr<PacketView> v = ParsePacket(big);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInvalidArgument);
  // Exactly the maximum, all padding: valid, no frames.
  Bytes max(kMaxDatagramSize, 0);
  max[0] = kVersion;
  Reseal(max);
  absl::StatusOr<std::vector<Frame>> frames = DecodeDatagram(max);
  ASSERT_TRUE(frames.ok()) << frames.status();
  EXPECT_TRUE(frames->empty());
}

// ---------------------------------------------------------------- malformed frames

// Little builder for hand-written frame bytes.
class Raw {
 public:
  Raw& U8(uint8_t v) {
    b_.push_back(v);
    return *this;
  }
  Raw& Var(uint64_t v) {
    uint8_t tmp[8];
    size_t n = WriteVarint(tmp, v);
    b_.insert(b_.end(), tmp, tmp + n);
    return *this;
  }
  Raw& U64(uint64_t v) {
    for (int i = 7; i >= 0; --i) b_.push_back(static_cast<uint8_t>(v >> (8 * i)));
    return *this;
  }
  Raw& Fill(size_t n) {
    b_.insert(b_.end(), n, 0xAB);
    return *this;
  }
  const Bytes& bytes() const { return b_; }

 private:
  Bytes b_;
};

absl::Status DecodeRaw(const Raw& r) {
  absl::StatusOr<std::vector<Frame>> frames = DecodeDatagram(PacketFromFrameBytes(r.bytes()));
  return frames.status();
}

void ExpectMalformed(const Raw& r, const std::string& what) {
  absl::Status s = DecodeRaw(r);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << what << ": " << s;
  EXPECT_THAT(std::string(s.message()), HasSubstr(what));
}

Raw DataFrameBytes(uint8_t flags, uint64_t msg_len, uint64_t offset, uint64_t stream_base,
                   uint64_t length, size_t payload_bytes) {
  Raw r;
  r.U8(0x01)
      .U8(flags)
      .Var(4)
      .Var(msg_len)
      .Var(offset)
      .Var(stream_base)
      .Var(length)
      .Fill(payload_bytes);
  return r;
}

TEST(MalformedDataTest, ValidReferenceDecodes) {
  EXPECT_TRUE(DecodeRaw(DataFrameBytes(0, 100, 10, 0, 20, 20)).ok());
  EXPECT_TRUE(DecodeRaw(DataFrameBytes(kDataFlagLast, 100, 80, 0, 20, 20)).ok());
  EXPECT_TRUE(DecodeRaw(DataFrameBytes(kDataFlagLast, 0, 0, 0, 0, 0)).ok());
  EXPECT_TRUE(DecodeRaw(DataFrameBytes(0, 100, 100, 0, 0, 0)).ok());
  EXPECT_TRUE(DecodeRaw(DataFrameBytes(0, 100, 0, kMaxVarint - 100, 10, 10)).ok());
}

TEST(MalformedDataTest, PieceOutsideTheMessage) {
  ExpectMalformed(DataFrameBytes(0, 100, 101, 0, 0, 0), "outside the message");
  ExpectMalformed(DataFrameBytes(0, 100, 90, 0, 11, 11), "outside the message");
  ExpectMalformed(DataFrameBytes(0, 0, 0, 0, 1, 1), "outside the message");
  ExpectMalformed(DataFrameBytes(0, 10, kMaxVarint, 0, 5, 5), "outside the message");
}

TEST(MalformedDataTest, LastFlagInconsistent) {
  ExpectMalformed(DataFrameBytes(kDataFlagLast, 100, 10, 0, 20, 20), "does not end the message");
  ExpectMalformed(DataFrameBytes(kDataFlagLast, 100, 0, 0, 0, 0), "does not end the message");
}

TEST(MalformedDataTest, UnknownFlagBits) {
  for (int flag : {0x08, 0x80, 0xFF}) {  // 0x01 last, 0x02 unordered, 0x04 elided
    ExpectMalformed(DataFrameBytes(static_cast<uint8_t>(flag), 100, 0, 0, 100, 100), "flag");
  }
}

TEST(MalformedDataTest, StreamOffsetOverflow) {
  ExpectMalformed(DataFrameBytes(0, 100, 0, kMaxVarint - 99, 10, 10), "overflows");
  ExpectMalformed(DataFrameBytes(0, kMaxVarint, 0, 1, 10, 10), "overflows");
}

TEST(MalformedDataTest, PayloadPastThePacket) {
  ExpectMalformed(DataFrameBytes(0, 100, 0, 0, 20, 19), "past the packet");
  ExpectMalformed(DataFrameBytes(0, kMaxVarint, 0, 0, kMaxVarint, 3), "past the packet");
}

Raw AckBytes(uint64_t largest, uint64_t range_count, uint64_t first_range,
             const std::vector<std::pair<uint64_t, uint64_t>>& pairs) {
  Raw r;
  r.U8(0x02).Var(largest).Var(0).Var(0).Var(0).Var(0).Var(range_count).Var(first_range);
  for (auto [gap, len] : pairs) r.Var(gap).Var(len);
  return r;
}

TEST(MalformedAckTest, ValidReferenceDecodesDownToPacketZero) {
  // largest 10, first range 3 -> [7,10]; gap 0 -> next high 5, len 5 -> [0,5].
  Raw r = AckBytes(10, 1, 3, {{0, 5}});
  const Bytes d = PacketFromFrameBytes(r.bytes());  // frames point into it
  absl::StatusOr<std::vector<Frame>> frames = DecodeDatagram(d);
  ASSERT_TRUE(frames.ok()) << frames.status();
  std::vector<AckRange> ranges = testing::Ranges((*frames)[0].ack);
  ASSERT_EQ(ranges.size(), 2u);
  EXPECT_EQ(ranges[1].low, 0u);
  EXPECT_EQ(ranges[1].high, 5u);
  EXPECT_TRUE(DecodeRaw(AckBytes(0, 0, 0, {})).ok());
  EXPECT_TRUE(DecodeRaw(AckBytes(5, 0, 5, {})).ok());
}

TEST(MalformedAckTest, RangesBelowPacketZero) {
  ExpectMalformed(AckBytes(5, 0, 6, {}), "below packet 0");
  ExpectMalformed(AckBytes(10, 1, 3, {{0, 6}}), "below packet 0");   // low would be -1
  ExpectMalformed(AckBytes(10, 1, 3, {{6, 0}}), "below packet 0");   // high would be -1
  ExpectMalformed(AckBytes(10, 1, 9, {{0, 0}}), "below packet 0");   // low 1: no room for a gap
  ExpectMalformed(AckBytes(10, 1, 10, {{0, 0}}), "below packet 0");  // already at 0
  ExpectMalformed(AckBytes(kMaxVarint, 1, 0, {{kMaxVarint, 0}}), "below packet 0");
  ExpectMalformed(AckBytes(100, 2, 3, {{0, 5}, {80, 10}}), "below packet 0");
}

TEST(MalformedAckTest, MoreRangesAnnouncedThanPresent) {
  ExpectMalformed(AckBytes(1000, 3, 3, {{0, 5}, {1, 1}}), "truncated gap");
  Raw r = AckBytes(1000, 1, 3, {});
  r.Var(0);  // gap without length
  ExpectMalformed(r, "truncated range length");
  ExpectMalformed(AckBytes(1000, kMaxVarint, 3, {{0, 5}}), "truncated");
}

Raw FecRepairBytes(uint8_t index, uint8_t k, uint8_t m, uint64_t length, size_t payload) {
  Raw r;
  r.U8(0x05).Var(1).U8(index).U8(k).U8(m).Var(length).Fill(payload);
  return r;
}

TEST(MalformedFecTest, RepairParametersOutOfRange) {
  EXPECT_TRUE(DecodeRaw(FecRepairBytes(0, 1, 1, 4, 4)).ok());
  EXPECT_TRUE(DecodeRaw(FecRepairBytes(54, 200, 55, 0, 0)).ok());
  ExpectMalformed(FecRepairBytes(0, 0, 4, 4, 4), "k/m/index");     // k = 0
  ExpectMalformed(FecRepairBytes(0, 4, 0, 4, 4), "k/m/index");     // m = 0
  ExpectMalformed(FecRepairBytes(4, 32, 4, 4, 4), "k/m/index");    // index == m
  ExpectMalformed(FecRepairBytes(255, 32, 4, 4, 4), "k/m/index");  // index > m
  ExpectMalformed(FecRepairBytes(0, 200, 56, 4, 4), "k/m/index");  // k + m = 256
  ExpectMalformed(FecRepairBytes(0, 255, 255, 4, 4), "k/m/index");
  ExpectMalformed(FecRepairBytes(0, 4, 2, 10, 9), "past the packet");
}

Raw FecSourceBytes(uint8_t index, uint8_t k, uint8_t m) {
  Raw r;
  r.U8(0x06).U64(~0ULL).U8(index).U8(k).U8(m);
  return r;
}

TEST(MalformedFecTest, SourceParametersOutOfRange) {
  EXPECT_TRUE(DecodeRaw(FecSourceBytes(0, 1, 1)).ok());
  EXPECT_TRUE(DecodeRaw(FecSourceBytes(199, 200, 55)).ok());
  ExpectMalformed(FecSourceBytes(0, 0, 4), "k/m/index");     // k = 0
  ExpectMalformed(FecSourceBytes(32, 32, 4), "k/m/index");   // index == k
  ExpectMalformed(FecSourceBytes(0, 200, 56), "k/m/index");  // k + m = 256
  ExpectMalformed(FecSourceBytes(0, 255, 255), "k/m/index");
}

TEST(MalformedFrameTest, UnknownFrameTypes) {
  for (int type : {0x0A, 0x0B, 0x40, 0x80, 0xFF}) {
    Raw r;
    r.U8(0x04).U8(static_cast<uint8_t>(type)).Fill(8);
    absl::Status s = DecodeRaw(r);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), HasSubstr("unknown frame type"));
  }
}

TEST(MalformedFrameTest, LengthPrefixedBodiesPastThePacket) {
  Raw close;
  close.U8(0x03).Var(1).Var(10).Fill(9);
  ExpectMalformed(close, "past the packet");
  Raw hs;
  hs.U8(0x08).Var(1ULL << 40).Fill(100);
  ExpectMalformed(hs, "past the packet");
}

Raw DriverStateBytes(uint64_t sequence, uint64_t length, size_t bytes) {
  Raw r;
  r.U8(0x09).Var(sequence).Var(length).Fill(bytes);
  return r;
}

TEST(MalformedDriverStateTest, ValidReferenceDecodes) {
  EXPECT_TRUE(DecodeRaw(DriverStateBytes(1, 0, 0)).ok());
  EXPECT_TRUE(DecodeRaw(DriverStateBytes(kMaxVarint, kMaxDriverState, kMaxDriverState)).ok());
}

TEST(MalformedDriverStateTest, TruncatedFrameIsRejected) {
  ExpectMalformed(DriverStateBytes(7, 100, 99), "past the packet");
  ExpectMalformed(DriverStateBytes(7, kMaxDriverState, 0), "past the packet");
  Raw no_length;
  no_length.U8(0x09).Var(7);
  ExpectMalformed(no_length, "truncated length");
  Raw no_sequence;
  no_sequence.U8(0x09);
  ExpectMalformed(no_sequence, "truncated sequence");
}

TEST(MalformedDriverStateTest, OverLongStateIsRejected) {
  // Longer than kMaxDriverState: malformed even when every byte is there.
  ExpectMalformed(DriverStateBytes(7, kMaxDriverState + 1, kMaxDriverState + 1),
                  "longer than 1024 bytes");
  ExpectMalformed(DriverStateBytes(7, 1ULL << 40, 100), "longer than 1024 bytes");
}

TEST(MalformedFrameTest, ErrorStopsAtTheBadFrame) {
  // A valid PING, then an unknown frame: the reader returns the PING, then the error.
  Raw r;
  r.U8(0x04).U8(0x0C).Fill(3);
  Bytes d = PacketFromFrameBytes(r.bytes());
  absl::StatusOr<PacketView> v = ParsePacket(d);
  ASSERT_TRUE(v.ok());
  FrameReader reader(*v);
  Frame f;
  absl::StatusOr<bool> first = reader.Next(&f);
  ASSERT_TRUE(first.ok());
  EXPECT_TRUE(*first);
  EXPECT_EQ(f.type, FrameType::kPing);
  EXPECT_FALSE(reader.Next(&f).ok());
}

}  // namespace
}  // namespace longhaul::wire
